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

This module is the declaration, with the benchmarks, the validation, the targets and the key
figure; the register measurements (and the shapes' names, which the benchmarks share) live in
lab05_measure, the figures in lab05_figures, the claims and the fastest fused form the targets
judge in lab05_claims, and the constants all of them share in lab05_constants (re-exported here;
tests and notebook 05 read `LAB` and `cached_rereads` on the experiment).
"""

from __future__ import annotations

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol
from kernellab.gpu import checks, device
from kernellab.gpu.launches import record_launches

from experiments.lab05_claims import CLAIMS, targets_of
from experiments.lab05_constants import (
    HEADLINE_COLS, KERNELS, ROWS, SHAPES, SOLUTION_SIDE_KERNELS, STAGED_SHAPES, TARGET_PCT_OF_COPY, VECTOR_BLOCKS,
    cached_rereads)
from experiments.lab05_figures import FIGURES
from experiments.lab05_measure import measure_registers, measure_shape_registers, shape_name, staged_name, vector_name

SIZES = [256, 512, 1024, 2048, 4096, 8192, 16384]
TOUR_SIZES = [HEADLINE_COLS]
SIM_ROWS = 3
SIM_SIZES = [77]                          # columns: awkward, and more than one value per thread
SIM_BLOCK = 32                            # the simulator runs each thread in Python: small blocks
EPS = 1e-5
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


def key_figure(lab, records) -> str:
    goals = targets_of(records)
    versus = f", torch.softmax / tuned = {goals['torch_over_fused']:.2f}" if "torch_ms" in goals else ""
    return (f"tuned softmax, solution-side ({goals['fused_variant']}): {goals['fused_pct_of_copy']:.0f}% of copy "
            f"bandwidth at {ROWS} x {goals['cols']}{versus}")


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
