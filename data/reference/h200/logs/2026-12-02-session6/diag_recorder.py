"""Where the recorder's per-op host cost goes (issue 23): each layer on and off, interleaved."""
import cProfile, io, pstats, time
import numpy as np
import kernellab.lab  # noqa: F401
from numba import cuda
from cuda.bindings import driver
from solutions import lab07_streams as lab
from kernellab.gpu import hooks, launches, timeline
from kernellab.gpu.timeline import Timeline, reserve_events

st = cuda.stream()
small = cuda.device_array(256, np.float32)
host = cuda.pinned_array(256, np.float32); host[:] = 1.0
INNER, REPS = 100, 15

def launch():
    lab.busy(small, 1, out=small, stream=st)
def raw_launch():
    lab.busy_kernel[1, 256, st](small, 1, small)
def copy():
    small.copy_to_device(host, stream=st)

def per_call(fn):
    cuda.synchronize(); t = time.perf_counter()
    for _ in range(INNER): fn()
    r = (time.perf_counter() - t) / INNER * 1e6
    return r

fresh = [cuda.event(timing=True) for _ in range(4 * INNER * REPS)]
used = [cuda.event(timing=True) for _ in range(4 * INNER * REPS)]
for e in used: e.record(st)
cuda.synchronize()
def rec(e, s): driver.cuEventRecord(e.handle, s.handle)
import ctypes
_cu = ctypes.CDLL("libcuda.so.1").cuEventRecord
_cu.argtypes, _cu.restype = (ctypes.c_void_p, ctypes.c_void_p), ctypes.c_int
def rec_ctypes(e, s): _cu(int(e.handle), int(s.handle))
def with_ctypes_events(pool, fn):
    it = iter(pool)
    def call():
        rec_ctypes(next(it), st); fn(); rec_ctypes(next(it), st)
    return call
def with_events(pool, fn):
    it = iter(pool)
    def call():
        rec(next(it), st); fn(); rec(next(it), st)
    return call

def setups(fn):
    return {
        "bare": lambda: (None, fn),
        "subscribe(passthrough)": lambda: (hooks.subscribe(launch=lambda p, l: p(), copy_to_device=lambda p, *a, **k: p()), fn),
        "record_launches": lambda: (launches.record_launches(), fn),
        "Timeline(timed=())": lambda: (Timeline(timed=()), fn),
        "Timeline()": lambda: (Timeline(), fn),
        "raw pair, fresh events": lambda: (None, with_events(fresh, fn)),
        "raw pair, used events": lambda: (None, with_events(used, fn)),
        "ctypes pair, used events": lambda: (None, with_ctypes_events(used, fn)),
    }

for what, fn in (("launch", launch), ("raw busy_kernel[...]", raw_launch), ("copy", copy)):
    for _ in range(3): fn()
    results = {}
    for rnd in range(3):
        fresh[:] = [cuda.event(timing=True) for _ in range(2 * INNER * REPS + 10)]
        for name, make in setups(fn).items():
            reserve_events(INNER * REPS + 10)
            ctx, call = make()
            if ctx is None:
                samples = [per_call(call) for _ in range(REPS)]
            else:
                with ctx:
                    samples = [per_call(call) for _ in range(REPS)]
            results.setdefault(name, []).append(np.median(samples))
    for name, meds in results.items():
        print(f"{what:<22} {name:<26} us/call per round: " + "  ".join(f"{m:7.2f}" for m in meds), flush=True)

# where the time goes inside a Timeline, and bare, by cProfile (tottime)
for label, ctx in (("Timeline()", "tl"),):
    reserve_events(3000)
    prof = cProfile.Profile()
    if ctx:
        with Timeline():
            prof.enable()
            for _ in range(3000): launch()
            prof.disable()
    else:
        prof.enable()
        for _ in range(3000): launch()
        prof.disable()
    cuda.synchronize()
    s = io.StringIO(); pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(22)
    print(f"---- cProfile {label}, 3000 launches\n" + "\n".join(s.getvalue().splitlines()[:45]), flush=True)
