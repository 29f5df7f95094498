"""Lab 09 experiments: where the time goes.

1. Coalescing. Each access pattern of the lab (strided, coalesced, naive and tiled transpose) is
   run with the simulator's sector model (`sector_meter`): for every warp-wide request, the
   32-byte sectors its 32 lanes touch. On a GPU the same figure is Nsight Compute's
   l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / ..._requests_..., in the profile rows that
   `kernellab profile 09` records; where none are recorded, this module says so.
2. The roofline of every lab's main kernels (`MAIN_KERNELS`, declared as data in lab09_points) on one H200
   plot: intensity from DRAM bytes (profile rows), attained FLOP/s from the timings of the
   records (benchmark rows, or a timeline's kernel alone), the roof from the ceilings of the same
   record. Where no profile rows are recorded the point uses the requested bytes (the ledger) and
   the label says so: never a DRAM figure that was not measured. A second panel shows the small
   sizes, where the host's launch path, not the roof, sets a kernel's time.
3. The verdict on the seed article's closing advice (compute-bound work gains from aggressive
   fusion, memory-bound work needs finer occupancy control), as claims (`CLAIMS`) read from the same
   points.

Lab 09's own scale_rows points join the plot from its `scale_rows` record: live on a GPU (the
tour and bench time it, marked "live"), recorded in the simulator (marked "recorded"); the other
labs' points come from their recorded data (a claim reads them live where this process measured
them), and the figure says so. Profile rows are read through `kernellab.course.reference` (`profile_rows`,
`variant_dram_bytes`), the ceilings from each record's "ceilings" (`timing.ceilings` of its run).

This module is the declaration, with the benchmarks, the validation, the targets and the key
figure; the sector model and the access patterns it counts live in lab09_measure, the roofline's
points and reading a profile in lab09_points, the figure in lab09_figures, the claims in
lab09_claims, and the constants all of them share in lab09_constants (re-exported here, with what
tests and notebook 09 read on the experiment).
"""

from __future__ import annotations

from kernellab.course import bench as harness
from kernellab.course import claims, protocol
from kernellab.gpu import checks, device
from kernellab.gpu.traffic import Ledger

from experiments.lab09_claims import CLAIMS, _largest_rows
from experiments.lab09_constants import (
    GPU_SHAPE, GPU_SIZES, NUMBER, SCALE_ROWS_VARIANTS, SIM_SHAPE, SIM_SIZES, TRANSPOSE_VARIANTS, TUNED_TARGET_PCT)
from experiments.lab09_figures import draw_roofline
from experiments.lab09_measure import _patterns, pattern_table
from experiments.lab09_points import dram_count, roofline_points

# Read on the experiment (`protocol.experiment("09")`) by tests/instruments and notebook 09.
from experiments.lab09_figures import point_ids
from experiments.lab09_measure import access_patterns, sector_meter
from experiments.lab09_points import (
    DRAM_BYTES, ELEMENTWISE, MAIN_KERNELS, OFF_THE_ROOF, REQUESTED_BYTES, awaiting, bytes_line, ceilings_of,
    diagnose, missing_profiles, own_rows, points_table, recorded)


# --- the lab's access patterns as benchmarks ------------------------------------------------------

def _shape(rows: int) -> tuple[int, int]:
    return (rows, SIM_SHAPE[1] if device.is_simulator() else GPU_SHAPE[1])


def scale_rows_ledger(rows: int) -> Ledger:
    """Per element: 1 read of x, 1 of scale, 1 write of out (the same for every pattern); scale's
    reads touch one element per row, re-read from cache (so the ceiling is the copy's mix)."""
    n = rows * _shape(rows)[1]
    return Ledger("scale_rows").add("scale_rows", "x", reads=n) \
        .add("scale_rows", "scale", reads=n, distinct=rows).add("scale_rows", "out", writes=n)


