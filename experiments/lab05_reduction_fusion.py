"""Lab 05's experiments: softmax and layernorm, unfused / fused / online, against torch and the
copy ceiling; what holding the row in registers costs in occupancy; and the staged softmax
(solution side) that holds rows in shared memory to keep more of them in flight.

Declared as `LAB` (kernellab.course.protocol) at the end: `kernellab bench 05` validates every
form, then times them on 8192 rows of 256 .. 16384 columns, with torch.softmax and torch's
layer_norm where torch is importable; times the fused softmax at 8192 x 8192 with each way of
holding a row (1024 x 8, 512 x 16, 256 x 32 values in registers, 1024 x 8 capped at 32
registers; staged in shared memory by 256 threads in bursts of 8, 16 and 32 loads, and by 512
threads), with each one's registers and occupancy; and checks the targets at 8192 x 8192 within
the same run, on the fastest fused form:
- the fused softmax reaches >= 80% of the copy ceiling;
- it is at least as fast as torch.softmax.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol, reference, registers
from kernellab.gpu import checks, device
from kernellab.gpu.launches import record_launches
from kernellab.show import plots
from kernellab.course.claims import Claim, Compare, Missing, course_solution, need, repeats_of, row, says, states, target

ROWS = 8192
HEADLINE_COLS = 8192                      # the size the targets are stated at
SIZES = [256, 512, 1024, 2048, 4096, 8192, 16384]
TOUR_SIZES = [HEADLINE_COLS]
SIM_ROWS = 3
SIM_SIZES = [77]                          # columns: awkward, and more than one value per thread
SIM_BLOCK = 32                            # the simulator runs each thread in Python: small blocks
EPS = 1e-5
TARGET_PCT_OF_COPY = 80.0
# (threads, values per thread, register cap) for a row of 8192 in registers: the register-pressure experiment.
SHAPES = ((1024, 8, None), (512, 16, None), (256, 32, None), (1024, 8, 32))
# (threads, loads in flight per thread) for a row of 8192 staged in shared memory (solution side).
STAGED_SHAPES = ((256, 8), (256, 16), (256, 32), (512, 8))
# threads for a row of 8192 in 16-byte vectors held in registers (solution side): 8, 16, 32 values each.
VECTOR_BLOCKS = (1024, 512, 256)
SHAPES_SIM_COLS = [76]                    # a multiple of 4, as 16-byte rows need; not of any block


def rows_for_size(cols: int) -> int:
    return SIM_ROWS if device.is_simulator() else ROWS


def block_for(lab, cols: int) -> int:
    return SIM_BLOCK if device.is_simulator() else lab.row_block(cols)


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


ROW_STATISTICS = ("row_max", "row_sum", "mean", "rstd")   # the unfused forms' per-row temporaries


def cached_rereads(ledger, rows: int, cols: int):
    """The ledger with the re-reads a cache serves marked (`Ledger.with_distinct`): gamma and beta,
    `cols` values that every row reads again, and the unfused forms' row statistics, `rows` values
    that each thread of a row reads again. The bench rates a row on the bytes left (the
    compulsory bytes): in requested bytes torch's layernorm ran above the DRAM ceiling, its
    re-reads of gamma and beta served by L2."""
    for name in ("gamma", "beta"):
        ledger = ledger.with_distinct(name, cols)
    for name in ROW_STATISTICS:
        ledger = ledger.with_distinct(name, rows)
    return ledger


def softmax_benchmark(lab, torch=None) -> harness.Benchmark:
    def variant(form, launcher, why):
        return harness.Variant(
            form, lambda d, out: launcher(d["x"], out=out, block=block_for(lab, d["x"].shape[1]),
                                          **statistics_of(d)), why,
            ledger=lambda cols: cached_rereads(lab.softmax_ledger(rows_for_size(cols), cols, form,
                                                                  block_for(lab, cols)), rows_for_size(cols), cols),
            setup=with_statistics(lab) if form == "unfused" else None)

    baselines = () if torch is None else [torch_softmax(lab, torch)]
    return harness.Benchmark(
        name="softmax", axis="columns per row", sizes=SIZES, sim_sizes=SIM_SIZES,
        profile_size=HEADLINE_COLS, make_inputs=rows_input, reference=lambda h: lab.softmax_reference(h["x"]), rtol=1e-5,
        baselines=baselines, tour_sizes=TOUR_SIZES,
        variants=[variant(form, launcher, why) for form, (launcher, why) in lab.VARIANTS.items()])


def layernorm_benchmark(lab, torch=None) -> harness.Benchmark:
    def variant(form, launcher, why):
        return harness.Variant(
            form, lambda d, out: launcher(d["x"], d["gamma"], d["beta"], out=out, eps=EPS,
                                          block=block_for(lab, d["x"].shape[1]), **statistics_of(d)), why,
            ledger=lambda cols: cached_rereads(lab.layernorm_ledger(rows_for_size(cols), cols, form,
                                                                    block_for(lab, cols)), rows_for_size(cols), cols),
            setup=with_statistics(lab) if form == "unfused" else None)

    baselines = () if torch is None else [harness.torch_variant(
        torch, "torch_layer_norm",
        lambda x, gamma, beta: torch.nn.functional.layer_norm(x, (x.shape[1],), gamma, beta, EPS),
        "torch.nn.functional.layer_norm",
        ledger=lambda cols: cached_rereads(lab.layernorm_ledger(ROWS, cols, "fused", lab.row_block(cols)), ROWS, cols))]
    return harness.Benchmark(
        name="layernorm", axis="columns per row", sizes=SIZES, sim_sizes=SIM_SIZES,
        profile_size=HEADLINE_COLS, make_inputs=layernorm_inputs, reference=lambda h: lab.layernorm_reference(h["x"], h["gamma"], h["beta"], EPS),
        rtol=1e-4, baselines=baselines, tour_sizes=TOUR_SIZES,
        variants=[variant(form, launcher, why) for form, (launcher, why) in lab.LAYERNORM_VARIANTS.items()])


def shape_name(block, items, max_registers):
    return f"fused_{block}x{items}" + (f"_max{max_registers}regs" if max_registers else "")


def staged_name(block, burst):
    return f"staged_{block}x{HEADLINE_COLS // block}_burst{burst}"


def vector_name(block):
    return f"vector_{block}x{HEADLINE_COLS // block}"


def shape_rows() -> int:
    """Rows of the shapes' inputs: one in the simulator (each shape is the same code; keep it quick)."""
    return 1 if device.is_simulator() else ROWS


