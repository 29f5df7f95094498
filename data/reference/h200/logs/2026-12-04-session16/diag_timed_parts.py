"""Where the pipeline's recorder (Timeline(infer_starts=True), one event per op) spends its host time
per op on this host: the recorder as it is, and variants each leaving one part out, beside the bare
call, taken in turn as `kernellab bench 07` takes them (timing.time_host_in_turn, 40 reps of 100
calls), on a one-block launch and a 1 KiB pinned copy. Variants: no host clock read at the end
(`returned`), no cuEventRecord (in both, the data are not collected), the note alone through
the same two halves (start returns None), and the trace-only recorder."""
import contextlib, time
import numpy as np
from kernellab.course import target
from kernellab.gpu import device, hooks, timing, timeline
from kernellab.gpu.timeline import Timeline, _SPECIAL_ROWS, _new_event, _spare_events, reserve_events


def brackets(self, keep_returned=True, keep_record=True, note_only=False):
    known_key, remember = self._stream_keys.get, self._stream_keys.remember
    submitted, clock = self._submitted, time.perf_counter
    note, after, timing_ = submitted.append, self._after, self._timing
    spare, cuda, record = _spare_events, self._cuda, self._record
    returned, events = self._returned, self._events
    inferring = self.infer_starts
    if not keep_record:
        record = lambda e, s: 0

    def start(kind, what, stream, dims=None, captured=False):
        known = known_key(id(stream))
        key = known[0] if known is not None else remember(stream)
        index = len(submitted)
        note((kind, what, key, clock(), dims))
        if note_only:
            return None
        before = None
        if after:
            if key in _SPECIAL_ROWS:
                after.clear()
            else:
                before = after.pop(key, None)
        if captured or kind not in timing_:
            return None
        end_event = spare.pop() if spare else _new_event(cuda)
        if before is not None:
            return index, before, end_event, key
        start_event = spare.pop() if spare else _new_event(cuda)
        record(start_event[1], key)
        return index, start_event, end_event, key

    def end(started):
        if started is None:
            return
        index, start_event, end_event, key = started
        record(end_event[1], key)
        if type(start_event[0]) is int:
            if keep_returned:
                returned[index] = clock()
            events.extend((index, start_event[0], end_event))
        else:
            events.extend((index, start_event, end_event))
        if inferring and key not in _SPECIAL_ROWS:
            after[key] = index, end_event
    return start, end


def variant(**flags):
    class Variant(Timeline):
        def _timing_brackets(self):
            return brackets(self, **flags)
        if not (flags.get("keep_record", True) and flags.get("keep_returned", True)):
            def _collect(self):      # what it needs was left out: nothing to collect
                return None
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
reserve_events(2 * reps * inner + inner)
opened = dict(infer_starts=True, streams=(stream,))
ways = {"bare": contextlib.nullcontext,
        "recorder": lambda: Timeline(**opened),
        "recorder_copied": lambda: variant()(**opened),
        "no_returned": lambda: variant(keep_returned=False)(**opened),
        "no_record": lambda: variant(keep_record=False)(**opened),
        "note_only_two_halves": lambda: variant(note_only=True)(**opened),
        "trace_only": lambda: Timeline(timed=())}
for name, call in calls.items():
    taken = timing.time_host_in_turn({w: (o, call) for w, o in ways.items()}, inner=inner, reps=reps)
    bare = taken["bare"]
    print(f"{name}: bare {np.median(bare.samples_ms) * 1e3:.1f} us; over bare (median of {reps} paired reps):")
    for w in ways:
        if w != "bare":
            over = [1e3 * d for d in timing.paired(taken[w], bare)]
            print(f"  {w:22s} {np.median(over):+6.2f} us  (p25 {np.percentile(over, 25):+.2f}, p75 {np.percentile(over, 75):+.2f})")
