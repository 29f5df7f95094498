"""Lab 06's claims: the discussion's sentences, each checked against the records (this lab's,
and Labs 00, 04 and 05's)."""

from __future__ import annotations

from kernellab import occupancy as occ
from kernellab.course.claims import Claim, Missing, course_solution, need, says, states, target

from experiments.lab06_constants import NUMBER, SHARED_SWEEP_CAP, TARGET_PCT_OF_FP32_PEAK


GEMM_KERNELS = {"naive": "matmul_naive_kernel", "tiled": "matmul_tiled_kernel",
                "register_tiled_2d": "matmul_register_tiled_2d_kernel",
                "register_tiled": "matmul_register_tiled_kernel",
                "double_buffered": "matmul_double_buffered_kernel",
                "double_buffered_capped": "matmul_double_buffered_capped_kernel"}


def _grid_values(records):
    """Lab 00's grid-stride kernel, its grid sized as a persistent grid: SMs x blocks per SM."""
    from experiments.lab00_indexing import BLOCK, grid_stride_pct
    kernels = {k["kernel"]: k for k in need(records, "resources_vs_driver", "kernels")}
    if "lab00.axpb_grid_stride_kernel" not in kernels:
        raise Missing("resources_vs_driver has no lab00.axpb_grid_stride_kernel")
    found = kernels["lab00.axpb_grid_stride_kernel"]["driver"]
    sweep = need(records, "lab00", "grid_size_sweep")
    calc = occ.occupancy(tuple(found["cc"]), BLOCK, found["registers_per_thread"], found["static_shared_bytes"])
    pct = grid_stride_pct(records["lab00"])
    if calc.active_blocks not in pct:
        raise Missing(f"grid_size_sweep has no grid of {calc.active_blocks}x SMs")
    return {"regs": found["registers_per_thread"], "block": BLOCK, "bps": calc.active_blocks,
            "grid": calc.active_blocks * sweep["provenance"]["sm_count"], "pct": pct[calc.active_blocks],
            "p2": pct[2], "p4": pct[4]}


def _fastest(rows, speed):
    return max(rows, key=lambda r: r[speed])


def _registers_values(records):
    """One table across Labs 04-06: each lab's kernels, their registers and their speed."""
    lab04 = need(records, "lab04")
    matmul = need(lab04, "matmul")
    n = max(matmul["sizes"])
    regs04 = {r["kernel"]: r for r in need(lab04, "registers", "rows")}
    gemm = [{"name": name, "registers": regs04[kernel]["registers"], "occupancy": regs04[kernel]["occupancy"],
             "speed": next(r["gflops"] / 1e3 for r in matmul["rows"] if r["variant"] == name and r["size"] == n
                           and "gflops" in r)}
            for name, kernel in GEMM_KERNELS.items() if kernel in regs04]
    rows05 = need(records, "lab05", "shape_registers", "rows")
    shapes = [{"name": r["shape"], "registers": r["registers"], "occupancy": r["occupancy"],
               "speed": r["pct_of_copy"]} for r in rows05]
    caps = [{"name": f"cap {r['max_registers']}, tile_k {r['tile_k']}", "registers": r["registers"],
             "occupancy": r["occupancy"], "speed": r["tflops"]}
            for r in need(records, "linear_relu_register_caps", "rows")]
    lines = []
    for title, unit, rows in (("Lab 04 GEMM", "TFLOP/s", gemm), ("Lab 05 softmax 8192", "% of copy", shapes),
                              ("Lab 06 linear_relu", "TFLOP/s", caps)):
        best = _fastest(rows, "speed")
        lines.append(f"  {title:<20} " + ", ".join(
            f"{r['name']} {r['registers']}r {r['speed']:.1f}" for r in rows) + f" ({unit}); fastest: "
            f"{best['name']} at {best['registers']} registers")
    best04, best05, best06 = (_fastest(rows, "speed") for rows in (gemm, shapes, caps))
    capped = need(records, "linear_relu_register_caps", "rows")
    within = [r for r in capped if r["registers"] <= 64]
    above = [r for r in capped if r["registers"] > 64]
    if not (within and above):
        raise Missing("linear_relu_register_caps has no rows on both sides of 64 registers")
    within, above = _fastest(within, "tflops"), _fastest(above, "tflops")
    return {"table": "\n".join(lines), "r04": best04["registers"], "r05": best05["registers"],
            "r06": best06["registers"], "size": need(records, "linear_relu_register_caps", "size"),
            "within": within["tflops"], "cap_within": within["max_registers"],
            "spills_within": within["spill_stores"], "above": above["tflops"],
            "cap_above": above["max_registers"] or "none", "gain": above["tflops"] / within["tflops"] - 1,
            "spread": max((r["p90_ms"] - r["p10_ms"]) / r["median_ms"] for r in (within, above))}


