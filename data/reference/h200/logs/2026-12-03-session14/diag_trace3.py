"""Call L (session 14): within the trace-only Timeline's handlers, which step costs the host per op
(call K: the copy handler +1.9-4.0 us, a Bracket noting the host time +0.2-1.1). Variants taken in turn with the bare call (timing.time_host_in_turn,
60 reps of 100 calls, as lab07_measure.measure_recorder_cost): the Timeline as it is; the same
with nothing done as it opens (no origin stream or event); its launch and copy handlers alone,
subscribed for those two ops only; a Bracket that only appends the host time to a list."""
import contextlib
import time

import numpy as np

import solutions.lab07_streams as lab
from kernellab.gpu import device, hooks, timing
from kernellab.gpu.timeline import Timeline, reserve_events

cuda = device.cuda()
stream = cuda.stream()
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
passing_on = hooks.Bracket(lambda *args, **kwargs: None)


def untimed():
    timeline = Timeline(timed=())
    timeline.timed = False          # as in the simulator: nothing recorded as it opens or closes
    return timeline


def handlers_alone():
    handlers = untimed()._handlers()
    return hooks.subscribe(launch=handlers["launch"], copy_to_device=handlers["copy_to_device"])


def clock_list():
    times = []
    note = hooks.Bracket(lambda *args, **kwargs: times.append(time.perf_counter()))
    return hooks.subscribe(launch=note, copy_to_device=note)


def tuple_list():
    noted = []
    note_launch = hooks.Bracket(lambda name, stream, dims, captured: noted.append(("kernel", name, 1, time.perf_counter(), dims)))
    note_copy = hooks.Bracket(lambda array, source, stream=0: noted.append(("h2d", 0, 1, time.perf_counter(), None)))
    return hooks.subscribe(launch=note_launch, copy_to_device=note_copy)


def start_only():
    timeline = untimed()
    launch = hooks.Bracket(lambda name, stream, dims, captured: timeline._start("kernel", name, stream, dims))
    copy = hooks.Bracket(lambda array, source, stream=0: timeline._start("h2d", 0, stream))
    return hooks.subscribe(launch=launch, copy_to_device=copy)


ways = {"bare": contextlib.nullcontext,
        "hooks_two": lambda: hooks.subscribe(launch=passing_on, copy_to_device=passing_on),
        "clock_list": clock_list, "tuple_list": tuple_list, "start_only": start_only,
        "handlers_alone": handlers_alone}
reserve_events(2000)
for name, call in calls.items():
    for repeat in range(3):
        taken = timing.time_host_in_turn({w: (o, call) for w, o in ways.items()}, inner=100, reps=60)
        over = {w: np.median(timing.paired(taken[w], taken["bare"])) * 1e3 for w in ways}
        bare = np.median(taken["bare"].samples_ms) * 1e3
        print(f"{name} repeat {repeat + 1}: bare {bare:.1f} us; over bare (us): "
              + ", ".join(f"{w} {v:+.2f}" for w, v in over.items() if w != "bare"), flush=True)
