"""Session 7, issue 23: which event around a copy slows Lab 07's pipeline (call A: timing the copies
+13.8%, the kernels +2.8%, the trace alone +1.9%). Lab 07's pinned pipeline, every way taken in turn
(alternating_windows, 15 reps); each way a subscription recording raw events through the driver
around the pipeline's copies only: a timing event before each copy, after each copy, both, and both
with timing disabled (CU_EVENT_DISABLE_TIMING); the paired slowdown against bare."""
import contextlib
import numpy as np
import kernellab.lab  # noqa: F401
from numba import cuda
from kernellab.course import target
from kernellab.gpu import hooks, timing
from kernellab.gpu.timeline import Timeline, _event_recorder
from experiments import lab07_measure as m
from experiments.lab07_constants import PIPELINE_N, PIPELINE_CHUNKS, PIPELINE_STREAMS

lab = target.load("07", "solutions")
host_x = cuda.pinned_array(PIPELINE_N, dtype=np.float32); host_x[:] = 1.25
host_out = cuda.pinned_array_like(host_x)
buffers = tuple(cuda.device_array(PIPELINE_N, dtype=np.float32) for _ in range(2))
streams = [cuda.stream() for _ in range(PIPELINE_STREAMS)]
record = _event_recorder()
pool = {True: [cuda.event(timing=True) for _ in range(4000)], False: [cuda.event(timing=False) for _ in range(4000)]}
handles = {k: [int(e.handle) for e in v] for k, v in pool.items()}

def copies_with(before: bool, after: bool, timed: bool = True):
    used = iter(handles[timed])
    def key(array, stream):
        return Timeline._key(stream or getattr(array, "stream", 0))
    def start(array, *args, stream=0, **kwargs):
        k = key(array, stream)
        if before:
            record(next(used), k)
        return k
    def end(k):
        if after:
            record(next(used), k)
    return lambda: hooks.subscribe(copy_to_device=hooks.Bracket(start, end), copy_to_host=hooks.Bracket(start, end))

run = lambda: lab.pipeline(host_x, 169, streams, PIPELINE_CHUNKS, host_out, buffers)
ways = {"bare": (contextlib.nullcontext, run),
        "hook_no_event": (copies_with(False, False), run),
        "timing_before": (copies_with(True, False), run),
        "timing_after": (copies_with(False, True), run),
        "timing_both": (copies_with(True, True), run),
        "untimed_both": (copies_with(True, True, timed=False), run),
        "timeline_copies": (lambda: Timeline(timed=("h2d", "d2h")), run)}
figures = m.alternating_windows(ways, 15)
bare = figures["bare"]["window"]
for name, figure in figures.items():
    w = figure["window"]
    slow = [100 * (a / b - 1) for a, b in zip(w, bare)]
    print(f"{name:16s} window median {np.median(w):7.3f} ms; paired vs bare {np.median(slow):+5.1f}% "
          f"(p10 {np.percentile(slow, 10):+5.1f} p90 {np.percentile(slow, 90):+5.1f})")
