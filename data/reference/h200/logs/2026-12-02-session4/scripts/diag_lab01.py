"""Diagnostics (not committed): a plain launch with each instrument on and off, interleaved, one process."""
import numpy as np
import kernellab.lab  # noqa
from numba import cuda
from solutions import lab01_launch_overhead as lab
from kernellab.gpu import timing
from kernellab.gpu.launches import record_launches
from kernellab.gpu.timeline import Timeline
from kernellab.gpu import checks
counter = cuda.to_device(np.zeros(1, np.float32))
plain = lambda: lab.bump_kernel[1, 1](counter)
rows = {k: [] for k in ("off", "record_launches", "timeline", "poisoned_allocations", "off_after")}
for rnd in range(5):
    rows["off"].append(timing.time_host(plain, warmup=100, reps=40, inner=200))
    with record_launches():
        rows["record_launches"].append(timing.time_host(plain, warmup=20, reps=40, inner=200))
    with Timeline():
        rows["timeline"].append(timing.time_host(plain, warmup=20, reps=20, inner=200))
    with checks.poisoned_allocations():
        rows["poisoned_allocations"].append(timing.time_host(plain, warmup=20, reps=40, inner=200))
    rows["off_after"].append(timing.time_host(plain, warmup=20, reps=40, inner=200))
for k, ts in rows.items():
    print(f"{k:22s} us/launch median per round: " + " ".join(f"{t.median_ms*1e3:6.2f}" for t in ts)
          + "  p10: " + " ".join(f"{t.p10_ms*1e3:6.2f}" for t in ts))
