"""Lab 05's experiments: softmax and layernorm, unfused / fused / online, against torch and the
copy ceiling; and what holding the row in registers costs in occupancy.

`bench(out_dir)` (on a GPU: `kernellab bench 05 --out DIR`) validates every form, then times them
on 8192 rows of 256 .. 16384 columns, with torch.softmax and torch's layer_norm where torch is
importable; times the fused softmax at 8192 x 8192 with each way of holding a row in registers
(1024 x 8, 512 x 16, 256 x 32 values, and 1024 x 8 capped at 32 registers), with each one's
registers and occupancy; and checks the targets at 8192 x 8192 within the same run:
- fused softmax reaches >= 80% of the device-to-device copy bandwidth;
- fused softmax is at least as fast as torch.softmax.
`tour(figures_dir)` validates the forms on this device and draws the figures.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.lab04_gemm_epilogue import register_report, register_table, registers_figure
from kernellab.course import bench as harness
from kernellab.gpu import checks, device
from kernellab import occupancy
from kernellab.show import plots
from kernellab.course import reference, target
from kernellab.kernels import resources
from kernellab.course.claims import Claim, Missing, need, row
from kernellab.course.protocol import TourResult

LAB = "05"
ROWS = 8192
HEADLINE_COLS = 8192                      # the size the targets are stated at
SIZES = [256, 512, 1024, 2048, 4096, 8192, 16384]
TOUR_SIZES = [HEADLINE_COLS]
SIM_ROWS = 3
SIM_SIZES = [77]                          # columns: awkward, and more than one value per thread
SIM_BLOCK = 32                            # the simulator runs each thread in Python: small blocks
EPS = 1e-5
TARGET_PCT_OF_COPY = 80.0
# (threads, values per thread, register cap) for a row of 8192: the register-pressure experiment.
SHAPES = ((1024, 8, None), (512, 16, None), (256, 32, None), (1024, 8, 32))


def rows_for_size(cols: int) -> int:
    return SIM_ROWS if device.is_simulator() else ROWS


def block_for(lab, cols: int) -> int:
    return SIM_BLOCK if device.is_simulator() else lab.row_block(cols)


def softmax_reference(host):
    x = host["x"].astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm_reference(host):
    x = host["x"].astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + EPS) * host["gamma"] + host["beta"]


def rows_input(rng, cols):
    return {"x": checks.nonzero(rng, (rows_for_size(cols), cols)) * np.float32(4.0)}


def layernorm_inputs(rng, cols):
    return {**rows_input(rng, cols), "gamma": checks.nonzero(rng, cols), "beta": checks.nonzero(rng, cols)}


def with_statistics(lab):
    """A variant's setup that makes the unfused forms' row statistics once, outside the timing."""
    return lambda d, out: ({**d, "statistics": lab.row_statistics(d["x"])}, out)


def statistics_of(d) -> dict:
    """The launcher keyword for the statistics a setup made ({} for the forms that need none)."""
    return {"statistics": d["statistics"]} if "statistics" in d else {}


def softmax_benchmark(lab, sizes=SIZES, torch=None) -> harness.Benchmark:
    def variant(form, launcher, why):
        return harness.Variant(
            form, lambda d, out: launcher(d["x"], out=out, block=block_for(lab, d["x"].shape[1]),
                                          **statistics_of(d)), why,
            ledger=lambda cols: lab.softmax_ledger(rows_for_size(cols), cols, form, block_for(lab, cols)),
            setup=with_statistics(lab) if form == "unfused" else None)

    baselines = () if torch is None else [harness.torch_variant(
        torch, "torch_softmax", lambda x: torch.softmax(x, dim=1), "torch.softmax (one fused kernel)",
        ledger=lambda cols: lab.softmax_ledger(ROWS, cols, "fused", lab.row_block(cols)))]
    return harness.Benchmark(
        name="softmax", axis="columns per row", sizes=sizes, sim_sizes=SIM_SIZES,
        profile_size=HEADLINE_COLS, make_inputs=rows_input, reference=softmax_reference, rtol=1e-5, baselines=baselines,
        variants=[variant(form, launcher, why) for form, (launcher, why) in lab.VARIANTS.items()])


def layernorm_benchmark(lab, sizes=SIZES, torch=None) -> harness.Benchmark:
    def variant(form, launcher, why):
        return harness.Variant(
            form, lambda d, out: launcher(d["x"], d["gamma"], d["beta"], out=out, eps=EPS,
                                          block=block_for(lab, d["x"].shape[1]), **statistics_of(d)), why,
            ledger=lambda cols: lab.layernorm_ledger(rows_for_size(cols), cols, form, block_for(lab, cols)),
            setup=with_statistics(lab) if form == "unfused" else None)

    baselines = () if torch is None else [harness.torch_variant(
        torch, "torch_layer_norm",
        lambda x, gamma, beta: torch.nn.functional.layer_norm(x, (x.shape[1],), gamma, beta, EPS),
        "torch.nn.functional.layer_norm",
        ledger=lambda cols: lab.layernorm_ledger(ROWS, cols, "fused", lab.row_block(cols)))]
    return harness.Benchmark(
        name="layernorm", axis="columns per row", sizes=sizes, sim_sizes=SIM_SIZES,
        profile_size=HEADLINE_COLS, make_inputs=layernorm_inputs, reference=layernorm_reference, rtol=1e-4, baselines=baselines,
        variants=[variant(form, launcher, why) for form, (launcher, why) in lab.LAYERNORM_VARIANTS.items()])


def shape_name(block, items, max_registers):
    return f"fused_{block}x{items}" + (f"_max{max_registers}regs" if max_registers else "")


def shapes_benchmark(lab) -> harness.Benchmark:
    """The fused softmax at 8192 x 8192 with each way of holding a row in registers (GPU only)."""
    def variant(block, items, max_registers):
        return harness.Variant(
            shape_name(block, items, max_registers),
            lambda d, out: lab.softmax_fused(d["x"], out=out, block=block, items=items,
                                             max_registers=max_registers),
            f"{block} threads x {items} values" + (f", at most {max_registers} registers" if max_registers else ""),
            ledger=lambda cols: lab.softmax_ledger(ROWS, cols, "fused", block))
    return harness.Benchmark(
        name="softmax_shapes", axis="columns per row", sizes=[HEADLINE_COLS], sim_sizes=SIM_SIZES,
        make_inputs=rows_input, reference=softmax_reference, rtol=1e-5,
        variants=[variant(*shape) for shape in SHAPES])


def shape_registers(lab) -> list[dict]:
    """Registers and occupancy of the fused softmax at each shape (the driver's figures, GPU only)."""
    cc = device.facts().cc
    rows = []
    for block, items, max_registers in SHAPES:
        kernel = lab.fused_kernels(items, max_registers).softmax
        res = resources.kernel_resources(kernel, lab.SIGNATURES["softmax_fused_kernel"], cc)
        occ = occupancy.occupancy(cc, block, res.registers_per_thread, res.static_shared_bytes)
        rows.append({"shape": shape_name(block, items, max_registers), "block": block, "items": items,
                     "registers": res.registers_per_thread, "local_bytes": res.local_bytes,
                     "active_blocks": occ.active_blocks, "occupancy": occ.occupancy,
                     "limiters": list(occ.limiters)})
    return rows


def kernel_blocks(lab) -> dict:
    """{kernel: threads per block} for the register report, at 8192 columns."""
    default = lab.row_block(HEADLINE_COLS)
    return {name: 1024 if name == "softmax_fused_8_kernel" else 256 if name == "softmax_fused_32_kernel"
            else default for name in lab.SIGNATURES}


# --- targets --------------------------------------------------------------------------------------

def targets(softmax: dict, cols: int = HEADLINE_COLS) -> dict:
    fused = harness.row(softmax, "fused", cols)
    out = {"rows": ROWS, "cols": cols, "copy_gbps": softmax["copy_gbps"], "fused_ms": fused["median_ms"],
           "fused_gbps": fused["gbps"], "fused_pct_of_copy": fused["pct_of_copy"],
           "copy_target_met": fused["pct_of_copy"] >= TARGET_PCT_OF_COPY}
    if "torch_softmax" in softmax["variants"]:
        torch_ms = harness.row(softmax, "torch_softmax", cols).get("median_ms")
        out.update({"torch_ms": torch_ms, "torch_over_fused": torch_ms / fused["median_ms"],
                    "torch_target_met": fused["median_ms"] <= torch_ms})
    return out


def report(goals: dict) -> str:
    lines = [f"Lab 05 targets at {goals['rows']} x {goals['cols']} float32 (one run):",
             f"  fused softmax {goals['fused_ms']:.4f} ms, {goals['fused_gbps']:.0f} GB/s = "
             f"{goals['fused_pct_of_copy']:.1f}% of copy ({goals['copy_gbps']:.0f} GB/s): ratio "
             f"{goals['fused_pct_of_copy'] / 100:.2f} {'PASS' if goals['copy_target_met'] else 'FAIL'} "
             f"(target >= {TARGET_PCT_OF_COPY / 100:.2f})"]
    if "torch_ms" in goals:
        lines.append(f"  torch.softmax {goals['torch_ms']:.4f} ms: torch / fused = {goals['torch_over_fused']:.2f} "
                     f"{'PASS' if goals['torch_target_met'] else 'FAIL'} (target >= 1)")
    else:
        lines.append("  torch not importable here: no torch.softmax comparison")
    return "\n".join(lines)


def bench(out_dir: Path | None = None) -> dict:
    """On a GPU: validate, time, record registers, check the targets and save; in the simulator:
    validate only."""
    lab = target.load(LAB)
    torch = harness.optional_torch()
    softmax = harness.run(softmax_benchmark(lab, torch=torch), lab=LAB, out_dir=out_dir)
    layernorm = harness.run(layernorm_benchmark(lab, torch=torch), lab=LAB, out_dir=out_dir)
    if device.is_simulator():
        print("simulator: validated only; no timing exists in simulator mode")
        return {}
    shapes = harness.run(shapes_benchmark(lab), lab=LAB, out_dir=out_dir)
    registers = register_report(lab, kernel_blocks(lab))
    print(register_table(registers))
    shape_rows = shape_registers(lab)
    for r in shape_rows:
        timed = harness.row(shapes, r["shape"], HEADLINE_COLS)
        r.update({k: timed.get(k) for k in ("median_ms", "gbps", "pct_of_copy")})
        print(f"  {r['shape']:<24} {r['registers']:>4} registers, {r['local_bytes']} B local, "
              f"{r['active_blocks']} blocks/SM ({r['occupancy']:.0%}): {r['median_ms'] or float('nan'):.4f} ms, "
              f"{r['pct_of_copy'] or float('nan'):.1f}% of copy")
    provenance = reference.provenance()
    record = {"registers": {"provenance": provenance, "rows": registers},
              "shape_registers": {"provenance": provenance, "rows": shape_rows}}
    if softmax["ok"]:
        goals = targets(softmax)
        print(report(goals))
        record["targets"] = {"provenance": softmax["provenance"], **goals}
    else:
        print("some versions failed validation: no targets checked")
    reference.save(LAB, record, out_dir)
    return {"softmax": softmax, "layernorm": layernorm, "shapes": shapes, **record}


# --- figures --------------------------------------------------------------------------------------

def bandwidth_figure(result: dict, op: str, figures_dir: Path) -> Path:
    fig, (ax,) = plots.new_figure(f"{op} over {ROWS} rows: achieved bandwidth against row length", result)
    plots.bandwidth_vs_size(ax, result)
    return plots.save(fig, f"lab05_{op}_bandwidth", figures_dir)


def traffic_figure(lab, figures_dir: Path, cols: int = HEADLINE_COLS) -> Path:
    block = lab.row_block(cols)
    ledgers = {form: lab.softmax_ledger(ROWS, cols, form, block) for form in lab.FORMS}
    fig, (ax,) = plots.new_figure("", None)
    fig.suptitle(f"Declared memory traffic of softmax, {ROWS} x {cols} float32 (the ledgers, checked "
                 "against the simulator's meter)", fontsize=10)
    plots.stacked_bytes(ax, ledgers)
    return plots.save(fig, "lab05_traffic", figures_dir)


def shapes_figure(record: dict, figures_dir: Path) -> Path:
    """% of copy bandwidth of the fused softmax per register shape, labelled with registers and occupancy."""
    rows = record["rows"]
    fig, (ax,) = plots.new_figure(f"Fused softmax, {ROWS} x {HEADLINE_COLS}: the row in registers, "
                                  "three ways", record)
    bars = ax.bar([r["shape"].removeprefix("fused_") for r in rows], [r["pct_of_copy"] or 0 for r in rows])
    for bar, r in zip(bars, rows):
        ax.annotate(f"{r['registers']} regs\n{r['occupancy']:.0%} occ.", (bar.get_x() + bar.get_width() / 2,
                    bar.get_height()), ha="center", va="bottom", fontsize=8)
    ax.axhline(TARGET_PCT_OF_COPY, color="k", linestyle=":", label="target: 80% of copy")
    ax.set_ylabel("% of copy bandwidth")
    ax.set_ylim(0, 115)
    ax.legend(fontsize=7, loc="lower right")
    return plots.save(fig, "lab05_fused_shapes", figures_dir)


def tour(figures_dir: Path) -> TourResult:
    lab = target.load(LAB)
    quiet = {"progress": False, "out": lambda line: None}
    torch = harness.optional_torch()
    softmax = harness.run(softmax_benchmark(lab, TOUR_SIZES, torch), **quiet)
    layernorm = harness.run(layernorm_benchmark(lab, TOUR_SIZES, torch), **quiet)
    failed = [f"{r['variant']}: {r['error'].splitlines()[0]}" for result in (softmax, layernorm)
              for r in result["rows"] if not r["ok"]]
    if failed:
        return TourResult(False, "validation failed: " + "; ".join(failed))
    figures = [traffic_figure(lab, figures_dir)]
    stored = {}
    if softmax["live"]:
        stored["registers"] = reference.note_live(LAB, "registers", {
            "rows": register_report(lab, kernel_blocks(lab)), "provenance": {"gpu": device.facts().name}})
        softmax, layernorm = (reference.note_live(LAB, name, result)
                              for name, result in (("softmax", softmax), ("layernorm", layernorm)))
        source = "live"
    else:
        stored = (reference.load(LAB) or {}).get("records", {})
        softmax, layernorm = stored.get("softmax"), stored.get("layernorm")
        source = "H200 reference"
    if softmax is None or layernorm is None:
        return TourResult(True, "validated every form; no reference data yet: run `kernellab bench 05` "
                                "on a GPU", tuple(map(str, figures)))
    figures += [bandwidth_figure(softmax, "softmax", figures_dir),
                bandwidth_figure(layernorm, "layernorm", figures_dir)]
    for name, draw in (("registers", lambda r: registers_figure(r, figures_dir, "lab05_registers")),
                       ("shape_registers", lambda r: shapes_figure(r, figures_dir))):
        if stored.get(name):
            figures.append(draw(stored[name]))
    goals = targets(softmax, HEADLINE_COLS if HEADLINE_COLS in softmax["sizes"] else max(softmax["sizes"]))
    versus = f", torch.softmax / fused = {goals['torch_over_fused']:.2f}" if "torch_ms" in goals else ""
    return TourResult(True, f"fused softmax {goals['fused_pct_of_copy']:.0f}% of copy bandwidth at "
                            f"{ROWS} x {goals['cols']}{versus} ({source})", tuple(map(str, figures)))


# --- claims: what the discussion says, checked against the records -----------------------------
# (the ledgers a claim compares with are the solutions', so a claim never depends on a student's stub)

SHORT_ROWS = (256, 512, 1024)
TARGET_PCT_OF_COPY = 80.0


def _short_rows_values(records):
    softmax = need(records, "softmax")
    fused = [1e3 * row(softmax, "fused", cols)["median_ms"] for cols in SHORT_ROWS]
    return {"lo": SHORT_ROWS[0], "hi": SHORT_ROWS[-1], "growth": SHORT_ROWS[-1] // SHORT_ROWS[0],
            "min_us": min(fused), "max_us": max(fused), "floor": 1e3 * softmax["launch_floor_ms"],
            "torch_us": 1e3 * row(softmax, "torch_softmax", SHORT_ROWS[0])["median_ms"]}


def _headline_values(records):
    softmax = need(records, "softmax")
    lab = target.load(LAB, "solutions")
    cols = HEADLINE_COLS
    times = {form: row(softmax, form, cols)["median_ms"] for form in ("fused", "online", "unfused", "torch_softmax")}
    block = lab.row_block(cols)
    nbytes = {form: lab.softmax_ledger(ROWS, cols, form, block).total_bytes for form in ("fused", "online", "unfused")}
    fused = row(softmax, "fused", cols)
    return {"cols": cols, "pct": fused["pct_of_copy"], "gbps": fused["gbps"], "target": TARGET_PCT_OF_COPY,
            "fused": times["fused"], "torch": times["torch_softmax"], "vs_torch": times["torch_softmax"] / times["fused"],
            "unfused_ratio": times["unfused"] / times["fused"], "unfused_bytes": nbytes["unfused"] / nbytes["fused"],
            "online_ratio": times["online"] / times["fused"], "online_bytes": nbytes["online"] / nbytes["fused"]}


def _shapes_values(records):
    rows = {r["shape"]: r for r in need(records, "shape_registers", "rows")}
    if not rows:
        raise Missing("shape_registers has no rows")
    fastest = max(rows.values(), key=lambda r: r["pct_of_copy"])
    table = "; ".join(f"{r['block']} x {r['items']}{' capped' if name.endswith('regs') else ''}: "
                      f"{r['registers']} registers, {r['occupancy']:.0%} occupancy, {r['pct_of_copy']:.0f}% of copy"
                      for name, r in rows.items())
    return {"table": table, "fastest": fastest["shape"], "fastest_occ": fastest["occupancy"],
            "most_occ": max(r["occupancy"] for r in rows.values())}


CLAIMS = [
    Claim("short_rows_are_launches",
          "From {lo} to {hi} columns the fused softmax takes {min_us:.0f}-{max_us:.0f} us, flat while its bytes "
          "grow {growth}x: that is Numba's launch path (an empty launch: {floor:.0f} us), not barriers or idle "
          "threads; torch.softmax, with a cheaper launch, takes {torch_us:.1f} us at {lo} columns.",
          values=_short_rows_values,
          holds=lambda v: v["max_us"] < 1.2 * v["min_us"] and v["min_us"] < 2.5 * v["floor"]),
    Claim("fused_vs_torch",
          "At {cols} x {cols} the fused softmax takes {fused:.3f} ms, torch.softmax {torch:.3f} ms: "
          "{vs_torch:.2f}x torch's speed.",
          values=_headline_values, holds=lambda v: v["vs_torch"] >= 1.0),
    Claim("fused_short_of_target",
          "It moves {gbps:.0f} GB/s, {pct:.0f}% of the copy ceiling of the same run: short of the lab's "
          "{target:.0f}% target.",
          values=_headline_values, holds=lambda v: v["pct"] < v["target"],
          explains="one block of 1024 threads per row, and an SM's 2048 thread slots hold 2 such blocks: only 2 "
                   "rows per SM are in flight, and each row spends its two reductions (a dozen barriers) "
                   "with no loads outstanding, so the memory system idles between rows. Several rows per "
                   "block, or fewer barriers (warp shuffles), keep more bytes in flight."),
    Claim("unfused_vs_bytes",
          "The unfused form takes {unfused_ratio:.2f}x the fused time at {cols} columns; its bytes predict "
          "{unfused_bytes:.2f}x.",
          values=_headline_values, holds=lambda v: v["unfused_ratio"] >= v["unfused_bytes"],
          explains="each of its three kernels is a one-block-per-row pass with the fused kernel's own "
                   "bottleneck (few rows in flight, barriers with no loads outstanding), so each pass runs "
                   "further below the copy ceiling than the one fused pass. (Recordings before the "
                   "statistics were preallocated also count two allocations per call.)"),
    Claim("online_second_read",
          "The online form takes {online_ratio:.2f}x the fused time at {cols} columns, against {online_bytes:.2f}x "
          "from its bytes: its second read of the row is not served from L2 for free.",
          values=_headline_values, holds=lambda v: v["online_ratio"] >= 0.9 * v["online_bytes"]),
    Claim("row_shapes",
          "A row of 8192 in registers, split three ways: {table}. The fastest is {fastest}, at "
          "{fastest_occ:.0%} occupancy.",
          values=_shapes_values, holds=lambda v: v["fastest_occ"] == v["most_occ"]),
    Claim("shape_spread",
          "The 1024 x 8 kernel capped at 32 registers is the same kernel (it needs 32 anyway): it measured "
          "{capped:.0f}% of copy beside the uncapped {uncapped:.0f}%, the spread of one measurement here.",
          values=lambda records: {name: r["pct_of_copy"] for name, r in
                                  (("capped", _shape(records, "fused_1024x8_max32regs")),
                                   ("uncapped", _shape(records, "fused_1024x8")))},
          holds=lambda v: abs(v["capped"] - v["uncapped"]) < 25),
]


def _shape(records, name):
    for r in need(records, "shape_registers", "rows"):
        if r["shape"] == name:
            return r
    raise Missing(f"shape_registers has no {name} row")
