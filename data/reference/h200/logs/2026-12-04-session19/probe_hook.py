"""Session 19, call G: what replacing numba-cuda's method costs a call on the H200's host, taken
apart (timing.time_host_in_turn, the ways in turn within each rep, 60 reps of 100 calls, per op over
the bare call in the same rep), for a one-block launch and a 1 KiB pinned copy on a stream:
- class_touched: the method set back to itself as the block opens and closes (the class modified,
  the call sites re-specialized; no hook);
- python_passthrough: a Python function in its place that calls the original;
- compiled_noop: the compiled hook with a Bracket whose halves do nothing (bench 07's hooks_only_compiled);
- inferred_starts: the pipeline's recorder (bench 07's), on its compiled hot path.
Writes one JSON to argv[1]."""
import contextlib
import json
import sys

import numpy as np

from kernellab.gpu import device, hooks, timing
from kernellab.gpu.timeline import Timeline, reserve_events
from solutions import lab07_streams as lab

cuda = device.cuda()
stream = cuda.stream()
from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase
from numba.cuda.dispatcher import CUDADispatcher

small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": (lambda: lab.busy(small, 1, out=small, stream=stream), CUDADispatcher, "call"),
         "copy": (lambda: small.copy_to_device(host, stream=stream), DeviceNDArrayBase, "copy_to_device")}


@contextlib.contextmanager
def replaced(owner, name, make):
    original = owner.__dict__[name]
    setattr(owner, name, make(original))
    try:
        yield
    finally:
        setattr(owner, name, original)


def passthrough(original):
    def hooked(*args, **kwargs):
        return original(*args, **kwargs)
    return hooked


compiled = hooks.hot_path()
noop = hooks.Bracket(compiled.noop, compiled.noop)
reserve_events(60 * 100 + 100)
found = {}
for name, (call, owner, method) in calls.items():
    ways = {"bare": (contextlib.nullcontext, call),
            "class_touched": (lambda: replaced(owner, method, lambda original: original), call),
            "python_passthrough": (lambda: replaced(owner, method, passthrough), call),
            "compiled_noop": (lambda: hooks.subscribe(launch=noop, copy_to_device=noop), call),
            "inferred_starts": (lambda: Timeline(infer_starts=True, streams=(stream,)), call)}
    taken = timing.time_host_in_turn(ways, inner=100, reps=60)
    found[name] = {"bare_us": 1e3 * float(np.median(taken["bare"].samples_ms)),
                   **{way: float(np.median([1e3 * d for d in timing.paired(taken[way], taken["bare"])]))
                      for way in ways if way != "bare"}}
    print(name, json.dumps(found[name]), flush=True)
json.dump(found, open(sys.argv[1], "w"), indent=1)
