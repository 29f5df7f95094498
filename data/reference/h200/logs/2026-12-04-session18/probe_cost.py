"""Session 18's probe: where the pipeline recorder's per-op cost goes, on the lent H200's host.

Each way is a one-block launch or a 1 KiB pinned copy on one stream, timed as `kernellab bench 07`
times its recorder costs (timing.time_host_in_turn: the ways in turn within each rep, per op over
the bare call as the median of paired differences). The ways take the recorder apart:
  event_python_same   one event after the call, recorded from Python through ctypes (events_around)
  event_c_same        the same event recorded from C (probe.record): no Python on the path
  event_c_warm        a different event each op from 256 that were recorded before, from C
  event_c_fresh       a never-recorded event each op, from C (as a pool of new events would)
  hooks_c_noop        the compiled hook with a Bracket whose halves are C functions doing nothing
  hooks_python_noop   the compiled hook with a Python `before` doing nothing (bench 07's hooks_only)
  trace_only          Timeline(timed=())
  pipeline            the pipeline's recorder, Timeline(infer_starts=True, streams=(stream,))
  pipeline_nogc / bare_nogc   the same with the garbage collector off inside the sample
Then, apart: the collector's passes per 1000 ops in each way (gc.callbacks), and the compiled
bookkeeping alone in a tight loop (a fake driver: pthread_equal, which returns 0 for two handles).
Writes one JSON to argv[1]."""
import contextlib, ctypes, gc, json, sys, time

import numpy as np

from kernellab.gpu import device, hooks, timing
from kernellab.gpu import timeline as tl
from kernellab.gpu.timeline import Makespan, Timeline, events_around, reserve_events
from solutions import lab07_streams as lab
import probe

REPS, INNER = int(sys.argv[2]) if len(sys.argv) > 2 else 60, 100
cuda = device.cuda()
record = tl._event_recorder()
probe.driver(tl._driver_address(record))
stream = cuda.stream()
key = Timeline._key(stream)
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
reserve_events(REPS * INNER + INNER)
same = tl._new_event(cuda)
warm = [tl._new_event(cuda) for _ in range(256)]
for event in warm:
    record(event[1], key)
cuda.synchronize()
fresh_needed = (REPS + 1) * INNER + 10


def with_event_c_same(call):
    handle = same[1]
    def way():
        call()
        probe.record(handle, key)
    return way


def with_event_c_warm(call):
    handles = [e[1] for e in warm]
    at = [0]
    def way():
        call()
        at[0] = (at[0] + 1) & 255
        probe.record(handles[at[0]], key)
    return way


def with_event_c_fresh(call):
    made = [tl._new_event(cuda) for _ in range(fresh_needed)]   # kept alive with the way
    handles = [e[1] for e in made]
    it = iter(handles)
    def way():
        call()
        probe.record(next(it), key)
    way.keep = made
    return way


@contextlib.contextmanager
def gc_off(opened):
    with opened():
        gc.disable()
        try:
            yield
        finally:
            gc.enable()


c_noop = hooks.Bracket(probe.noop, probe.noop)
py_noop = hooks.Bracket(lambda *args, **kwargs: None)
ways = {"bare": contextlib.nullcontext,
        "event_python_same": contextlib.nullcontext, "event_c_same": contextlib.nullcontext,
        "event_c_warm": contextlib.nullcontext, "event_c_fresh": contextlib.nullcontext,
        "hooks_c_noop": lambda: hooks.subscribe(launch=c_noop, copy_to_device=c_noop),
        "hooks_python_noop": lambda: hooks.subscribe(launch=py_noop, copy_to_device=py_noop),
        "trace_only": lambda: Timeline(timed=()),
        "pipeline": lambda: Timeline(infer_starts=True, streams=(stream,)),
        "pipeline_nogc": lambda: gc_off(lambda: Timeline(infer_starts=True, streams=(stream,))),
        "bare_nogc": lambda: gc_off(contextlib.nullcontext)}
wrap = {"event_python_same": lambda call: events_around(call, stream, before=False),
        "event_c_same": with_event_c_same, "event_c_warm": with_event_c_warm,
        "event_c_fresh": with_event_c_fresh}

out = {"hot_path": tl.hot_path_words(), "reps": REPS, "inner": INNER, "ways": {}}
for name, call in calls.items():
    taken = timing.time_host_in_turn({w: (o, wrap.get(w, lambda c: c)(call)) for w, o in ways.items()},
                                     inner=INNER, reps=REPS)
    row = {"bare_us": float(np.median(taken["bare"].samples_ms)) * 1e3}
    for w in ways:
        ref = "bare_nogc" if w == "pipeline_nogc" else "bare"
        if w == "bare":
            continue
        diffs = [1e3 * d for d in timing.paired(taken[w], taken[ref])]
        row[w] = {"median": float(np.median(diffs)), "p10": float(np.percentile(diffs, 10)),
                  "p90": float(np.percentile(diffs, 90))}
    out["ways"][name] = row
    print(name, {k: (round(v["median"], 2) if isinstance(v, dict) else round(v, 2)) for k, v in row.items()},
          flush=True)

# The collector's passes per 1000 ops, by generation, and their time, in each way (apart from the timing).
passes = {}
state = {"t": 0.0, "gen": [0, 0, 0], "ms": 0.0}
def tally(phase, info):
    if phase == "start":
        state["t"] = time.perf_counter()
    else:
        state["gen"][info["generation"]] += 1
        state["ms"] += 1e3 * (time.perf_counter() - state["t"])
gc.callbacks.append(tally)
for name, call in calls.items():
    for w in ("bare", "trace_only", "pipeline", "hooks_python_noop", "event_python_same"):
        f = wrap.get(w, lambda c: c)(call)
        state.update(gen=[0, 0, 0], ms=0.0)
        for _ in range(30):
            with ways[w]():
                for _ in range(INNER):
                    f()
            cuda.synchronize()
        passes[f"{name}/{w}"] = {"per_1000_ops": [g * 1000 / (30 * INNER) for g in state["gen"]],
                                 "us_per_op": state["ms"] * 1e3 / (30 * INNER)}
gc.callbacks.remove(tally)
out["gc"] = passes
print("gc", json.dumps(passes), flush=True)

# The compiled bookkeeping alone, warm, no GPU: Noter.note and Recorder.start+end with a fake driver.
from kernellab.gpu import _hotpath
fake = ctypes.cast(ctypes.CDLL(None).pthread_equal, ctypes.c_void_p).value
s = object()
keys = {id(s): (12345, s)}
N = 200000
def loop(fn):
    best = []
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(N):
            fn()
        best.append((time.perf_counter() - t) / N * 1e9)
    return min(best)
sub = []
noter = _hotpath.Noter(sub, keys, lambda x: 1)
tight = {"empty_loop_ns": loop(lambda: None), "noter_note_ns": loop(lambda: noter.note("h2d", 1024, s))}
sub.clear()
spare = [(object(), 1000 + i) for i in range(3 * N + 10)]
rec = _hotpath.Recorder(sub, keys, lambda x: 1, {12345: True}, {}, ("kernel", "h2d", "d2h"), spare,
                        lambda: (object(), 7), {}, {}, {}, fake, True)
tight["recorder_start_end_ns"] = loop(lambda: rec.end(rec.start("h2d", 1024, s)))
out["tight"] = tight
print("tight", tight, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
