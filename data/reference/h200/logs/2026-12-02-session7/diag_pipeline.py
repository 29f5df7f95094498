"""Session 7, issue 23: where the recorder's slowdown of Lab 07's pipeline comes from, and what one
event record costs the host. Lab 07's pinned pipeline (2^26 float32, 8 chunks on 4 streams), every
way taken in turn in each of 15 reps (experiments.lab07_measure.alternating_windows: the window
is two events on the default stream around the call); beside each window, the host's submission
time (from the call to its first stream synchronize). Ways: bare; Timeline(timed=()) (trace only);
timing kernels only; timing copies only; the full Timeline."""
import time
import numpy as np
import kernellab.lab  # noqa: F401
from numba import cuda
from kernellab.course import target
from kernellab.gpu import hooks, timing
from kernellab.gpu.timeline import Timeline, reserve_events, _event_recorder, _new_event
from experiments import lab07_measure as m
from experiments.lab07_constants import PIPELINE_N, PIPELINE_CHUNKS, PIPELINE_STREAMS

lab = target.load("07", "solutions")
rng = np.random.default_rng(7)
host_x = cuda.pinned_array(PIPELINE_N, dtype=np.float32); host_x[:] = rng.random(PIPELINE_N, dtype=np.float32) + 0.5
host_out = cuda.pinned_array_like(host_x)
buffers = tuple(cuda.device_array(PIPELINE_N, dtype=np.float32) for _ in range(2))
streams = [cuda.stream() for _ in range(PIPELINE_STREAMS)]
bounds = lab.chunk_bounds(PIPELINE_N, PIPELINE_CHUNKS)

def copies_only():
    for c, (lo, hi) in enumerate(bounds):
        s = streams[c % len(streams)]
        buffers[0][lo:hi].copy_to_device(host_x[lo:hi], stream=s)
        buffers[1][lo:hi].copy_to_host(host_out[lo:hi], stream=s)
    for s in streams:
        s.synchronize()

def kernels_only(iters):
    for c, (lo, hi) in enumerate(bounds):
        lab.busy(buffers[0][lo:hi], iters, out=buffers[1][lo:hi], stream=streams[c % len(streams)])

copies = timing.time_gpu(copies_only, warmup=2, reps=7, hide_host=False)
probe = timing.time_gpu(lambda: kernels_only(1024), warmup=2, reps=7, hide_host=False)
iters = max(1, round(1024 * 0.5 * copies.median_ms / probe.median_ms))
print(f"copies alone {copies.median_ms:.3f} ms; iters {iters}")

first_sync = []
def note_sync(*args, **kwargs):
    if not first_sync:
        first_sync.append(time.perf_counter())
sync_clock = hooks.Bracket(note_sync)

submits = {}
def way(name, opened):
    def context():
        class Both:
            def __enter__(self):
                self.sub = hooks.subscribe(stream_synchronize=sync_clock); self.sub.__enter__()
                self.inner = opened(); self.inner.__enter__(); return self
            def __exit__(self, *exc):
                self.inner.__exit__(*exc); self.sub.__exit__(*exc)
        return Both()
    def call():
        first_sync.clear()
        started = time.perf_counter()
        lab.pipeline(host_x, iters, streams, PIPELINE_CHUNKS, host_out, buffers)
        submits.setdefault(name, []).append(1e3 * (first_sync[0] - started))
    return context, call

import contextlib
ways = {"bare": contextlib.nullcontext, "trace_only": lambda: Timeline(timed=()),
        "kernels_timed": lambda: Timeline(timed=("kernel",)), "copies_timed": lambda: Timeline(timed=("h2d", "d2h")),
        "full": Timeline}
reserve_events(6 * PIPELINE_CHUNKS)
windows = m.alternating_windows({name: way(name, opened) for name, opened in ways.items()}, 15)
for name in ways:
    sub = submits[name][-15:]
    slow = [100 * (w / b - 1) for w, b in zip(windows[name], windows["bare"])]
    print(f"{name:14s} window median {np.median(windows[name]):7.3f} ms (p10 {np.percentile(windows[name], 10):.3f} "
          f"p90 {np.percentile(windows[name], 90):.3f}); paired vs bare {np.median(slow):+5.1f}% "
          f"(p10 {np.percentile(slow, 10):+5.1f} p90 {np.percentile(slow, 90):+5.1f}); host submission "
          f"{np.median(sub):.3f} ms (p10 {np.percentile(sub, 10):.3f} p90 {np.percentile(sub, 90):.3f})")

# One event record on the host: ctypes (the recorder's) against cuda.bindings, 20 rounds of 2000, in turn.
record = _event_recorder()
from cuda.bindings import driver
events = [_new_event(cuda) for _ in range(2000)]
key = int(streams[0].handle)
cu_stream = driver.CUstream(key)
cu_events = [driver.CUevent(h) for _, h in events]
def ctypes_round():
    for _, h in events:
        record(h, key)
def bindings_round():
    for e in cu_events:
        driver.cuEventRecord(e, cu_stream)
rounds = {"ctypes": [], "bindings": []}
for r in range(20):
    for name, fn in (("ctypes", ctypes_round), ("bindings", bindings_round))[::1 if r % 2 else -1]:
        cuda.synchronize(); t = time.perf_counter(); fn(); rounds[name].append((time.perf_counter() - t) / 2000 * 1e6)
for name, xs in rounds.items():
    print(f"one cuEventRecord via {name}: median {np.median(xs):.2f} us (p10 {np.percentile(xs, 10):.2f}, p90 {np.percentile(xs, 90):.2f})")