def one_row_in_the_simulator(rng, cols):
    return {"x": checks.nonzero(rng, (shape_rows(), cols)) * np.float32(4.0)}


def shape_block(block: int) -> int:
    return SIM_BLOCK if device.is_simulator() else block


def torch_softmax(lab, torch):
    return harness.torch_variant(
        torch, "torch_softmax", lambda x: torch.softmax(x, dim=1), "torch.softmax (one fused kernel)",
        ledger=lambda cols: lab.softmax_ledger(ROWS, cols, "fused", lab.row_block(cols)))


def shapes_benchmark(lab, torch=None) -> harness.Benchmark:
    """The fused softmax at 8192 x 8192 with each way of holding a row: in registers, and (where
    the lab module is the solutions') staged in shared memory; torch.softmax beside them. In the
    simulator each shape runs on blocks of SIM_BLOCK threads (the code paths, not the speed)."""
    def fused(block, items, max_registers):
        return harness.Variant(
            shape_name(block, items, max_registers),
            lambda d, out: lab.softmax_fused(d["x"], out=out, block=shape_block(block), items=items,
                                             max_registers=max_registers),
            f"{block} threads x {items} values in registers"
            + (f", at most {max_registers} registers" if max_registers else ""),
            ledger=lambda cols: lab.softmax_ledger(shape_rows(), cols, "fused", block))

    def staged(block, burst):
        return harness.Variant(
            staged_name(block, burst),
            lambda d, out: lab.softmax_staged(d["x"], out=out, block=shape_block(block), burst=burst),
            f"the row staged in shared memory by {block} threads, {burst} loads in flight each",
            ledger=lambda cols: lab.softmax_ledger(shape_rows(), cols, "fused", block))

    def vector(block):
        return harness.Variant(
            vector_name(block),
            lambda d, out: lab.softmax_vector(d["x"], out=out, block=shape_block(block)),
            f"the row in registers by {block} threads in 16-byte vectors, exp as one exp2",
            ledger=lambda cols: lab.softmax_ledger(shape_rows(), cols, "fused", block))

    variants = [fused(*shape) for shape in SHAPES]
    if hasattr(lab, "softmax_staged"):     # solution side: the starter would give 05.1 away
        variants += [staged(*shape) for shape in STAGED_SHAPES] + [vector(block) for block in VECTOR_BLOCKS]
    return harness.Benchmark(
        name="softmax_shapes", axis="columns per row", sizes=[HEADLINE_COLS], sim_sizes=SHAPES_SIM_COLS,
        make_inputs=one_row_in_the_simulator, reference=lambda h: lab.softmax_reference(h["x"]), rtol=1e-5,
        variants=variants, baselines=[torch_softmax(lab, torch)] if torch is not None else ())


def benchmarks(lab, torch) -> list[harness.Benchmark]:
    return [softmax_benchmark(lab, torch), layernorm_benchmark(lab, torch), shapes_benchmark(lab, torch)]