def _shared_values(records):
    sweep = need(records, "linear_relu_shared_sweep", "rows")
    best = _fastest(sweep, "tflops")
    within = [r for r in sweep if r["shared_bytes"] <= 32 * 1024]
    above = [r for r in sweep if r["shared_bytes"] > 32 * 1024]
    if not (within and above):
        raise Missing("linear_relu_shared_sweep has no tiles on both sides of 32 KB")
    table = ", ".join(f"{r['shared_bytes'] / 1024:.0f} KB: {r['occupancy']:.0%} {r['tflops']:.2f}" for r in sweep)
    return {"table": table, "cap": SHARED_SWEEP_CAP, "best_kb": best["shared_bytes"] / 1024,
            "best_occ": best["occupancy"], "best": best["tflops"],
            "best_within": _fastest(within, "tflops")["tflops"], "best_above": _fastest(above, "tflops")["tflops"],
            "agree": sum(r["driver_blocks"] == r["calculator_blocks"] for r in sweep), "rows": len(sweep)}


def _probe_values(records):
    record = need(records, "occupancy_vs_speed")
    loop = need(records, "occupancy_vs_speed", "fma_loop", "compute_bound")   # the probes' PTX loop
    peak = record["fp32_peak_gflops"]
    best = {name: max(r["gflops"] for r in record["rows"] if r["probe"] == name)
            for name in ("compute_bound", "compute_bound_ilp4")}
    return {"fma": loop["fma"], "other": loop["other"],
            "ceiling": need(records, "occupancy_vs_speed", "fma_ceiling_tflops"),
            "one": best["compute_bound"] / 1e3, "four": best["compute_bound_ilp4"] / 1e3, "peak": peak / 1e3,
            "pct": 100 * best["compute_bound"] / peak, "pct4": 100 * best["compute_bound_ilp4"] / peak,
            "best_pct": 100 * max(best.values()) / peak, "target": TARGET_PCT_OF_FP32_PEAK}


def _warps_for_90pct(record, probe, field):
    rows = [r for r in record["rows"] if r["probe"] == probe]
    best = max(r[field] for r in rows)
    return min(r["warps_per_sm"] for r in rows if r[field] >= 0.9 * best)


def memory_probe_warps(records):
    """The warps per SM the memory-bound probe needs for 90% of its best speed, with one and with
    four independent loads in flight per thread (Lab 09 reads it too)."""
    record = need(records, "occupancy_vs_speed")
    return {"one": _warps_for_90pct(record, "memory_bound", "gbps"),
            "four": _warps_for_90pct(record, "memory_bound_ilp4", "gbps")}


def _caps_values(records):
    rows = need(records, "linear_relu_register_caps", "rows")
    best = _fastest(rows, "tflops")
    lab = course_solution(NUMBER)
    tuned = next((r for r in rows if (r["max_registers"], r["tile_k"]) ==
                  (lab.TUNED.max_registers, lab.TUNED.tile_k)), None)
    if tuned is None:
        raise Missing("linear_relu_register_caps has no row for TUNED")
    as_written = next(r for r in rows if r["max_registers"] is None and r["tile_k"] == lab.AS_WRITTEN.tile_k)
    return {"size": need(records, "linear_relu_register_caps", "size"), "cap": best["max_registers"],
            "k": best["tile_k"], "best": best["tflops"], "occ": best["occupancy"], "spills": best["spill_stores"],
            "t_tuned": tuned["tflops"], "occ_tuned": tuned["occupancy"],
            "t_written": as_written["tflops"], "occ_written": as_written["occupancy"], "regs_written": as_written["registers"]}


def _calculator_values(records):
    sweep = need(records, "calculator_vs_driver")
    return {"agree": sweep["agree"], "configurations": sweep["configurations"], "kernels": len(sweep["kernels"]),
            "seconds": sweep["seconds"], "complete": int(sweep["complete"])}


def _ptxas_values(records):
    found = need(records, "resources_vs_driver")
    return {"agree": found["agree"], "kernels": len(found["kernels"]), "undeclared": len(found["undeclared"])}


