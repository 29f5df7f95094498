"""Is the timing event before each copy in slow per process, per round or per rep? Six rounds of
15 reps of the lab's pipeline bare and with that event (diag_event_positions.py's way), each rep's
slowdown printed; then the recorder's per-op costs (lab07_measure.measure_recorder_cost, 30 reps)
with this commit's copy path. Run in several fresh processes."""
import contextlib
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from diag_event_positions import events, run   # noqa: E402  (its setup: the pipeline, the pools)

from kernellab.course import target                                # noqa: E402
from kernellab.gpu import device                                   # noqa: E402
from experiments.lab07_measure import alternating_windows, measure_recorder_cost   # noqa: E402

ways = {"bare": (contextlib.nullcontext, run), "before_h2d": (events("copy_to_device", "before"), run)}
for round_ in range(6):
    f = alternating_windows(ways, 15)
    slow = [100 * (a / b - 1) for a, b in zip(f["before_h2d"]["window"], f["bare"]["window"])]
    print(f"round {round_ + 1}: median {np.median(slow):+5.1f}%  reps " + " ".join(f"{s:+.0f}" for s in slow),
          flush=True)
cost = measure_recorder_cost(target.load("07"), device.cuda().stream(), reps=30)
for call, figures in cost.items():
    print(call, "us over bare: full", round(figures["us_per_op"], 1),
          *(f"{way} {figures[f'{way}_over_bare_us']:.1f}" for way in ("inferred_starts", "trace_only", "events_only", "hooks_only")),
          f"(bare {figures['bare_us']['median']:.1f} us)")
