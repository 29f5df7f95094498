"""Lab 09's figure: the roofline of every lab's main kernels, the table naming each point, and
the small sizes, whose time the host's launch path sets, far above the GPU's launch floor."""

from __future__ import annotations

import string
import textwrap
from collections import Counter
from pathlib import Path

import numpy as np
from matplotlib import colormaps

from kernellab.course import claims
from kernellab.show import plots

from experiments.lab09_claims import CLAIMS
from experiments.lab09_constants import NUMBER
from experiments.lab09_points import (
    DRAM_BYTES, awaiting, bytes_line, points_table, roofline_points, small_size_rows)


def measures_both(ceilings: dict) -> bool:
    """Whether a run measured both roofs with the current instruments: its FMA ceiling is the best
    of the FMA forms (`fma.method`; runs before 2026-12-01 12:30 timed only the two-chain form,
    which the int32 form beats by 1.9x on the H200) and its memory roof a measured stream."""
    return bool((ceilings.get("fma") or {}).get("method")) and "memory_roof_gbps" in ceilings


def measured_roofs(points: list[dict]) -> list[tuple[float, float]]:
    """(memory roof GB/s, FP32 FMA TFLOP/s) of each distinct run that measured both (rounded to
    what a figure can show); every run's, if none did."""
    chosen = [p for p in points if measures_both(p["ceilings"])] or points
    return sorted({(round(p["ceilings"]["memory_roof_gbps"]), round(p["ceilings"]["fp32_fma_tflops"], 1))
                   for p in chosen})


def roofs_label(points: list[dict], roofs: list[tuple[float, float]]) -> str:
    bandwidths, peaks = [r[0] for r in roofs], [r[1] for r in roofs]
    span = lambda values, fmt: (f"{min(values):{fmt}}" if min(values) == max(values)   # noqa: E731
                                else f"{min(values):{fmt}}-{max(values):{fmt}}")
    return (f"the roofs of the {len(roofs)} runs that measured both: memory {span(bandwidths, '.0f')} GB/s "
            f"(the best measured read:write stream), FP32 FMA {span(peaks, '.1f')} TFLOP/s; each % uses "
            f"its own run's")


def superseded_line(points: list[dict]) -> str:
    """The points whose run did not measure both roofs, and what each is rated against instead."""
    older = [p for p in points if not measures_both(p["ceilings"])]
    parts = []
    for bound in ("memory", "compute"):
        named = [p for p in older if p["bound"] == bound]
        if not named:
            continue
        peaks = "/".join(sorted({f"{p['ceilings']['fp32_fma_tflops']:.1f}" for p in named}))
        parts.append(f"{', '.join(p['name'] for p in named)}: rated on their run's memory roof (its "
                     f"FP32 figure, {peaks} TFLOP/s, was not measured by today's FMA forms)" if bound == "memory"
                     else f"{', '.join(p['name'] for p in named)}: rated against {peaks} TFLOP/s, "
                          f"an FP32 figure its run did not measure")
    return "; ".join(parts) or "every point's run measured both roofs"


def point_ids(points: list[dict]) -> list[str]:
    """Each point's label on the roofline: its lab's number, with a letter where the lab has
    several points ("02a", "02b")."""
    per_lab = Counter(p["lab"] for p in points)
    seen: Counter = Counter()
    ids = []
    for p in points:
        ids.append(p["lab"] + (string.ascii_lowercase[seen[p["lab"]]] if per_lab[p["lab"]] > 1 else ""))
        seen[p["lab"]] += 1
    return ids


