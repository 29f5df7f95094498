"""Lab 08's figures: the reconstructed timelines, the idle gaps against kernel length with the
cost per kernel, and one graph per batch size (drawn from the records: live on a GPU, the H200
reference otherwise)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from kernellab.course.claims import repeats_of
from kernellab.show import plots

from experiments.lab08_constants import GAP_LINEAR_PCT, GAP_TARGET, LONG_KERNEL_MS, NUMBER
from experiments.lab08_measure import below_resolution, duration_used, resolved_in_every


# The cost bars' labels, in words (the record's keys name its instruments).
COST_LABELS = {"eager_gpu_events": "eager: GPU clock",
               "eager_host_submit": "eager: host's submit",
               "graph_gpu_events": "replayed: GPU time", "graph_host_submit": "replayed: host's submit",
               "kernel_gpu_queue_full": "eager, queue kept full: GPU time"}


def _drawn(records: dict) -> list[dict]:
    """The first repeat's idle_gaps rows, for the sizes whose kernel duration every repeat resolves."""
    return [same[0] for same in resolved_in_every(repeats_of(records, "idle_gaps", NUMBER))]


def plot_timeline(lab, records: dict, figures_dir: Path) -> Path:
    """A 100-kernel pipeline before and after capture, for the shortest and the longest kernels
    every repeat resolves (the first repeat's run)."""
    gaps = records["idle_gaps"]
    drawn = _drawn(records)
    cases = [drawn[0], drawn[-1]]
    repeats = len(repeats_of(records, "idle_gaps", NUMBER))
    fig, axes = plots.new_figure(f"{gaps['kernels']} kernels, eager vs replayed, rebuilt from the total and the "
                                 f"kernel time (repeat 1 of {repeats})\nkernel time: {duration_used(gaps)}",
                                 gaps, ncols=2)
    for ax, row in zip(axes, cases):
        for lane, (label, total) in enumerate((("eager", row["eager_ms"]),
                                               ("graph", row["graph_ms"]))):
            bars = lab.reconstructed_timeline(row["kernel_ms"], total, gaps["kernels"])
            ax.broken_barh([(1e3 * s, 1e3 * (e - s)) for s, e in bars], (lane - 0.35, 0.7),
                           color=f"C{lane}")
            gap = 100 * row[f"{label}_gap"]
            ax.annotate(f"{total * 1e3:.0f} us, gaps {gap:.{0 if gap >= 10 else 1}f}% of kernel time",
                        (0, lane + 0.37), va="bottom", fontsize="small")     # above its bar
        ax.set_yticks([0, 1], ["eager", "graph"])
        ax.set_ylim(-0.5, 1.8)
        ax.set_xlim(0, 1e3 * max(row["eager_ms"], row["graph_ms"]) * 1.02)
        ax.set_xlabel("time (us)")
        ax.set_title(f"n = {row['n']:,}: kernel {1e3 * row['kernel_ms']:.2f} us")
    return plots.save(fig, "lab08_timeline", figures_dir)


def plot_idle_gaps(lab, records: dict, figures_dir: Path) -> Path:
    """Idle gaps against kernel length, eager and replayed; per-kernel cost of tiny kernels."""
    gaps, tiny = records["idle_gaps"], records["tiny_kernels"]
    fig, (ax_gap, ax_cost) = plots.new_figure("Idle gaps between kernels (the first of the repeats), "
                                              "and the cost per kernel",
                                              gaps, ncols=2)
    drawn = _drawn(records)
    kernel_us = [1e3 * r["kernel_ms"] for r in drawn]
    lowest = 0.0
    for label in ("eager", "graph"):
        values = [100 * r[f"{label}_gap"] for r in drawn]
        lowest = min(lowest, *values)
        ax_gap.plot(kernel_us, values, "o-", label="replayed" if label == "graph" else label)
        bad = [(k, v) for k, v, r in zip(kernel_us, values, drawn) if below_resolution(r, label)]
        if bad:
            ax_gap.plot(*zip(*bad), "x", color="red", markersize=9,
                        label=f"{label}: below zero beyond\nits resolution (measurement problem)")
    ax_gap.axhline(100 * GAP_TARGET, color="k", ls=":", label="article: gaps < 5%")
    ax_gap.axvline(1e3 * LONG_KERNEL_MS, color="grey", ls="--", lw=0.8, label=f"target judged from {1e3 * LONG_KERNEL_MS:.0f} us")
    ax_gap.set_xscale("log")
    ax_gap.set_yscale("symlog", linthresh=GAP_LINEAR_PCT)
    ax_gap.axhline(0, color="grey", lw=0.6)
    if lowest >= 0:
        ax_gap.set_ylim(bottom=0)                   # no negative gap: no negative decades to read
    ax_gap.xaxis.set_minor_formatter(NullFormatter())
    left_out = len(gaps["rows"]) - len(drawn)
    ax_gap.set_title(textwrap.fill(f"kernel time: {duration_used(gaps)}", 70)
                     + (f"\n{left_out} size(s) not drawn: duration not resolved from zero in every repeat" if left_out else ""),
                     fontsize="small")
    ax_gap.set_xlabel("kernel's own GPU time (us)")
    ax_gap.set_ylabel("idle gaps, % of kernel time\n(signed, not clamped)")
    ax_gap.legend(loc="lower left")                 # below the points: the negative gaps are few
    names, repeats = list(tiny["rows"]), repeats_of(records, "tiny_kernels", NUMBER)
    per_repeat = [[rep["rows"][n]["us_per_kernel"] for rep in repeats if n in rep["rows"]] for n in names]
    ax_cost.barh([COST_LABELS.get(n, n) for n in names], [float(np.median(us)) for us in per_repeat],
                 color=["C0" if n.startswith("eager") else "C1" if n.startswith("graph") else "grey"
                        for n in names])
    for y, us in enumerate(per_repeat):
        ax_cost.plot(us, [y] * len(us), "o", color="black", markersize=3)
    ax_cost.set_xscale("log")
    ax_cost.set_title(f"each bar its own timed run:\nmedian of {len(repeats)} repeat(s), a dot each repeat",
                      fontsize="small")
    ax_cost.set_xlabel(f"us per kernel ({tiny['kernels']} kernels of {tiny['n']} elements)")
    return plots.save(fig, "lab08_idle_gaps", figures_dir)


def plot_batches(lab, records: dict, figures_dir: Path) -> Path:
    """Per-call time eager and replayed for each batch size, in one repeat (the claim
    graph_per_batch_build gives the calls a graph takes to pay off, over every repeat)."""
    batches = records["batch_graphs"]
    fig, (ax,) = plots.new_figure(f"One graph per batch size: {batches['steps']} steps on "
                                  f"(batch, {batches['features']}) float32, one repeat", batches)
    sizes = [r["batch"] for r in batches["rows"]]
    ax.plot(sizes, [r["eager_ms"] for r in batches["rows"]], "o-", label="eager")
    ax.plot(sizes, [r["graph_ms"] for r in batches["rows"]], "o-", label="graph: copy into its buffer, replay")
    ax.set_xscale("log", base=2)
    ax.set_xlim(min(sizes) / 2, max(sizes) * 2)           # room for the labels at both ends
    ax.set_ylim(0, 1.35 * max(r["eager_ms"] for r in batches["rows"]))   # linear, from 0, room above
    ax.set_xlabel("batch size (rows)")
    ax.set_ylabel("time per call (ms), the host's work included")
    ax.legend(fontsize="small")
    return plots.save(fig, "lab08_batch_graphs", figures_dir)
