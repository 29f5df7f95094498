"""Call W found the pipeline's recorder's Python, without its cuEventRecord, at +3-5 us per op over the
note alone on this host (2-3 us on the laptop-class machine it was written on is ~0.3). Which part:
variants of the hot path's two halves, each adding one part to the note, taken in turn with the
bare call (timing.time_host_in_turn, 40 reps of 100 calls), on a one-block launch and a 1 KiB pinned
copy: the note alone; one pooled event popped and pushed back (the pool's traffic); the same and
its handle read; the recorder's bookkeeping without the driver call, its events from the big pool
and from a pool of 8 kept hot; the bookkeeping's tuples and dicts with no event at all."""
import contextlib, time
import numpy as np
from kernellab.course import target
from kernellab.gpu import device, timing
from kernellab.gpu.timeline import Timeline, _SPECIAL_ROWS, _spare_events, reserve_events


def brackets(self, part):
    known_key, remember = self._stream_keys.get, self._stream_keys.remember
    submitted, clock = self._submitted, time.perf_counter
    note, after = submitted.append, self._after
    returned, events = self._returned, self._events
    hot = _spare_events[-8:]
    spare = _spare_events if part != "bookkeeping_hot_pool" else hot
    record = lambda handle, key: 0
    handles = []

    def start(kind, what, stream, dims=None, captured=False):
        known = known_key(id(stream))
        key = known[0] if known is not None else remember(stream)
        index = len(submitted)
        note((kind, what, key, clock(), dims))
        if part == "note":
            return None
        if part in ("pool", "pool_handle"):
            return spare.pop()
        before = None
        if after:
            if key in _SPECIAL_ROWS:
                after.clear()
            else:
                before = after.pop(key, None)
        if part == "tuples_no_event":
            return index, before if before is not None else (index, None), None, key
        end_event = spare.pop()
        if before is not None:
            return index, before, end_event, key
        start_event = spare.pop()
        record(start_event[1], key)
        return index, start_event, end_event, key

    def end(started):
        if started is None:
            return
        if part in ("pool", "pool_handle"):
            if part == "pool_handle":
                handles.append(started[1])
            spare.append(started)
            return
        index, start_event, end_event, key = started
        if end_event is not None:
            record(end_event[1], key)
        if type(start_event[0]) is int:
            returned[index] = clock()
            events.extend((index, start_event[0], end_event))
        else:
            events.extend((index, start_event, end_event))
        if key not in _SPECIAL_ROWS:
            after[key] = index, end_event
        if part == "bookkeeping_hot_pool":    # back to the hot pool at once (nothing is recorded)
            spare.append(end_event)
    return start, end


def variant(part):
    class Variant(Timeline):
        def _timing_brackets(self):
            return brackets(self, part)

        def _collect(self):     # nothing was recorded
            return None

        def __exit__(self, *exc):
            if part in ("pool", "pool_handle", "tuples_no_event", "bookkeeping_hot_pool"):
                self._events.clear()    # nothing of the big pool is held, or it was given back
            return super().__exit__(*exc)
    return Variant


lab = target.load("07")
cuda = device.cuda()
stream = cuda.stream()
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
reps, inner = 40, 100
reserve_events(3 * reps * inner + inner)
opened = dict(infer_starts=True, streams=(stream,))
parts = ("note", "pool", "pool_handle", "tuples_no_event", "bookkeeping_big_pool", "bookkeeping_hot_pool")
ways = {"bare": contextlib.nullcontext, **{p: (lambda p=p: variant(p)(**opened)) for p in parts}}
for name, call in calls.items():
    taken = timing.time_host_in_turn({w: (o, call) for w, o in ways.items()}, inner=inner, reps=reps)
    bare = taken["bare"]
    print(f"{name}: bare {np.median(bare.samples_ms) * 1e3:.1f} us; over bare (median of {reps} paired reps):")
    for w in ways:
        if w != "bare":
            over = [1e3 * d for d in timing.paired(taken[w], bare)]
            print(f"  {w:22s} {np.median(over):+6.2f} us  (p25 {np.percentile(over, 25):+.2f}, p75 {np.percentile(over, 75):+.2f})")
