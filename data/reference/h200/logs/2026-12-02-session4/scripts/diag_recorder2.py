"""Diagnostics (not committed): per-call host cost in Lab 07's pipeline, bare and with events."""
import time
import numpy as np
import kernellab.lab  # noqa
from numba import cuda
from cuda.bindings import driver
from solutions import lab07_streams as lab
from kernellab.gpu.timeline import Timeline, reserve_events
N, C, S, ITERS = 1 << 26, 16, 4, 168
x = cuda.pinned_array(N, np.float32); x[:] = 1.5
out = cuda.pinned_array_like(x)
bufs = (cuda.device_array(N, np.float32), cuda.device_array(N, np.float32))
streams = [cuda.stream() for _ in range(S)]
bounds = lab.chunk_bounds(N, C)
pool = [cuda.event(timing=True) for _ in range(400)]
def rec(e, st):
    driver.cuEventRecord(e.handle, st.handle)
def one(events):   # events: 0 none, 1 end only, 2 pair
    cost = {"slice": 0.0, "h2d": 0.0, "kernel": 0.0, "d2h": 0.0, "record": 0.0}
    it = iter(pool)
    t_all = time.perf_counter()
    for c, (lo, hi) in enumerate(bounds):
        st = streams[c % S]
        t = time.perf_counter(); din, dout, hx, ho = bufs[0][lo:hi], bufs[1][lo:hi], x[lo:hi], out[lo:hi]; cost["slice"] += time.perf_counter() - t
        for kind, call in (("h2d", lambda: din.copy_to_device(hx, stream=st)),
                           ("kernel", lambda: lab.busy_kernel[(hi - lo + 255) // 256, 256, st](din, ITERS, dout)),
                           ("d2h", lambda: dout.copy_to_host(ho, stream=st))):
            if events == 2:
                t = time.perf_counter(); rec(next(it), st); cost["record"] += time.perf_counter() - t
            t = time.perf_counter(); call(); cost[kind] += time.perf_counter() - t
            if events >= 1:
                t = time.perf_counter(); rec(next(it), st); cost["record"] += time.perf_counter() - t
    submit = time.perf_counter() - t_all
    for st in streams: st.synchronize()
    total = time.perf_counter() - t_all
    return {k: v * 1e3 for k, v in cost.items()}, submit * 1e3, total * 1e3
for events in (0, 2, 1, 0, 2, 1):
    rows = [one(events) for _ in range(6)][1:]
    costs = {k: np.median([r[0][k] for r in rows]) for k in rows[0][0]}
    print(f"events {events}: submit {np.median([r[1] for r in rows]):.3f} ms, makespan {np.median([r[2] for r in rows]):.3f} ms; per-call sums ms: " + ", ".join(f"{k} {v:.3f}" for k, v in costs.items()), flush=True)
# the recorder itself, events reserved
reserve_events(3 * C * 8)
def tl_run():
    with Timeline() as tl:
        t = time.perf_counter(); lab.pipeline(x, ITERS, streams, C, out, bufs); ms = (time.perf_counter() - t) * 1e3
    return ms, tl.data.hidden_fraction()
def bare_run():
    t = time.perf_counter(); lab.pipeline(x, ITERS, streams, C, out, bufs); return (time.perf_counter() - t) * 1e3
for rnd in range(2):
    b = [bare_run() for _ in range(6)][1:]; r = [tl_run() for _ in range(6)][1:]
    print(f"round {rnd}: bare {np.median(b):.3f} ms, recorder {np.median([m for m, _ in r]):.3f} ms, hidden by events {np.median([h for _, h in r]):.3f}", flush=True)
# isolated: one tiny launch repeated, with and without a pair of records
small = cuda.device_array(256, np.float32); st = streams[0]
def host(fn, n=2000):
    fn(); cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): fn()
    r = (time.perf_counter() - t) / n * 1e6; cuda.synchronize(); return round(r, 2)
e1, e2 = pool[0], pool[1]
print("isolated us: launch", host(lambda: lab.busy_kernel[1, 256, st](small, 1, small)),
      "launch+2 raw records", host(lambda: (rec(e1, st), lab.busy_kernel[1, 256, st](small, 1, small), rec(e2, st))),
      "record alone", host(lambda: rec(e1, st)))
with Timeline():
    print("isolated us inside Timeline: launch", host(lambda: lab.busy_kernel[1, 256, st](small, 1, small), n=1000))