def plot_roofline(points: list[dict], small: list[dict], figures_dir: Path, source: str) -> Path:
    """Left: every main kernel under the roof, labelled by its lab; middle: the table of what each
    label is and its % of roof, with the roofs and bytes it was rated on; right: small sizes.
    `source`: where the records came from, with their dates."""
    live = [p["source"] for p in points if p["source"].startswith("measured live")]
    title = "The roofline of the course's main kernels" + (
        f" (lab 09 points {live[0]}; the others recorded)" if live else "")
    fig, (ax, ax_table, ax_small) = plots.new_figure(title, None, ncols=3, width=7.0, height=8.0, source=source,
                                                     width_ratios=(1.25, 0.85, 0.9))
    fig.get_layout_engine().set(wspace=0.03)
    roofs = measured_roofs(points)
    widest = np.log10(max(p["intensity"] for p in points))
    xs = np.logspace(-2, max(4.0, np.ceil(widest + 0.3)), 200)
    for bandwidth, peak in roofs:
        ax.plot(xs, np.minimum(peak * 1e12, xs * bandwidth * 1e9) / 1e12, "k-", lw=0.9, alpha=0.6)
    labs = sorted({p["lab"] for p in points})
    colour = {lab_number: colormaps["tab10"](i % 10) for i, lab_number in enumerate(labs)}
    for p in points:
        ax.plot(p["intensity"], p["attained"] / 1e12, "o" if p["bytes_kind"] == DRAM_BYTES else "s",
                color=colour[p["lab"]])
    ax.set_xscale("log")
    ax.set_yscale("log")
    squares = any(p["bytes_kind"] != DRAM_BYTES for p in points)
    ax.set_xlabel(f"FLOP per byte\n(circles: {DRAM_BYTES} bytes" + (
        "; squares: ledger bytes, compulsory where it declares re-reads)" if squares else ")"))
    ax.set_ylabel("TFLOP/s attained")
    ax.set_title("each point labelled by its lab: the table names it")

    ids = point_ids(points)
    table = ax_table.table(cellText=[[i, p["name"].split(" ", 1)[1], f"{p['pct_of_roof']:.0f}%"]
                                     for i, p in zip(ids, points)],
                           colLabels=["", "kernel", "of roof"], loc="upper center", edges="horizontal",
                           cellLoc="left", colLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(plots.font_points("small"))
    table.auto_set_column_width([0, 1, 2])
    table.scale(1, 1.35)
    for row, p in enumerate(points, start=1):
        table[row, 0].get_text().set_color(colour[p["lab"]])
        table[row, 0].get_text().set_fontweight("bold")
    ax_table.axis("off")
    fig.draw_without_rendering()                    # the table's height, to write the notes under it
    under = table.get_window_extent().transformed(ax_table.transAxes.inverted()).y0 - 0.04
    ax_table.text(0, under, "\n\n".join(textwrap.fill(line, 58) for line in
                                        (f"the roof line: {roofs_label(points, roofs)}", superseded_line(points))),
                  transform=ax_table.transAxes, va="top", fontsize="x-small")

    for kernel in sorted({r["kernel"] for r in small}):
        rows = [r for r in small if r["kernel"] == kernel]
        ax_small.plot([r["bytes"] for r in rows], [r["ms"] * 1e3 for r in rows], "o-", label=kernel)
    floor = small[0]["launch_floor_ms"] * 1e3
    moved = np.logspace(3, 9, 50)
    ax_small.axhline(floor, color="k", ls=":", label=f"GPU launch floor {floor:.2f} us\n(Lab {small[0]['lab']}'s run)")
    ax_small.plot(moved, moved / (small[0]["copy_gbps"] * 1e9) * 1e6, "k--", lw=0.8,
                  label="bytes at copy bandwidth")
    ax_small.set_xscale("log")
    ax_small.set_yscale("log")
    ax_small.set_xlabel("requested bytes per call")
    ax_small.set_ylabel("us per call")
    ax_small.set_title(small_title(small))
    ax_small.legend(loc="lower right")
    plots.label_points(ax, [(p["intensity"], p["attained"] / 1e12) for p in points], ids,
                       fontsize="x-small", fontweight="bold")
    return plots.save(fig, "lab09_roofline", figures_dir)


def small_title(small: list[dict]) -> str:
    """The small-size panel's title: what its records say sets the time of a small call."""
    if all(r["host_paced"] for r in small):
        return "small sizes: the host's launch path\nsets the time (Lab 01), not the GPU's floor"
    return "small sizes: time per call against bytes"


def draw_roofline(lab, records: dict, figures_dir: Path, table: bool = True) -> Path:
    """The roofline figure from lab 09's records (live or recorded) and every lab's recorded
    ones, with the bytes line and what awaits data printed beside it, and its table too unless
    `table` is False (notebook 09: the figure holds the table)."""
    points = roofline_points(lab, own=records)
    if table:
        print(points_table(points))
    print(bytes_line(points))
    for line in awaiting():
        print(line)
    drawn_from = claims.judge(next(c for c in CLAIMS if c.name == "roofline_bounds"), NUMBER)[0].source
    return plot_roofline(points, small_size_rows(), figures_dir, claims.recorded_between(drawn_from.split("; ")))

