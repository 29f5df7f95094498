"""Lab 03's figure: time per call against size, and the gain of one launch over four (the whole
calls, the launches alone, the GPU alone: each the median of the repeats) against the
launch-or-bytes model."""

from __future__ import annotations

from pathlib import Path

from kernellab.course import bench as harness
from kernellab.show import plots

from experiments.lab03_constants import GAIN_THAT_PAYS, KERNEL_PACE, LAUNCHES
from kernellab.course.claims import typical_ms
from experiments.lab01_measure import typical_times
from experiments.lab03_measure import crossover, model_inputs


def speedup_figure(lab, records: dict, figures_dir: Path) -> Path:
    """Time per call against size (whole calls and launches alone), and the gain of one launch over four: the whole
    calls, the launches alone and the GPU alone, where recorded, against the model."""
    tasks = records["tasks"]
    fig, (ax_time, ax_gain) = plots.new_figure("Four tasks: four launches or one", tasks, ncols=2)
    shown = [name for name in ("separate", "horizontal", f"separate{LAUNCHES}", f"horizontal{LAUNCHES}")
             if name in tasks["variants"]]       # the whole calls and the launches alone: 4 lines
    plots.time_vs_size(ax_time, {**typical_times(tasks), "variants": {name: tasks["variants"][name] for name in shown}})
    launch_us, _ = model_inputs(records)
    ax_time.axhline(launch_us / 1e3, color="k", linestyle="--",
                    label=f"one launch's host cost ({launch_us:.1f} us, median of the repeats)")
    ax_time.legend()
    suffix = LAUNCHES if f"horizontal{LAUNCHES}" in tasks["variants"] else ""
    summary = crossover(lab, records, suffix)
    x = [r["n"] for r in summary["rows"]]
    ax_gain.plot(x, [r["measured_speedup"] for r in summary["rows"]], marker="o",
                 label="launches alone" if suffix else "whole calls")
    if suffix:
        whole = crossover(lab, records, "")["rows"]
        ax_gain.plot([r["n"] for r in whole], [r["measured_speedup"] for r in whole], marker=".",
                     label="whole calls (with the launchers' Python)")
    if "tasks_gpu" in records:
        gpu = records["tasks_gpu"]
        sizes = [n for n in gpu["sizes"] if all(harness.row(gpu, v, n)["ok"] for v in ("separate", "horizontal"))]
        ax_gain.plot(sizes, [typical_ms(harness.row(gpu, "separate", n)) / typical_ms(harness.row(gpu, "horizontal", n))
                             for n in sizes], marker="s", label="GPU alone (host work outside the window)")
    ax_gain.plot(x, [r["predicted_speedup"] for r in summary["rows"]], linestyle="--",
                 label=f"predicted: max(launches x {summary['launch_us']:.1f} us, bytes / copy bandwidth)")
    ax_gain.axhline(GAIN_THAT_PAYS, color="grey", linestyle=":", label=f"{GAIN_THAT_PAYS}x: stops paying")
    ax_gain.axhline(KERNEL_PACE, color="k", linestyle=":", label=f"{KERNEL_PACE}x: the merged kernel's target")
    ax_gain.set_xscale("log", base=2)
    ax_gain.set_xlabel(tasks["axis"])
    ax_gain.set_ylabel("separate time / merged time")
    ax_gain.grid(True, which="both", alpha=0.3)
    ax_gain.set_ylim(0.5, 1.7 * max(r["predicted_speedup"] for r in summary["rows"]))   # room for the legend
    ax_gain.legend(loc="upper center", fontsize="small")
    return plots.save(fig, "lab03_speedup", figures_dir)