CLAIMS = [
    Claim("grid_as_persistent",
          "Sized as Triton sizes a persistent grid (the SM count x the blocks per SM the occupancy calculator "
          "allows), Lab 00's grid-stride kernel ({regs} registers, {block} threads: {bps} blocks per SM) gets "
          "{grid:,} blocks = {bps}x the SM count ({beyond} the article's 2-4x), and runs at {pct:.0f}% of copy, "
          "{vs} the {p2:.0f}% and {p4:.0f}% that the article's 2x and 4x give.",
          values=_grid_values,
          checks=(says("beyond", "bps", ">", 4, "beyond", "inside"), says("vs", "pct", ">", "p4", "above", "not above")),
          article="grid"),
    Claim("registers_table",
          "Registers against speed, one table across Labs 04-06:\n{table}\nThe fastest GEMM needs {r04} "
          "registers, the fastest softmax shape {r05}, the fastest linear_relu cap {r06}: {r04_words}.",
          values=_registers_values,
          checks=(says("r04_words", "r04", ">", 64, "the fastest GEMM is past the article's 64",
                       "the fastest GEMM is within the article's 64"),),
          explains="the GEMMs of Lab 04 at 64 registers or fewer are other algorithms (one output per "
                   "thread, no register tile), so the table says nothing about a cap by itself: the "
                   "registers verdict is the controlled comparison below, one kernel under register caps. "
                   "A controlled GEMM (the 8 x 8 register tile capped at 64) is not recorded"),
    Claim("registers_verdict",
          "linear_relu at {size}^3, one source compiled under register caps: at most 64 registers its best "
          "is {within:.2f} TFLOP/s (cap {cap_within}, {spills_within} B of spills), above 64 {above:.2f} "
          "(cap {cap_above}), {gain:+.1%} against one measurement's spread (p10 to p90) of at most {spread:.1%}: "
          "{verdict}.",
          values=_registers_values,
          checks=(says("verdict", "gain", ">", "spread", "more registers than 64 ran faster, by more than the spread",
                       "more than 64 registers ran no faster beyond the spread"),),
          article="registers",
          explains="under a cap ptxas spills what does not fit to local memory (the spills column); the "
                   "same algorithm on both sides of 64 is what makes this a verdict on the cap"),
    Claim("shared_sweep",
          "Shared memory per block against speed (linear_relu, 128 threads, capped at {cap} registers, the "
          "same kernel at each tile depth; occupancy, TFLOP/s): {table}. The calculator's blocks per SM "
          "equal the driver's for {agree} of {rows} tiles.",
          values=_shared_values, checks=(states("agree", ">=", "rows"),)),
    Claim("shared_verdict",
          "linear_relu, one kernel at tile depths on both sides of 32 KB of shared memory per block: the "
          "fastest tile uses {best_kb:.0f} KB ({best_occ:.0%} occupancy, {best:.2f} TFLOP/s); the best "
          "within 32 KB reaches {best_within:.2f}, the best above {best_above:.2f}: {verdict}.",
          values=_shared_values,
          checks=(says("verdict", "best_within", ">=", "best_above", "staying within 32 KB lost nothing here",
                       "a tile above 32 KB ran faster"),),
          article="shared"),
    Claim("compute_probe_peak",
          "The compute-bound probe (dependent FMAs, a compile-time trip count: its PTX loop holds {fma} "
          "fma.rn.f32 beside {other} other instructions) peaks at {one:.1f} TFLOP/s, "
          "{pct:.0f}% of the FP32 peak ({peak:.1f}: SMs x lanes x 2 x clock); with four chains per thread "
          "{four:.1f} ({pct4:.0f}%; target: the better of the two at least {target:.0f}%, it reaches "
          "{best_pct:.0f}%: {met}). The FMA ceiling "
          "kernellab measured in the same run: {ceiling:.1f}.",
          values=_probe_values, checks=(target("met", "best_pct", ">=", "target"),)),
    Claim("memory_needs_bytes_in_flight",
          "The memory-bound probe needs {one} warps per SM for 90% of its best speed with one element in "
          "flight per thread, and {four} with four: {verdict}.",
          values=memory_probe_warps,
          checks=(says("verdict", "four", "<", "one", "independent loads in a thread replace resident warps "
                       "(bytes in flight = warps x loads per thread x width)",
                       "four loads per thread did not lower the warps it needs"),)),
    Claim("caps_against_occupancy",
          "linear_relu at {size}^3: as written ({regs_written} registers, {occ_written:.0%} occupancy) "
          "{t_written:.2f} TFLOP/s; fastest at cap {cap}, tile_k {k} ({occ:.0%}, {spills} B of spills) "
          "{best:.2f}; TUNED, at its {occ_tuned:.0%} target, {t_tuned:.2f}. The fastest ran at {lower} "
          "occupancy than TUNED.",
          values=_caps_values, checks=(says("lower", "occ", "<", "occ_tuned", "a lower", "no lower"),)),
    Claim("calculator_equals_driver",
          "The calculator equals the driver on {agree:,} of the {configurations:,} configurations compared "
          "({kernels} kernels, {seconds:.0f} s); the sweep {coverage} (complete = {complete}).",
          headline="calculator = driver on {agree:,} of {configurations:,} configurations compared ({kernels} "
                   "kernels; the sweep {coverage})",
          values=_calculator_values,
          checks=(states("agree", ">=", "configurations"),
                  says("coverage", "complete", ">=", 1, "covered every kernel it was given",
                       "stopped at its time budget: the kernels after these were not compared"))),
    Claim("ptxas_equals_driver",
          "ptxas's registers, static shared memory and stack frame (what kernellab.kernels.resources computes "
          "without a GPU) equal the driver's for {agree} of {kernels} kernels, and so do the active blocks "
          "they imply; {undeclared} lab kernels declare no signature to compile.",
          values=_ptxas_values, checks=(states("agree", ">=", "kernels"),)),
]
