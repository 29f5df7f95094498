"""Diagnostics (not committed): where the Timeline recorder's host time goes in Lab 07's pipeline."""
import cProfile, io, os, pstats, sys, time
import numpy as np
import kernellab.lab  # noqa
from numba import cuda
from solutions import lab07_streams as lab
from kernellab.gpu.timeline import Timeline
from kernellab.gpu.launches import record_launches

N, C, S, ITERS = 1 << 26, 16, 4, 168
x = cuda.pinned_array(N, np.float32); x[:] = 1.5
out = cuda.pinned_array_like(x)
bufs = (cuda.device_array(N, np.float32), cuda.device_array(N, np.float32))
streams = [cuda.stream() for _ in range(S)]
bounds = lab.chunk_bounds(N, C)
def run(): lab.pipeline(x, ITERS, streams, C, out, bufs)
def copies(): lab.pipeline(x, 0, streams, C, out, bufs)
def kernels():
    for c, (lo, hi) in enumerate(bounds):
        lab.busy(bufs[0][lo:hi], ITERS, out=bufs[1][lo:hi], stream=streams[c % S])
    cuda.synchronize()
def wall(fn, reps=7):
    fn(); fn(); ts = []
    for _ in range(reps):
        cuda.synchronize(); t = time.perf_counter(); fn(); cuda.synchronize(); ts.append((time.perf_counter() - t) * 1e3)
    return f"median {np.median(ts):.3f} min {min(ts):.3f} max {max(ts):.3f} ms"
def in_tl(fn=run):
    def go():
        with Timeline() as tl: fn()
        return tl
    return go
print("CUDA_DEVICE_MAX_CONNECTIONS", os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS"))
print("bare pipeline", wall(run)); print("copies only", wall(copies)); print("kernels only", wall(kernels))
print("timeline pipeline", wall(in_tl()))
with record_launches(): print("record_launches pipeline", wall(run))
tl = in_tl()(); print(tl.report()); print("hidden", tl.data.hidden_fraction())
subs = [op.submit_ms for op in tl.trace.timed()]; print("submit gaps ms median", np.median(np.diff(subs)), "ops", len(subs))
# host submit only (no waiting): pipeline without the final synchronizations
def submit_only():
    for c, (lo, hi) in enumerate(bounds):
        st = streams[c % S]
        bufs[0][lo:hi].copy_to_device(x[lo:hi], stream=st)
        lab.busy(bufs[0][lo:hi], ITERS, out=bufs[1][lo:hi], stream=st)
        bufs[1][lo:hi].copy_to_host(out[lo:hi], stream=st)
for name, fn in (("bare", submit_only),):
    cuda.synchronize(); t = time.perf_counter(); fn(); host = (time.perf_counter() - t) * 1e3; cuda.synchronize()
    print(name, "host submit of 48 ops ms", round(host, 3))
with Timeline() as tl2:
    t = time.perf_counter(); submit_only(); host = (time.perf_counter() - t) * 1e3
print("timeline host submit of 48 ops ms", round(host, 3), "makespan", round(tl2.data.makespan_ms, 3), "hidden", round(tl2.data.hidden_fraction(), 3))
for sort in ("cumulative", "tottime"):
    pr = cProfile.Profile()
    with Timeline():
        pr.enable(); submit_only(); pr.disable()
    s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats(sort).print_stats(22); print("== profile inside Timeline by", sort); print(s.getvalue()[-6000:])
pr = cProfile.Profile(); pr.enable(); submit_only(); pr.disable(); cuda.synchronize()
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12); print("== profile bare"); print(s.getvalue()[-3000:])
def host(fn, n=2000):
    fn(); t = time.perf_counter()
    for _ in range(n): fn()
    return round((time.perf_counter() - t) / n * 1e6, 2)
e = cuda.event(timing=True)
print("us: event create", host(lambda: cuda.event(timing=True)), "event record", host(lambda: e.record(streams[0])))
cuda.synchronize()
# raw events around each op (no kernellab): does the GPU serialize?
def raw_events():
    evs = []
    for c, (lo, hi) in enumerate(bounds):
        st = streams[c % S]
        for op in range(3):
            a, b = cuda.event(timing=True), cuda.event(timing=True)
            a.record(st)
            if op == 0: bufs[0][lo:hi].copy_to_device(x[lo:hi], stream=st)
            elif op == 1: lab.busy(bufs[0][lo:hi], ITERS, out=bufs[1][lo:hi], stream=st)
            else: bufs[1][lo:hi].copy_to_host(out[lo:hi], stream=st)
            b.record(st); evs.append((a, b))
    cuda.synchronize()
print("raw events around each op", wall(raw_events))
