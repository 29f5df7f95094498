"""Figures: one look for every lab, and an honest label saying where the numbers came from.

A figure drawn from recorded reference data (no GPU here) says so in its title line;
a live one names the GPU it was measured on.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

if not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # files only (CI, the tour); Jupyter sets MPLBACKEND to its inline backend

import matplotlib.pyplot as plt  # noqa: E402

FIGURES = Path("figures")


def source_label(record: dict | None) -> str:
    """'measured live on NVIDIA H200' or 'reference data: NVIDIA H200, 2026-11-29 (no GPU here)'."""
    if record is None:
        return "no measurement available"
    prov = record.get("provenance", {})
    gpu, date = prov.get("gpu", "unknown GPU"), prov.get("date", "")[:10]
    if record.get("live"):
        return f"measured live on {gpu}"
    return f"reference data: {gpu}, {date} (recorded, not measured here)"


def new_figure(title: str, record: dict | None, ncols: int = 1, width: float = 6.0,
               height: float = 4.0):
    """A figure with `ncols` axes whose title carries the data's source."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, height), squeeze=False)
    fig.suptitle(f"{title}\n{source_label(record)}", fontsize=10)
    return fig, list(axes[0])


def save(fig, name: str, figures_dir: Path | None = None) -> Path:
    """Write `name`.png under figures/ (or figures_dir) and close the figure."""
    folder = Path(figures_dir or FIGURES)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{name}.png"
    fig.tight_layout()
    fig.savefig(file, dpi=110)
    plt.close(fig)
    return file


# --- Shared charts for benchmark results (kernellab.course.bench's result dicts) -------------------------

def _variant_rows(result: dict):
    """(name, is_baseline, rows with a timing) per variant, in declaration order."""
    for name, info in result["variants"].items():
        rows = [r for r in result["rows"] if r["variant"] == name and r.get("median_ms")]
        if rows:
            yield name, info.get("baseline", False), rows


def _size_axis(ax, result: dict):
    sizes = [s for s in result["sizes"] if isinstance(s, (int, float))]
    if sizes and max(sizes) > 10 * min(sizes) > 0:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(result["axis"])
    ax.grid(True, which="both", alpha=0.3)


def time_vs_size(ax, result: dict):
    """Median time (p10-p90 band) against the sweep axis per variant, with the empty-launch floor."""
    timed = list(_variant_rows(result))
    if not timed:
        ax.text(0.5, 0.5, "no timings in this result", ha="center", transform=ax.transAxes)
        return
    for name, baseline, rows in timed:
        x = [r["size"] for r in rows]
        line, = ax.plot(x, [r["median_ms"] for r in rows], "--" if baseline else "-", marker="o",
                        markersize=3, label=name)
        low, high = zip(*(time_band(r) for r in rows))
        ax.fill_between(x, low, high, color=line.get_color(), alpha=0.2)
    if result.get("launch_floor_ms"):
        ax.axhline(result["launch_floor_ms"], color="grey", linestyle=":",
                   label=f"one empty launch ({result['launch_floor_ms'] * 1e3:.0f} us)")
    _size_axis(ax, result)
    ax.set_yscale("log")
    ax.set_ylabel(f"time per call (ms; band: {band_label(result)})")
    ax.legend(fontsize=7)


def time_band(row: dict) -> tuple[float, float]:
    """The range a figure draws around a median: across repeats where there are repeats, else the
    p10-p90 of one run's samples."""
    if row.get("repeat_ms"):
        return min(row["repeat_ms"]), max(row["repeat_ms"])
    return row["p10_ms"], row["p90_ms"]


def band_label(result: dict) -> str:
    repeats = result.get("repeats")
    return f"range over {repeats} repeats" if repeats else "p10-p90 of one run"


REQUESTED_LABEL = "GB/s of requested bytes (ledger), not DRAM bytes"
COMPULSORY_LABEL = "GB/s of compulsory bytes: the ledger\nless re-reads a cache serves; not DRAM bytes"


