"""Lab 06's claims: the discussion's sentences, each checked against the records (this lab's,
and Labs 00, 04 and 05's)."""

from __future__ import annotations

import statistics

from kernellab import occupancy as occ
from kernellab.course import reference
from kernellab.course.claims import Claim, Missing, course_solution, need, repeats_of, says, states

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
    pct = grid_stride_pct(records["lab00"])       # {blocks per SM: % of copy in each repeat}
    if calc.active_blocks not in pct:
        raise Missing(f"grid_size_sweep has no grid of {calc.active_blocks}x SMs")
    mine = pct[calc.active_blocks]
    lo, hi = f"{min(mine):.0f}", f"{max(mine):.0f}"
    p2, p4 = statistics.median(pct[2]), statistics.median(pct[4])
    return {"regs": found["registers_per_thread"], "block": BLOCK, "bps": calc.active_blocks,
            "grid": calc.active_blocks * sweep["provenance"]["sm_count"], "pct": statistics.median(mine),
            "repeat_range": "in every repeat" if lo == hi else f"{lo}-{hi}% over the repeats",
            "repeats": len(mine), "p2": p2, "p4": p4, "p_best": max(p2, p4)}


def _fastest(rows, speed):
    return max(rows, key=lambda r: r[speed])


def _gemm_registers(lab04: dict, n: int) -> dict[str, tuple[int, str]]:
    """(registers per thread, who read them) of each Lab 04 GEMM at size n: the driver's record where
    the registers measurement compiled its kernel, else the recorded Nsight Compute row of its run."""
    driver = {r["kernel"]: r["registers"] for r in need(lab04, "registers", "rows")}
    found = {r["variant"]: (r["registers_per_thread"], "Nsight Compute") for r in reference.profile_rows("04")
             if r["benchmark"] == "matmul" and r["size"] == n and r.get("registers_per_thread")}
    found.update({name: (driver[kernel], "the driver") for name, kernel in GEMM_KERNELS.items() if kernel in driver})
    return found


