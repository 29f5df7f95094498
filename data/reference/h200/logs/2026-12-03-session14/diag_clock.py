"""Call J (session 14): is the host's clock what a trace-only Timeline pays per op? The cost of
time.perf_counter() on this host, its clock source, and a trace-only Timeline with its per-op
clock read replaced by a constant, taken in turn with the bare call and the hooks alone
(timing.time_host_in_turn, 60 reps of 100 calls, as lab07_measure.measure_recorder_cost)."""
import contextlib
import time
import timeit
import types
from pathlib import Path

import numpy as np

import solutions.lab07_streams as lab
from kernellab.gpu import device, hooks, timeline, timing
from kernellab.gpu.timeline import Timeline, reserve_events

for name in ("current_clocksource", "available_clocksource"):
    path = Path("/sys/devices/system/clocksource/clocksource0") / name
    print(name, path.read_text().strip() if path.exists() else "?")
n = 200000
for what, clock in (("perf_counter", time.perf_counter), ("perf_counter_ns", time.perf_counter_ns),
                    ("monotonic", time.monotonic), ("time", time.time)):
    print(f"{what}: {timeit.timeit(clock, number=n) / n * 1e6:.3f} us per call", flush=True)

cuda = device.cuda()
stream = cuda.stream()
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
passing_on = hooks.Bracket(lambda *args, **kwargs: None)
no_clock = types.SimpleNamespace(perf_counter=lambda: 0.0)


@contextlib.contextmanager
def clock_constant():
    real = timeline.time
    timeline.time = no_clock
    try:
        with Timeline(timed=()):
            yield
    finally:
        timeline.time = real


ways = {"bare": contextlib.nullcontext,
        "hooks_two": lambda: hooks.subscribe(launch=passing_on, copy_to_device=passing_on),
        "trace_only": lambda: Timeline(timed=()),
        "trace_only_no_clock": clock_constant}
reserve_events(2000)
for name, call in calls.items():
    for repeat in range(3):
        taken = timing.time_host_in_turn({w: (o, call) for w, o in ways.items()}, inner=100, reps=60)
        over = {w: np.median(timing.paired(taken[w], taken["bare"])) * 1e3 for w in ways}
        bare = np.median(taken["bare"].samples_ms) * 1e3
        print(f"{name} repeat {repeat + 1}: bare {bare:.1f} us; over bare (us): "
              + ", ".join(f"{w} {v:+.2f}" for w, v in over.items() if w != "bare"), flush=True)