def scale_rows_wide_ledger(lab):
    """The tuned scale_rows: x and out as the others, scale read once per thread (its threads per
    row: whole blocks of WIDE * WIDE_BLOCK columns), still one element per row."""
    def ledger(rows: int) -> Ledger:
        cols = _shape(rows)[1]
        per_block = lab.WIDE * lab.WIDE_BLOCK
        threads = rows * -(-cols // per_block) * lab.WIDE_BLOCK
        return Ledger("scale_rows").add("scale_rows", "x", reads=rows * cols) \
            .add("scale_rows", "scale", reads=threads, distinct=rows).add("scale_rows", "out", writes=rows * cols)
    return ledger


def transpose_ledger(rows: int) -> Ledger:
    n = rows * _shape(rows)[1]
    return Ledger("transpose").add("transpose", "x", reads=n).add("transpose", "out", writes=n)


def access_pattern_benchmarks(lab, torch=None) -> list[harness.Benchmark]:
    """The lab's two pairs: strided against coalesced scaling, naive against tiled transpose,
    each checked against the lab's float64 reference (no torch baseline: the lesson is the
    access pattern, not a library)."""
    sizes = dict(sizes=GPU_SIZES, sim_sizes=SIM_SIZES)

    def matrix(rng, rows):
        return {"x": checks.nonzero(rng, _shape(rows))}

    def scaled(rng, rows):
        return {**matrix(rng, rows), "scale": checks.nonzero(rng, rows)}

    def variant(name, call, ledger):
        run, why = lab.VARIANTS[name]
        return harness.Variant(name, lambda d, out, run=run: call(run, d, out), why, ledger=ledger)

    scale = harness.Benchmark(
        name="scale_rows", axis="rows", **sizes, make_inputs=scaled,
        reference=lambda h: lab.scale_rows_reference(h["x"], h["scale"]),
        variants=[variant(name, lambda run, d, out: run(d["x"], d["scale"], out=out),
                          scale_rows_wide_ledger(lab) if name == "scale_rows_wide" else scale_rows_ledger)
                  for name in SCALE_ROWS_VARIANTS],
        flops=lambda rows: float(rows * _shape(rows)[1]))        # one multiply per element
    transpose = harness.Benchmark(
        name="transpose", axis="rows", **sizes, make_inputs=matrix,
        reference=lambda h: lab.transpose_reference(h["x"]),
        variants=[variant(name, lambda run, d, out: run(d["x"], out=out), transpose_ledger)
                  for name in TRANSPOSE_VARIANTS])
    return [scale, transpose]


# --- the declaration ------------------------------------------------------------------------------

def validate(lab, seed: int = 0) -> list[str]:
    """Every access pattern against its float64 reference; in the simulator its sectors per
    request too, printed (the benchmarks validate themselves, `protocol.validate`)."""
    patterns = _patterns(lab, seed)
    if device.is_simulator():
        print(pattern_table(patterns))
    return [f"{p['pattern']} (float64 reference)" for p in patterns]


def targets(lab, records: dict) -> dict:
    """The tuned kernels against their mix's ceiling at the largest size, this run."""
    found = {}
    for benchmark, name in (("scale_rows", "scale_rows_wide"), ("transpose", "transpose_wide")):
        row = _largest_rows(records[benchmark])[name]
        found[f"{name}_pct_of_ceiling"] = {
            "value": row["pct_of_ceiling"], "target": TUNED_TARGET_PCT,
            "met": row["pct_of_ceiling"] >= TUNED_TARGET_PCT,
            "method": f"compulsory bytes / median time over the ceiling of the row's read/write mix, "
                      f"measured in the same run ({row['ceiling_mix']}), at {row['size']} rows"}
    return found


def key_figure(lab, records: dict) -> str:
    points = roofline_points(lab, own=records)
    best_memory = max((p for p in points if p["bound"] == "memory"), key=lambda p: p["pct_of_roof"])
    patterns = {p["pattern"]: p for p in _patterns(lab, 0)} if device.is_simulator() else {}
    coalescing = (f"sectors/load strided {patterns['scale_rows_strided']['x_sectors_per_load']:.0f} vs "
                  f"coalesced {patterns['scale_rows']['x_sectors_per_load']:.1f}; " if patterns else "")
    return (f"{coalescing}{len(points)} kernels on the roofline, best memory-bound "
            f"{best_memory['name']} {best_memory['pct_of_roof']:.0f}% of roof; {dram_count(points)}")



# Notebook 09's last cell (claims.take_away): each line filled from its claims' values and words.
TAKE_AWAY = (
    "Coalesced, scale_rows reaches {tuned_at_the_ceiling[scale_rows]:.0f}% of the copy ceiling; strided, "
    "{tuned_at_the_ceiling[scale_rows_strided]:.0f}%.",
    "The coalesced kernel's SM is {coalesced_issues_instructions[sm]:.0f}% busy against DRAM's "
    "{coalesced_issues_instructions[dram]:.0f}%: {coalesced_issues_instructions[sm_verdict]}; with "
    "{coalesced_issues_instructions[tuned]:.2f}x its instructions and several loads in flight per thread, the tuned "
    "kernel reaches {tuned_at_the_ceiling[scale_rows_wide]:.0f}%.",
    "Under the memory roof, fusion gained up to {fusion_on_compute_bound[memory]:.2f}x; under the compute roof, "
    "GEMM epilogues gained at most {fusion_on_compute_bound[compute]:.2f}x: {fusion_on_compute_bound[compute_verdict]}.",
)


def take_away() -> str:
    """Notebook 09's last cell: TAKE_AWAY, from the records its claims read (live where this process
    measured them, the H200 reference otherwise)."""
    return claims.take_away(NUMBER, TAKE_AWAY)


LAB = protocol.Lab(
    number=NUMBER, title="where the time goes: coalescing, the roofline, reading a profile",
    kernels=(
        protocol.Kernel("scale_rows_strided_kernel", "1-D: blocks of 128, one element per thread, "
                        "neighbouring threads on neighbouring rows", block_size=128),
        protocol.Kernel("scale_rows_kernel", "1-D: blocks of 128, one element per thread, "
                        "neighbouring threads on neighbouring columns", block_size=128),
        protocol.Kernel("copy4_consecutive_kernel", "1-D: blocks of 128, 4 consecutive elements per "
                        "thread", block_size=128),
        protocol.Kernel("transpose_naive_kernel", "2-D: blocks of (32, 8), one element per thread",
                        block_size=256),
        protocol.Kernel("transpose_kernel", "2-D: one (32, 8) block per 32 x 32 tile of x, 4 rows of "
                        "the tile per thread", block_size=256),
        protocol.Kernel("scale_rows_wide_kernel", "2-D grid (column segments, rows), blocks of 256, 4 "
                        "columns per thread a block apart", block_size=256),
        protocol.Kernel("transpose_wide_kernel", "2-D: one (64, 4) block per 64 x 64 tile of x, 16 "
                        "elements per thread", block_size=256),
    ),
    references=("scale_rows_reference", "copy_reference", "transpose_reference"),
    validate=validate,
    benchmarks=access_pattern_benchmarks,
    figures=(protocol.Figure("lab09_roofline", draw_roofline),),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