def _registers_values(records):
    """One table across Labs 04-06: each lab's kernels, their registers and their speed."""
    lab04 = need(records, "lab04")
    matmul = need(lab04, "matmul")
    n = max(matmul["sizes"])
    speeds = {r["variant"]: r["gflops"] / 1e3 for r in matmul["rows"] if r["size"] == n and "gflops" in r
              and not matmul["variants"][r["variant"]]["baseline"]}          # Lab 04's own (Numba) GEMMs
    regs04 = _gemm_registers(lab04, n)
    top = max(speeds, key=speeds.get)
    if top not in regs04:
        raise Missing(f"no register record of {top}, the fastest Lab 04 GEMM")
    gemm = [{"name": name, "registers": regs04[name][0], "speed": speed} for name, speed in speeds.items()
            if name in regs04]
    rows05 = need(records, "lab05", "shape_registers", "rows")
    shapes = [{"name": r["shape"], "registers": r["registers"], "speed": r["pct_of_copy"]} for r in rows05]
    caps = [{"name": f"cap {r['max_registers']}, tile_k {r['tile_k']}", "registers": r["registers"],
             "speed": r["tflops"]}
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
            "name04": best04["name"], "speed04": best04["speed"], "read_by": regs04[best04["name"]][1],
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
        raise Missing("linear_relu_shared_sweep has no tiles on both sides of 32 KiB")
    table = ", ".join(f"{r['shared_bytes'] / 1024:.0f} KiB: {r['occupancy']:.0%} {r['tflops']:.2f}" for r in sweep)
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
    four independent loads in flight per thread: the median over the recorded repeats, and their
    range (Lab 09 reads it too)."""
    repeats = repeats_of(records, "occupancy_vs_speed", NUMBER)
    values = {"repeats": len(repeats)}
    for key, probe in (("one", "memory_bound"), ("four", "memory_bound_ilp4")):
        warps = [_warps_for_90pct(record, probe, "gbps") for record in repeats]
        values.update({key: statistics.median_low(warps), f"{key}_lo": min(warps), f"{key}_hi": max(warps)})
    values["ranges"] = ("the same in every repeat" if values["one_lo"] == values["one_hi"] and
                        values["four_lo"] == values["four_hi"] else
                        f"ranges {values['one_lo']}-{values['one_hi']} and {values['four_lo']}-{values['four_hi']}")
    # the margin under the one-element answer: the sweep's step below it, % of the best in each repeat
    one = [[r for r in record["rows"] if r["probe"] == "memory_bound"] for record in repeats]
    steps = sorted({r["warps_per_sm"] for rows in one for r in rows})
    below = max((w for w in steps if w < values["one"]), default=None)
    if below is None:
        raise Missing("occupancy_vs_speed has no step below the warps the memory probe needs")
    shares = [100 * next(r["gbps"] for r in rows if r["warps_per_sm"] == below) / max(r["gbps"] for r in rows)
              for rows in one]
    return {**values, "below": below, "below_lo": min(shares), "below_hi": max(shares), "top": steps[-1]}


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
    # the kernels it was given: recorded since 2026-12-07; before, the same list resources_vs_driver
    # compared in the same run (audit_calculator and audit_resources are given one list)
    given = sweep.get("given") or len(need(records, "resources_vs_driver", "kernels"))
    return {"agree": sweep["agree"], "configurations": sweep["configurations"], "kernels": len(sweep["kernels"]),
            "given": given, "seconds": sweep["seconds"]}


def _ptxas_values(records):
    found = need(records, "resources_vs_driver")
    return {"agree": found["agree"], "kernels": len(found["kernels"]), "undeclared": len(found["undeclared"])}


CLAIMS = [
    Claim("grid_as_persistent",
          "A persistent grid of {grid:,} blocks ({bps}x the SM count, {beyond} the article's 2-4x) runs Lab "
          "00's grid-stride kernel at {pct:.0f}% of copy ({repeat_range}), {vs} the article's best, "
          "{p_best:.0f}% (2x: {p2:.0f}%, 4x: {p4:.0f}%; medians of {repeats} repeats). It is sized as Triton "
          "sizes one: the SM count x the blocks per SM the occupancy calculator allows ({regs} registers, "
          "{block} threads: {bps} blocks per SM).",
          values=_grid_values,
          checks=(says("beyond", "bps", ">", 4, "beyond", "inside"),
                  says("vs", "pct", ">", "p_best", "above", "not above")),
          article="grid"),
    Claim("registers_table",
          "The fastest Lab 04 GEMM ({name04}, {speed04:.1f} TFLOP/s) uses {r04} registers ({read_by}'s count), "
          "the fastest softmax shape {r05} and the fastest linear_relu {r06}: {r04_words}. Registers against "
          "speed across Labs 04-06:\n{table}",
          headline="the fastest Lab 04 GEMM ({name04}, {speed04:.1f} TFLOP/s) uses {r04} registers ({read_by}'s "
                   "count): {r04_words}",
          values=_registers_values,
          checks=(says("r04_words", "r04", ">", 64, "that GEMM is past the article's 64",
                       "that GEMM is within the article's 64"),),
          explains="Lab 04's GEMMs at 64 registers or fewer are other algorithms (one output per thread, "
                   "no register tile), so this table is no test of a cap. The controlled test is the next "
                   "claim: one kernel under register caps"),
    Claim("registers_verdict",
          "More than 64 registers ran {verdict} one recording's spread: {above:.2f} TFLOP/s (cap {cap_above}) "
          "against {within:.2f} at most 64 (cap {cap_within}, {spills_within} B of spills), {gain:+.1%}, with "
          "p10-p90 at most {spread:.1%}. This is linear_relu at {size}^3, one source compiled under register "
          "caps, recorded once: that spread does not measure how much a second run would move.",
          headline="more than 64 registers ran {verdict} one recording's spread ({gain:+.1%}); recorded once, "
                   "so a second run may move it more",
          values=_registers_values,
          checks=(says("verdict", "gain", ">", "spread", "faster, beyond", "no faster beyond"),),
          article="registers",
          explains="under a cap ptxas spills what does not fit to local memory; the same algorithm on "
                   "both sides of 64 is what makes this a verdict on the cap"),
    Claim("shared_sweep",
          "The calculator's blocks per SM equal the driver's for {agree} of {rows} tile depths of linear_relu. "
          "Shared memory per block, occupancy and TFLOP/s at each (128 threads, capped at {cap} registers): "
          "{table}.",
          values=_shared_values, checks=(states("agree", ">=", "rows"),)),
    Claim("shared_verdict",
          "The best tile within 32 KiB of shared memory per block reaches {best_within:.2f} TFLOP/s, the best "
          "above {best_above:.2f}: {verdict}. The fastest tile uses {best_kb:.0f} KiB ({best_occ:.0%} "
          "occupancy, {best:.2f}); linear_relu is one kernel at tile depths on both sides of 32 KiB.",
          values=_shared_values,
          checks=(says("verdict", "best_within", ">=", "best_above", "staying within 32 KiB lost nothing here",
                       "a tile above 32 KiB ran faster"),),
          article="shared"),
    Claim("compute_probe_peak",
          "The compute-bound probe peaks at {one:.1f} TFLOP/s ({pct:.0f}% of the FP32 peak, {peak:.1f}), "
          "and at {four:.1f} ({pct4:.0f}%) with four chains per thread. Target: the better at least "
          "{target:.0f}%; it reaches {best_pct:.0f}%, {met}. Its PTX loop holds {fma} fma.rn.f32 beside "
          "{other} other instructions. The peak is SMs x lanes x 2 x clock; the FMA ceiling kernellab "
          "measured in the same run is {ceiling:.1f}.",
          values=_probe_values,
          # the probe is the lab's instrument, not the student's code: its verdict is in words, never [MISSED]
          checks=(says("met", "best_pct", ">=", "target", "at or above the target", "below the target"),)),
    Claim("memory_needs_bytes_in_flight",
          "The memory-bound probe needs {one} warps per SM for 90% of its best speed with one element in "
          "flight per thread, and {four} with four (median of {repeats} repeats, {ranges}; at {below} warps, {below_lo:.1f}-{below_hi:.1f}% of the best; the sweep ends at "
          "{top}): {verdict}.",
          values=memory_probe_warps,
          checks=(says("verdict", "four", "<", "one", "independent loads in a thread replace resident warps "
                       "(bytes in flight = warps x loads per thread x width)",
                       "four loads per thread did not lower the warps it needs"),)),
    Claim("caps_against_occupancy",
          "The fastest linear_relu, {best:.2f} TFLOP/s at {occ:.0%} occupancy, ran at {lower} occupancy than "
          "the solution's TUNED ({t_tuned:.2f} at {occ_tuned:.0%}). At {size}^3: the fastest is cap {cap}, tile_k {k} "
          "({spills} B of spills); as written ({regs_written} registers, {occ_written:.0%}) it runs "
          "{t_written:.2f}.",
          values=_caps_values, checks=(says("lower", "occ", "<", "occ_tuned", "a lower", "no lower"),)),
    Claim("calculator_equals_driver",
          "The calculator equals the driver on {agree:,} of the {configurations:,} configurations compared "
          "({seconds:.0f} s), from {kernels} of the {given} kernels it was given: the sweep {coverage}.",
          headline="calculator = driver on {agree:,} of {configurations:,} configurations compared ({kernels} "
                   "of {given} kernels; the sweep {coverage})",
          values=_calculator_values,
          checks=(states("agree", ">=", "configurations"),
                  says("coverage", "kernels", ">=", "given", "covered every kernel it was given",
                       "stopped at its time budget, and the kernels after these were not compared"))),
    Claim("ptxas_equals_driver",
          "ptxas's registers, static shared memory and stack frame (what kernellab.kernels.resources computes "
          "without a GPU) equal the driver's for {agree} of {kernels} kernels, and so do the active blocks "
          "they imply. Lab kernels without a signature to compile: {undeclared} ({signatures}).",
          values=_ptxas_values, checks=(states("agree", ">=", "kernels"),
                                        says("signatures", "undeclared", "<", 1, "every lab kernel declares one",
                                             "these were not compared"))),
]
