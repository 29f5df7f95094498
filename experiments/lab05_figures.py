"""Lab 05's figures: the time of softmax and of layernorm against row length, the requested
bytes of each softmax form (its ledger: drawn in the simulator too), the registers of every kernel,
and the fused softmax by how a row is held; `FIGURES` declares them."""

from __future__ import annotations

from pathlib import Path

from kernellab.course import protocol, registers
from kernellab.show import plots

from experiments.lab05_constants import HEADLINE_COLS, ROWS, TARGET_PCT_OF_COPY


def time_figure(result: dict, op: str, figures_dir: Path) -> Path:
    """Time per call of each form against row length: the forms move different bytes, so their
    times, not their rates, say which is faster."""
    fig, (ax,) = plots.new_figure(f"{op} over {ROWS} rows: time per call against row length (lower is faster)",
                                  result)
    plots.time_vs_size(ax, result)
    return plots.save(fig, f"lab05_{op}_time", figures_dir)


def traffic_figure(lab, figures_dir: Path, cols: int = HEADLINE_COLS) -> Path:
    block = lab.row_block(cols)
    ledgers = {form: lab.softmax_ledger(ROWS, cols, form, block) for form in lab.FORMS}
    fig, (ax,) = plots.new_figure(f"Memory traffic of softmax, {ROWS} x {cols} float32", None,
                                  source=plots.LEDGER_SOURCE)
    plots.stacked_bytes(ax, ledgers)
    return plots.save(fig, "lab05_traffic", figures_dir)


def shapes_figure(record: dict, figures_dir: Path) -> Path:
    """% of copy bandwidth of the fused softmax per way of holding the row, labelled with registers,
    rows per SM and occupancy."""
    rows = record["rows"]
    fig, (ax,) = plots.new_figure(f"Fused softmax, {ROWS} x {HEADLINE_COLS}, by how a row is held:\n"
                                  "fused_ in registers, staged_ in shared memory, vector_ in registers by 16-byte loads",
                                  record, width=9.0)
    bars = ax.bar([r["shape"] for r in rows], [r["pct_of_copy"] or 0 for r in rows])
    for bar, r in zip(bars, rows):
        rows_per_sm = f"{r['active_blocks']} row{'' if r['active_blocks'] == 1 else 's'}/SM"
        ax.annotate(f"{r['registers']} regs\n{rows_per_sm}\n{r['occupancy']:.0%} occ.",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize="x-small")
    ax.tick_params(axis="x", labelsize="x-small", labelrotation=30)
    ax.axhline(TARGET_PCT_OF_COPY, color="k", linestyle=":", label="target: 80% of copy")
    ax.set_ylabel("% of copy bandwidth")
    ax.set_ylim(0, 125)
    ax.legend(loc="lower right")
    return plots.save(fig, "lab05_fused_shapes", figures_dir)


FIGURES = (
    protocol.Figure("lab05_traffic", lambda lab, records, out: traffic_figure(lab, out)),
    protocol.Figure("lab05_softmax_time", lambda lab, records, out: time_figure(
        records["softmax"], "softmax", out), needs=("softmax",)),
    protocol.Figure("lab05_layernorm_time", lambda lab, records, out: time_figure(
        records["layernorm"], "layernorm", out), needs=("layernorm",)),
    protocol.Figure("lab05_registers", lambda lab, records, out: registers.figure(
        records["registers"], out, "lab05_registers"), needs=("registers",)),
    protocol.Figure("lab05_fused_shapes", lambda lab, records, out: shapes_figure(records["shape_registers"], out),
                    needs=("shape_registers",)),
)