def bandwidth_vs_size(ax, result: dict, dram_bytes: dict | None = None):
    """Achieved GB/s (requested bytes from the ledger / time) against the sweep axis, under the
    copy ceiling; error bars span the repeats. `dram_bytes` {(variant, size): bytes} from
    Nsight Compute (`kernellab.course.reference.variant_dram_bytes`) adds DRAM GB/s points where they were measured."""
    for (variant, size), moved in (dram_bytes or {}).items():
        timed = [r for r in result["rows"] if r["variant"] == variant and r["size"] == size and "median_ms" in r]
        if timed:
            ax.plot([size], [moved / (timed[0]["median_ms"] * 1e6)], "D", mfc="none", color="black",
                    label=f"{variant}: DRAM bytes (ncu) / time")
    for name, baseline, rows in _variant_rows(result):
        rows = [r for r in rows if "gbps" in r]
        gbps = [r["gbps"] for r in rows]
        bands = [time_band(r) for r in rows]
        # g * (1 - median / high), not g - g * median / high: a row whose median is its slowest
        # repeat (bench.merge_repeats) gets exactly 0, where the rounding of the other form can
        # leave -1e-13, which matplotlib refuses as an error bar
        spread = [[g * (1 - r["median_ms"] / high) for g, r, (_, high) in zip(gbps, rows, bands)],
                  [g * (r["median_ms"] / low - 1) for g, r, (low, _) in zip(gbps, rows, bands)]]
        ax.errorbar([r["size"] for r in rows], gbps, yerr=spread, fmt="--" if baseline else "-",
                    marker="o", markersize=3, capsize=2, label=name)
    _copy_ceiling(ax, result)
    _size_axis(ax, result)
    compulsory = any("compulsory_bytes" in r for r in result["rows"])
    ax.set_ylabel("achieved bandwidth\n(" + (COMPULSORY_LABEL if compulsory else REQUESTED_LABEL) + ")",
                  fontsize=8)
    ax.legend(fontsize=7)


def _copy_ceiling(ax, result: dict):
    if result.get("copy_gbps"):
        where = f"median of {result['repeats']} runs" if result.get("repeats") else "same run"
        ax.axhline(result["copy_gbps"], color="black", linestyle=":",
                   label=f"copy ceiling ({result['copy_gbps']:.0f} GB/s, {where})")


def bandwidth_bars(ax, result: dict, size):
    """Achieved GB/s of each variant at one size, against the copy ceiling, labelled with % of it."""
    rows = [r for r in result["rows"] if r["size"] == size and "gbps" in r]
    names = [r["variant"] for r in rows]
    bars = ax.bar(names, [r["gbps"] for r in rows],
                  color=["lightgrey" if result["variants"][n].get("baseline") else f"C{i}"
                         for i, n in enumerate(names)])
    for bar, r in zip(bars, rows):
        ax.annotate("instrument error" if "instrument_error" in r else f"{r['pct_of_copy']:.0f}%", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    _copy_ceiling(ax, result)
    ax.set_ylabel(f"achieved bandwidth\n({REQUESTED_LABEL})", fontsize=8)
    ax.set_title(f"{result['axis']} = {size}", fontsize=9)
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    ax.legend(fontsize=7)


def stacked_bytes(ax, ledgers: dict, unit: float = 1e6, unit_name: str = "MB"):
    """One bar per ledger ({label: traffic.Ledger}), stacked by op: where the bytes go."""
    ops: list[str] = []
    for ledger in ledgers.values():
        ops += [op for op in ledger.by_op() if op not in ops]
    bottoms = [0.0] * len(ledgers)
    for i, op in enumerate(ops):
        heights = [ledger.by_op().get(op, 0) / unit for ledger in ledgers.values()]
        ax.bar(list(ledgers), heights, bottom=bottoms, label=op, color=f"C{i % 10}")
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for x, total in enumerate(bottoms):
        ax.annotate(f"{total:,.4g} {unit_name}", (x, total), ha="center", va="bottom", fontsize=8)
    ax.set_ylabel(f"requested bytes ({unit_name}, reads + writes, ledger)")
    ax.legend(fontsize=7, title="op", title_fontsize=7)
