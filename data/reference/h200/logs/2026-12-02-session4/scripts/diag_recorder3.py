"""Diagnostics (not committed): where a Timeline's per-launch host time goes."""
import cProfile, io, pstats, time
import numpy as np
import kernellab.lab  # noqa
from numba import cuda
from solutions import lab07_streams as lab
from kernellab.gpu import hooks, timeline
from kernellab.gpu.timeline import Timeline, reserve_events
from kernellab.gpu.launches import record_launches
small = cuda.device_array(256, np.float32); st = cuda.stream()
host = cuda.pinned_array(256, np.float32)
launch = lambda: lab.busy_kernel[1, 256, st](small, 1, small)
copy = lambda: small.copy_to_device(host, stream=st)
def per_call(fn, n=3000):
    fn(); cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    r = (time.perf_counter() - t) / n * 1e6; cuda.synchronize(); return r
def noop(proceed, *a, **k): return proceed()
reserve_events(40000)
class NoRecord(Timeline):
    def __enter__(self):
        r = super().__enter__(); self._record = lambda e, s: None; return r
modes = {"bare": lambda: __import__("contextlib").nullcontext(),
         "subscribe(noop)": lambda: hooks.subscribe(launch=noop, copy_to_device=noop),
         "record_launches": record_launches,
         "Timeline, records off": NoRecord,
         "Timeline": Timeline,
         "Timeline, timed=()": lambda: Timeline(timed=())}
for rnd in range(2):
    for name, make in modes.items():
        with make():
            a = per_call(launch); b = per_call(copy)
        print(f"round {rnd} {name:24s} launch {a:6.2f} us  copy {b:6.2f} us   spare events {len(timeline._spare_events)}", flush=True)
pr = cProfile.Profile()
with Timeline():
    pr.enable()
    for _ in range(2000): launch()
    pr.disable()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(25); print(s.getvalue()[-7000:])
import gc; print("gc counts", gc.get_count(), "objects", len(gc.get_objects()))