def shape_kernels(lab) -> list[tuple[str, int, int, object, str]]:
    """(shape name, threads, values per thread, kernel, signature) of every shape the shapes
    benchmark times."""
    rows_signature = lab.SIGNATURES["softmax_fused_kernel"]
    found = [(shape_name(block, items, cap), block, items,       # compiled as softmax_fused compiles it
              lab.fused_kernels(items, lab.register_cap(block, cap)).softmax, rows_signature)
             for block, items, cap in SHAPES]
    if hasattr(lab, "softmax_staged"):
        found += [(staged_name(block, burst), block, HEADLINE_COLS // block,
                   lab.staged_kernels(block, HEADLINE_COLS // block, burst), rows_signature)
                  for block, burst in STAGED_SHAPES]
        found += [(vector_name(block), block, HEADLINE_COLS // block,
                   lab.vector_kernels(block, lab.vector_shape(HEADLINE_COLS, block)),
                   lab.SIGNATURES[VECTOR_KERNEL]) for block in VECTOR_BLOCKS]
    return found


def measure_shape_registers(lab, records) -> dict:
    """Registers, shared memory and occupancy of each shape's kernel (the driver's figures, GPU
    only), beside its timing from this run's shapes benchmark."""
    shapes = shape_kernels(lab)
    found = registers.resources_rows([(kernel, signature, block) for _, block, _, kernel, signature in shapes])
    rows = []
    for (name, block, items, _, _), res in zip(shapes, found):
        timed = next((r for r in records["softmax_shapes"]["rows"]
                      if r["variant"] == name and r["size"] == HEADLINE_COLS), {})
        rows.append({"shape": name, "block": block, "items": items,
                     **{k: res[k] for k in ("registers", "shared_bytes", "local_bytes", "active_blocks",
                                            "occupancy", "limiters")},
                     **{k: timed.get(k) for k in ("median_ms", "gbps", "pct_of_copy")}})
        r = rows[-1]
        print(f"  {name:<26} {r['registers']:>4} registers, {r['shared_bytes']} B shared, {r['active_blocks']} "
              f"blocks/SM ({r['occupancy']:.0%}): {r['median_ms'] or float('nan'):.4f} ms, "
              f"{r['pct_of_copy'] or float('nan'):.1f}% of copy")
    return {"provenance": reference.provenance(), "rows": rows}


def measure_registers(lab) -> dict:
    """The register report of every declared kernel, at 8192 columns where the block varies."""
    rows = registers.report(lab, registers.declared_blocks(
        KERNELS, default=lab.row_block(HEADLINE_COLS), names=set(lab.SIGNATURES)))
    print(registers.table(rows))
    return {"provenance": reference.provenance(), "rows": rows}


def validate(lab, seed: int) -> list[str]:
    """The kernels the lab module names in SIGNATURES are the declared ones (the solution-side
    staged kernel where the module has it); on a GPU, each launcher launches only declared
    kernels (in the simulator the benchmarks' validation launches every form anyway)."""
    declared = {k.name for k in KERNELS}
    if not set(lab.SIGNATURES) <= declared or not declared - SOLUTION_SIDE_KERNELS <= set(lab.SIGNATURES):
        raise AssertionError(f"lab 05's declared kernels differ from its SIGNATURES: "
                             f"{sorted(declared ^ set(lab.SIGNATURES))}")
    if device.is_simulator():
        return [f"{len(lab.SIGNATURES)} kernels declared"]
    rng = np.random.default_rng(seed)
    d = {k: device.cuda().to_device(v) for k, v in layernorm_inputs(rng, 10).items()}
    with record_launches() as launches:
        for launcher, _ in lab.VARIANTS.values():
            launcher(d["x"])
        for launcher, _ in lab.LAYERNORM_VARIANTS.values():
            launcher(d["x"], d["gamma"], d["beta"])
    unknown = sorted(set(launches.names()) - declared)
    if unknown:
        raise AssertionError(f"launched kernels the declaration lacks: {', '.join(unknown)}")
    return [f"{len(launches)} launches of declared kernels"]


# --- targets --------------------------------------------------------------------------------------

FUSED_FORMS = ("fused",)      # of the softmax benchmark; every variant of the shapes benchmark is one


def fastest_fused(records: dict, cols: int = HEADLINE_COLS) -> tuple[dict, dict]:
    """(its benchmark result, its row): the fastest one-read-one-write softmax at `cols` columns,
    over the softmax benchmark's fused form and every shape of the shapes benchmark."""
    candidates = [(result, r) for result in (records.get("softmax"), records.get("softmax_shapes")) if result
                  for r in result["rows"] if r["size"] == cols and r.get("median_ms")
                  and not result["variants"][r["variant"]]["baseline"]
                  and (result["benchmark"] == "softmax_shapes" or r["variant"] in FUSED_FORMS)]
    if not candidates:
        raise Missing(f"no timed fused softmax at {cols} columns")
    return min(candidates, key=lambda c: c[1]["median_ms"])


def targets_of(records: dict, cols: int = HEADLINE_COLS) -> dict:
    """The targets on the fastest fused form, against torch.softmax timed in the same benchmark."""
    result, fused = fastest_fused(records, cols)
    out = {"rows": ROWS, "cols": cols, "fused_variant": fused["variant"], "benchmark": result["benchmark"],
           "copy_gbps": result["copy_gbps"], "fused_ms": fused["median_ms"], "fused_gbps": fused["gbps"],
           "fused_pct_of_copy": fused["pct_of_copy"],
           "copy_target_met": fused["pct_of_copy"] >= TARGET_PCT_OF_COPY}
    timed_torch = [r for r in result["rows"] if r["variant"] == "torch_softmax" and r["size"] == cols
                   and r.get("median_ms")]
    if timed_torch:
        torch_ms = timed_torch[0]["median_ms"]
        out.update({"torch_ms": torch_ms, "torch_over_fused": torch_ms / fused["median_ms"],
                    "torch_target_met": fused["median_ms"] <= torch_ms})
    return out


def targets(lab, records: dict) -> dict:
    """The lab's targets at 8192 x 8192 from one run's records (printed, and saved by the bench)."""
    goals = targets_of(records)
    print(report(goals))
    return goals


def report(goals: dict) -> str:
    lines = [f"Lab 05 targets at {goals['rows']} x {goals['cols']} float32 (one run), on the fastest fused "
             f"form, {goals['fused_variant']}:",
             f"  {goals['fused_ms']:.4f} ms, {goals['fused_gbps']:.0f} GB/s = "
             f"{goals['fused_pct_of_copy']:.1f}% of copy ({goals['copy_gbps']:.0f} GB/s): ratio "
             f"{goals['fused_pct_of_copy'] / 100:.2f} {'PASS' if goals['copy_target_met'] else 'FAIL'} "
             f"(target >= {TARGET_PCT_OF_COPY / 100:.2f})"]
    if "torch_ms" in goals:
        lines.append(f"  torch.softmax {goals['torch_ms']:.4f} ms: torch / fused = {goals['torch_over_fused']:.2f} "
                     f"{'PASS' if goals['torch_target_met'] else 'FAIL'} (target >= 1)")
    else:
        lines.append("  torch not importable here: no torch.softmax comparison")
    return "\n".join(lines)


# --- figures --------------------------------------------------------------------------------------

def bandwidth_figure(result: dict, op: str, figures_dir: Path) -> Path:
    fig, (ax,) = plots.new_figure(f"{op} over {ROWS} rows: achieved bandwidth against row length", result)
    plots.bandwidth_vs_size(ax, result)
    return plots.save(fig, f"lab05_{op}_bandwidth", figures_dir)


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
                                  "fused_ in registers, staged_ in shared memory, vector_ in 16-byte vectors",
                                  record, width=9.0)
    bars = ax.bar([r["shape"] for r in rows], [r["pct_of_copy"] or 0 for r in rows])
    for bar, r in zip(bars, rows):
        ax.annotate(f"{r['registers']} regs\n{r['active_blocks']} rows/SM\n{r['occupancy']:.0%} occ.",
                    (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom", fontsize="x-small")
    ax.tick_params(axis="x", labelsize="x-small", labelrotation=30)
    ax.axhline(TARGET_PCT_OF_COPY, color="k", linestyle=":", label="target: 80% of copy")
    ax.set_ylabel("% of copy bandwidth")
    ax.set_ylim(0, 125)
    ax.legend(loc="lower right")
    return plots.save(fig, "lab05_fused_shapes", figures_dir)


def key_figure(lab, records) -> str:
    goals = targets_of(records)
    versus = f", torch.softmax / fused = {goals['torch_over_fused']:.2f}" if "torch_ms" in goals else ""
    return (f"fastest fused softmax ({goals['fused_variant']}) {goals['fused_pct_of_copy']:.0f}% of copy "
            f"bandwidth at {ROWS} x {goals['cols']}{versus}")


FIGURES = (
    protocol.Figure("lab05_traffic", lambda lab, records, out: traffic_figure(lab, out)),
    protocol.Figure("lab05_softmax_bandwidth", lambda lab, records, out: bandwidth_figure(
        records["softmax"], "softmax", out), needs=("softmax",)),
    protocol.Figure("lab05_layernorm_bandwidth", lambda lab, records, out: bandwidth_figure(
        records["layernorm"], "layernorm", out), needs=("layernorm",)),
    protocol.Figure("lab05_registers", lambda lab, records, out: registers.figure(
        records["registers"], out, "lab05_registers"), needs=("registers",)),
    protocol.Figure("lab05_fused_shapes", lambda lab, records, out: shapes_figure(records["shape_registers"], out),
                    needs=("shape_registers",)),
)


# --- claims: what the discussion says, checked against the records -----------------------------
# (the ledgers a claim compares with are the solutions', so a claim never depends on a student's stub)

SHORT_ROWS = (256, 512, 1024)


def _short_rows_values(records):
    softmax = need(records, "softmax")
    fused = [1e3 * row(softmax, "fused", cols)["median_ms"] for cols in SHORT_ROWS]
    return {"lo": SHORT_ROWS[0], "hi": SHORT_ROWS[-1], "growth": SHORT_ROWS[-1] // SHORT_ROWS[0],
            "min_us": min(fused), "max_us": max(fused), "floor": 1e3 * softmax["launch_floor_ms"],
            "floors": min(fused) / (1e3 * softmax["launch_floor_ms"]),
            "torch_us": 1e3 * row(softmax, "torch_softmax", SHORT_ROWS[0])["median_ms"]}


def _headline_values(records):
    softmax = need(records, "softmax")
    lab = course_solution("05")
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
    """The ways of holding the row in registers (the staged ones are the next claim's)."""
    rows = {r["shape"]: r for r in need(records, "shape_registers", "rows") if r["shape"].startswith("fused_")}
    if not rows:
        raise Missing("shape_registers has no rows")
    fastest = max(rows.values(), key=lambda r: r["pct_of_copy"])
    table = "; ".join(f"{r['block']} x {r['items']}{' capped' if name.endswith('regs') else ''}: "
                      f"{r['registers']} registers, {r['occupancy']:.0%} occupancy, {r['pct_of_copy']:.0f}% of copy"
                      for name, r in rows.items())
    return {"table": table, "fastest": fastest["shape"], "fastest_occ": fastest["occupancy"],
            "most_occ": max(r["occupancy"] for r in rows.values()),
            "rows_per_sm": max(r["active_blocks"] for r in rows.values()), "best_pct": fastest["pct_of_copy"]}


def _timed_shapes(records, kind: str) -> tuple[list[dict], dict]:
    """The timed shape_registers rows of one way of holding the row ('staged', 'vector'), and the
    fastest of them; Missing for a recording made before that kind existed."""
    rows = [r for r in need(records, "shape_registers", "rows") if r["shape"].startswith(f"{kind}_")
            and r["pct_of_copy"] is not None]
    if not rows:
        raise Missing(f"shape_registers has no timed {kind}_ row (recorded before the {kind} softmax)")
    return rows, max(rows, key=lambda r: r["pct_of_copy"])


def _staged_values(records):
    staged, fastest = _timed_shapes(records, "staged")
    table = "; ".join(f"{r['shape']}: {r['registers']} registers, {r['shared_bytes']} B shared, "
                      f"{r['active_blocks']} rows per SM, {r['pct_of_copy']:.0f}% of copy" for r in staged)
    shapes = _shapes_values(records)
    return {**shapes, "staged_table": table, "staged": fastest["shape"],
            "staged_rows": fastest["active_blocks"], "staged_pct": fastest["pct_of_copy"],
            "staged_gap": abs(fastest["pct_of_copy"] - shapes["best_pct"])}


def _profiled(variant: str, benchmark: str = "softmax_shapes") -> dict:
    """The recorded Nsight Compute row of a variant at the headline size."""
    found = [r for r in reference.profile_rows("05") if r["benchmark"] == benchmark
             and r["variant"] == variant and r["size"] == HEADLINE_COLS and r.get("warp_instructions")]
    if not found:
        raise Missing(f"no profile row with warp instructions for {benchmark} {variant}")
    return found[0]


def _instruction_values(records):
    (_, staged), (_, vector) = _timed_shapes(records, "staged"), _timed_shapes(records, "vector")
    values = {"cols": HEADLINE_COLS, "staged": staged["shape"], "vector": vector["shape"]}
    for key, name in (("fused", shape_name(*SHAPES[0])), ("staged", staged["shape"]), ("vector", vector["shape"])):
        found = _profiled(name)
        values.update({f"{key}_inst": found["warp_instructions"] / 1e6, f"{key}_sm": found["sm_throughput_pct"],
                       f"{key}_dram": found["dram_throughput_pct"]})
    return {**values, "vector_share": values["vector_inst"] / min(values["fused_inst"], values["staged_inst"]),
            "dram_gain": values["vector_dram"] - values["fused_dram"]}


def _online_values(records):
    """The online form's time and requested bytes against the fused form's, beside the DRAM bytes,
    DRAM busy share and warp instructions Nsight Compute recorded for each."""
    fused, online = _profiled("fused", "softmax"), _profiled("online", "softmax")
    dram = {name: (r["dram_bytes_read"] + r["dram_bytes_write"]) / 1e6 for name, r in (("fused", fused), ("online", online))}
    return {**_headline_values(records), "fused_dram_mb": dram["fused"], "online_dram_mb": dram["online"],
            "dram_off": 100 * abs(dram["online"] / dram["fused"] - 1),
            "fused_dram_pct": fused["dram_throughput_pct"], "online_dram_pct": online["dram_throughput_pct"],
            "inst_ratio": online["warp_instructions"] / fused["warp_instructions"]}


def _capped_values(records):
    """The 1024 x 8 kernel with and without a 32-register cap: registers, speed in every repeat
    against each measurement's own spread, and the warp instructions each issued."""
    capped_name, uncapped_name = "fused_1024x8_max32regs", "fused_1024x8"
    slower, spread = [], []
    for shapes in repeats_of(records, "softmax_shapes", "05"):
        capped, uncapped = row(shapes, capped_name, HEADLINE_COLS), row(shapes, uncapped_name, HEADLINE_COLS)
        slower.append(capped["median_ms"] / uncapped["median_ms"] - 1)
        spread += [(r["p90_ms"] - r["p10_ms"]) / r["median_ms"] for r in (capped, uncapped)]
    return {"registers": _shape(records, uncapped_name)["registers"], "repeats": len(slower),
            "slower_lo": min(slower), "slower_hi": max(slower), "spread": max(spread),
            "capped": _shape(records, capped_name)["pct_of_copy"],
            "uncapped": _shape(records, uncapped_name)["pct_of_copy"],
            "capped_inst": _profiled(capped_name)["warp_instructions"] / 1e6,
            "uncapped_inst": _profiled(uncapped_name)["warp_instructions"] / 1e6}


def _vector_values(records):
    rows, fastest = _timed_shapes(records, "vector")
    fused = _shape(records, shape_name(*SHAPES[0]))
    table = "; ".join(f"{r['shape']}: {r['registers']} registers, {r['active_blocks']} rows per SM, "
                      f"{r['pct_of_copy']:.0f}% of copy" for r in rows)
    return {"vector_table": table, "vector": fastest["shape"], "vector_pct": fastest["pct_of_copy"],
            "fused_pct": fused["pct_of_copy"], "vector_over_fused": fused["median_ms"] / fastest["median_ms"]}


def _target_values(records):
    if not any(name.startswith("staged_") for name in need(records, "softmax_shapes", "variants")):
        raise Missing("softmax_shapes has no staged_ variant (recorded before the staged softmax)")
    goals = targets_of(records)
    if "torch_ms" not in goals:
        raise Missing("no torch.softmax timed beside the fastest fused form")
    return {"variant": goals["fused_variant"], "gbps": goals["fused_gbps"], "pct": goals["fused_pct_of_copy"],
            "ms": goals["fused_ms"], "torch_ms": goals["torch_ms"], "vs_torch": goals["torch_over_fused"],
            "target": TARGET_PCT_OF_COPY, "cols": goals["cols"]}


CLAIMS = [
    Claim("short_rows_are_launches",
          "From {lo} to {hi} columns the fused softmax takes {min_us:.0f}-{max_us:.0f} us of GPU time while its "
          "bytes grow {growth}x; an empty launch takes {floor:.1f} us, so even the fastest is {floors:.1f} empty "
          "launches ({cost}); torch.softmax takes {torch_us:.1f} us at {lo} columns.",
          values=_short_rows_values,
          checks=(says("cost", "floors", ">", 2, "more than 2: these short rows are not the launch's cost",
                       "2 or fewer: the launch is most of their cost"),),
          explains="recordings before the harness held the host's submit outside the timing window put "
                   "these sizes at one flat time, Numba's launch path; timed on the GPU alone they cost "
                   "several empty launches, which the launch path no longer explains (what does, barriers "
                   "or the rows in flight, is not measured here)"),
    Claim("fused_vs_torch",
          "At {cols} x {cols} the fused softmax takes {fused:.3f} ms, torch.softmax {torch:.3f} ms: "
          "{vs_torch:.2f}x torch's speed ({faster}).",
          values=_headline_values, checks=(says("faster", "vs_torch", ">=", 1, "it beats torch", "torch beats it"),)),
    Claim("fused_short_of_target",
          "It moves {gbps:.0f} GB/s, {pct:.0f}% of the copy ceiling of the same run (target: at least "
          "{target:.0f}%, {met}).",
          headline="the graded fused kernel: {pct:.0f}% ({met})",
          values=_headline_values, checks=(target("met", "pct", ">=", "target"),),
          explains="measured under Nsight Compute (the instructions_pace_the_row claim): the kernel's SM is "
                   "busier than its DRAM, so issuing instructions, not bytes in flight, sets its pace: each "
                   "value costs a 4-byte load and store with 2-D index arithmetic and a libdevice exp. "
                   "The vectorised form issues far fewer instructions per value and reaches the target."),
    Claim("unfused_vs_bytes",
          "The unfused form takes {unfused_ratio:.2f}x the fused time at {cols} columns; its bytes predict "
          "{unfused_bytes:.2f}x ({than}).",
          values=_headline_values,
          checks=(says("than", "unfused_ratio", ">=", "unfused_bytes", "it is at least as slow as its bytes say",
                       "it is faster than its bytes say"),),
          explains="each of its three kernels is a one-block-per-row pass with the fused kernel's own "
                   "bottleneck (few rows in flight, barriers with no loads outstanding), so each pass runs "
                   "further below the copy ceiling than the one fused pass. (Recordings before the "
                   "statistics were preallocated also count two allocations per call.)"),
    Claim("online_second_read",
          "The online form takes {online_ratio:.2f}x the fused time at {cols} columns, against {online_bytes:.2f}x "
          "from its requested bytes (the ledger counts its second read of the row). Under Nsight Compute it read and wrote "
          "{online_dram_mb:.1f} MB of DRAM and the fused kernel {fused_dram_mb:.1f} MB ({dram_same}: "
          "{dram_off:.2f}% apart): the second read is served from cache. Its DRAM was {online_dram_pct:.0f}% "
          "busy against the fused kernel's {fused_dram_pct:.0f}%, and it issued {inst_ratio:.2f}x the fused "
          "kernel's warp instructions: the extra time is instructions and latency, not bytes.",
          values=_online_values,
          checks=(says("dram_same", "dram_off", "<", 2, "the same DRAM bytes, within 2%", "different DRAM bytes, 2% or more apart"),
                  states("online_dram_pct", "<", "fused_dram_pct"), Compare("inst_ratio", ">", 1.0)),
          explains="requested bytes (the ledger) and DRAM bytes (Nsight Compute) are different quantities: "
                   "a row of 8192 float32 is 32 KB, and its second read finds it in L1/L2, so the DRAM bytes "
                   "stay those of one read. This sentence first said the second read was not served from L2 "
                   "for free, reading the requested-byte ratio as DRAM traffic"),
    Claim("row_shapes",
          "A row of 8192 in registers, split three ways: {table}. The fastest is {fastest}, at "
          "{fastest_occ:.0%} occupancy, {highest} (the highest: {most_occ:.0%}).",
          values=_shapes_values,
          checks=(says("highest", "fastest_occ", ">=", "most_occ", "the highest of them", "below the highest"),)),
    Claim("staged_rows_in_flight",
          "In registers, every split holds at most {rows_per_sm} rows per SM. Staged in shared memory: "
          "{staged_table}. The fastest, {staged}, holds {staged_rows} rows per SM and moves {staged_pct:.0f}% "
          "of copy, against {best_pct:.0f}% for the best split in registers ({staged_gap:.1f} points apart): "
          "{verdict}.",
          values=_staged_values,
          checks=(states("staged_rows", ">", "rows_per_sm"),
                  says("verdict", "staged_gap", "<", 5, "more rows in flight did not make the row faster "
                       "(within 5 points)", "more rows in flight changed the row's speed by 5 points or more")),
          explains="staging was written on the prediction that a memory-bound row kernel is fed by the "
                   "loads in flight (shared memory holds more rows per SM than registers: the table above); "
                   "the 2026-12-01 recording measured about the same speed with more rows per SM, so rows "
                   "in flight are not what "
                   "limits it; the instructions each value costs are (the instructions_pace_the_row claim)."),
    Claim("softmax_target",
          "The fastest fused softmax, {variant}, takes {ms:.3f} ms at {cols} x {cols}: {gbps:.0f} GB/s, "
          "{pct:.0f}% of the copy ceiling of the same run (target: at least {target:.0f}%, {met}), {vs_torch:.2f}x "
          "torch.softmax's speed ({torch_ms:.3f} ms, timed beside it; {faster}).",
          headline="softmax {cols}^2, the fastest fused kernel ({variant}): {pct:.0f}% of copy (target {target:.0f}%: {met}), {vs_torch:.2f}x torch.softmax",
          values=_target_values,
          checks=(target("met", "pct", ">=", "target"),
                  says("faster", "vs_torch", ">=", 1, "it beats torch", "torch beats it"))),
    Claim("instructions_pace_the_row",
          "Under Nsight Compute at {cols} x {cols} (recorded), the fused kernel issued {fused_inst:.0f} M warp "
          "instructions, its SM {fused_sm:.0f}% busy and its DRAM {fused_dram:.0f}%; the staged {staged}, "
          "{staged_inst:.0f} M, SM {staged_sm:.0f}%, DRAM {staged_dram:.0f}%; the vectorised {vector}, "
          "{vector_inst:.0f} M ({vector_share:.0%} of the fewer of the other two: under half), SM {vector_sm:.0f}%, "
          "DRAM {vector_dram:.0f}% ({dram_gain:+.0f} points over the fused kernel's: more than 20). Fewer instructions per byte, "
          "not more rows in flight, is what moved the row closer to the copy ceiling.",
          values=_instruction_values,
          checks=(Compare("vector_share", "<", 0.5), Compare("dram_gain", ">", 20),
                  states("fused_sm", ">", "fused_dram")),
          explains="SM throughput is the busiest of the SM's units (issue, FMA pipes, load/store): a busy SM "
                   "at a low FLOP rate, as here, is issue- or load/store-bound, not compute-bound"),
    Claim("vector_rows",
          "In 16-byte vectors: {vector_table}. The fastest, {vector}, moves {vector_pct:.0f}% of copy, "
          "{vector_over_fused:.2f}x the speed of the graded fused kernel ({fused_pct:.0f}%).",
          values=_vector_values, checks=(states("vector_pct", ">", "fused_pct"),)),
    Claim("capped_is_another_kernel",
          "The 1024 x 8 kernel capped at 32 registers uses the uncapped kernel's {registers} registers, yet in "
          "each of {repeats} repeats it took {slower_lo:.1%}-{slower_hi:.1%} longer ({capped:.0f}% of copy "
          "against {uncapped:.0f}%), where one measurement's spread (p10 to p90) is at most {spread:.1%}: "
          "{same}. Under Nsight Compute it issued {capped_inst:.0f} M warp instructions against {uncapped_inst:.0f} M "
          "({more}).",
          values=_capped_values,
          checks=(says("same", "slower_lo", ">", "spread", "a different kernel, by many times the spread",
                       "the same kernel, within one measurement's spread"),
                  says("more", "capped_inst", ">", "uncapped_inst", "more", "fewer"))),
]


def _shape(records, name):
    for r in need(records, "shape_registers", "rows"):
        if r["shape"] == name:
            return r
    raise Missing(f"shape_registers has no {name} row")


STAGED_KERNEL = "softmax_staged_kernel"   # solution side: the starter lacks these two
VECTOR_KERNEL = "softmax_vector_kernel"
SOLUTION_SIDE_KERNELS = {STAGED_KERNEL, VECTOR_KERNEL}
_ROW_BLOCK = "one block per row, row_block(cols) threads (1024 at 8192 columns)"
KERNELS = (
    *(protocol.Kernel(name, _ROW_BLOCK) for name in (
        "row_max_kernel", "row_exp_sum_kernel", "softmax_normalize_kernel", "softmax_online_kernel",
        "softmax_fused_kernel", "row_mean_kernel", "row_rstd_kernel", "layernorm_normalize_kernel",
        "layernorm_online_kernel", "layernorm_fused_kernel")),
    protocol.Kernel("softmax_fused_16_kernel", "one block of 512 threads per row, 16 values each in registers",
                    block_size=512),
    protocol.Kernel("softmax_fused_32_kernel", "one block of 256 threads per row, 32 values each in registers",
                    block_size=256),
    protocol.Kernel(STAGED_KERNEL, "one block of 256 threads per row, the row staged in shared memory, "
                    "bursts of 8 loads", block_size=256),
    protocol.Kernel(VECTOR_KERNEL, "one block of 512 threads per row, 4 float32x4 each in registers "
                    "(x and out as 1-D views)", block_size=512),
)

LAB = protocol.Lab(
    number="05", title="reduction fusion (softmax, layernorm)",
    kernels=KERNELS,
    references=("softmax_reference", "layernorm_reference"),
    validate=validate,
    benchmarks=benchmarks,
    measurements=(
        protocol.Measurement("registers", measure_registers,
                             "registers, shared memory and occupancy of every kernel at 8192 columns"),
        protocol.Measurement("shape_registers", measure_shape_registers,
                             "each way of holding a row of 8192: registers, rows per SM, and its speed",
                             needs=("softmax_shapes",)),
    ),
    figures=FIGURES,
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
