"""Call I (session 14): where a trace-only Timeline's per-op host cost goes, on the H200's host.
Each way is taken in turn per rep (timing.time_host_in_turn), 60 reps of 100 calls, as
lab07_measure.measure_recorder_cost does; then a cProfile of 2000 calls per way, for call counts."""
import contextlib
import cProfile
import gc
import io
import pstats

import numpy as np

from kernellab.course import protocol
from kernellab.gpu import device, hooks, timing
from kernellab.gpu.timeline import Timeline, reserve_events

import solutions.lab07_streams as lab
cuda = device.cuda()
stream = cuda.stream()
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
passing_on = hooks.Bracket(lambda *args, **kwargs: None)
around = lambda proceed, *args, **kwargs: proceed()


@contextlib.contextmanager
def no_gc(inner):
    gc.disable()
    try:
        with inner():
            yield
    finally:
        gc.enable()


timeline_ops = {op: passing_on for op in ("launch", "to_device", "copy_to_device", "copy_to_host")}
timeline_ops.update({op: around for op in ("event_record", "event_wait", "event_synchronize",
                                           "stream_synchronize", "synchronize")})
ways = {"bare": contextlib.nullcontext,
        "bare_nogc": lambda: no_gc(contextlib.nullcontext),
        "hooks_two": lambda: hooks.subscribe(launch=passing_on, copy_to_device=passing_on),
        "hooks_as_timeline": lambda: hooks.subscribe(**timeline_ops),
        "trace_only": lambda: Timeline(timed=()),
        "trace_only_nogc": lambda: no_gc(lambda: Timeline(timed=())),
        "recorded": Timeline}
reserve_events(8000)
for name, call in calls.items():
    for repeat in range(2):
        taken = timing.time_host_in_turn({w: (o, call) for w, o in ways.items()}, inner=100, reps=60)
        over = {w: np.median(timing.paired(taken[w], taken["bare"])) * 1e3 for w in ways}
        bare = np.median(taken["bare"].samples_ms) * 1e3
        print(f"{name} repeat {repeat + 1}: bare {bare:.1f} us; over bare (us): "
              + ", ".join(f"{w} {v:+.2f}" for w, v in over.items() if w != "bare"), flush=True)
for name, call in calls.items():
    for way in ("bare", "hooks_two", "trace_only"):
        profile = cProfile.Profile()
        with ways[way]():
            cuda.synchronize()
            profile.enable()
            for _ in range(2000):
                call()
            profile.disable()
        cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(14)
        print(f"==== cProfile {name} / {way}: 2000 calls\n" + text.getvalue()[-3500:], flush=True)
