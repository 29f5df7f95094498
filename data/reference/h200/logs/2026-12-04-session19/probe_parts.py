"""Session 19, call H: the pipeline's recorder taken apart on the H200's host, per op over the bare
call in the same rep (timing.time_host_in_turn: the ways in turn within each rep, 150 reps of 100
calls), a one-block launch and a 1 KiB pinned copy on a stream:
- hooks_noop: the compiled hook, its Bracket's halves doing nothing (bench 07's hooks_only_compiled);
- trace_only: Timeline(timed=()), the compiled note and nothing else;
- inferred_no_driver: the pipeline's recorder (Timeline(infer_starts=True, streams=...)) with its
  cuEventRecord replaced by a C function that returns 0 at once (libc's pthread_equal on two
  different handles): its hook and bookkeeping without the driver;
- inferred: the pipeline's recorder as bench 07 times it;
- event_same: the call, then one event recorded from C, the same event each time (bench 07's floor);
- event_rotating: the same, each call's event the next of 100 (the recorder takes one per op).
Writes one JSON to argv[1]."""
import contextlib
import ctypes
import itertools
import json
import sys

import numpy as np

from kernellab.gpu import device, hooks, timeline, timing
from kernellab.gpu.timeline import Timeline, reserve_events
from solutions import lab07_streams as lab

REPS = 150
cuda = device.cuda()
stream = cuda.stream()
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
compiled = hooks.hot_path()
noop = hooks.Bracket(compiled.noop, compiled.noop)
no_driver = ctypes.cast(ctypes.CDLL(None).pthread_equal, ctypes.c_void_p).value
driver = timeline._driver_address(timeline._event_recorder())
key = Timeline._key(stream)
events = [timeline._new_event(cuda) for _ in range(100)]
handles = [handle for _, handle in events]


class NoDriver:
    """The pipeline's recorder, its records made by a function that does nothing; its data not read."""

    def __enter__(self):
        real, timeline._driver_address = timeline._driver_address, lambda record: no_driver
        try:
            self.timeline = Timeline(infer_starts=True, streams=(stream,)).__enter__()
        finally:
            timeline._driver_address = real
        return self

    def __exit__(self, *exc):
        try:
            self.timeline.__exit__(*exc)
        except Exception:      # its events were never recorded: nothing to collect
            pass
        return False


def after(call, rotate):
    turn = itertools.cycle(handles) if rotate else itertools.repeat(handles[0])
    record = compiled.record

    def way():
        call()
        record(driver, next(turn), key)
    return way


reserve_events(REPS * 100 + 100)
found = {}
for name, call in calls.items():
    ways = {"bare": (contextlib.nullcontext, call),
            "hooks_noop": (lambda: hooks.subscribe(launch=noop, copy_to_device=noop), call),
            "trace_only": (lambda: Timeline(timed=()), call),
            "inferred_no_driver": (NoDriver, call),
            "inferred": (lambda: Timeline(infer_starts=True, streams=(stream,)), call),
            "event_same": (contextlib.nullcontext, after(call, False)),
            "event_rotating": (contextlib.nullcontext, after(call, True))}
    taken = timing.time_host_in_turn(ways, inner=100, reps=REPS)
    found[name] = {"bare_us": 1e3 * float(np.median(taken["bare"].samples_ms))}
    for way in ways:
        if way != "bare":
            over = [1e3 * d for d in timing.paired(taken[way], taken["bare"])]
            found[name][way] = {"median": float(np.median(over)), "p25": float(np.percentile(over, 25)),
                                "p75": float(np.percentile(over, 75))}
    print(name, json.dumps({w: round(v["median"], 2) if isinstance(v, dict) else round(v, 1)
                            for w, v in found[name].items()}), flush=True)
json.dump(found, open(sys.argv[1], "w"), indent=1)
