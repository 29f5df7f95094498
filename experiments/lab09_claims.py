"""Lab 09's claims: the tuned kernels against their mix's ceiling, the roofline's bounds, and the
verdict on the seed article's closing advice (fusion, occupancy), read from the same points (the
worst recorded repeat where bench repeated the run)."""

from __future__ import annotations

from typing import Callable

from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.course.claims import (Claim, Missing, course_solution, need, repeats_of, says, states,
                                     target)

from experiments.lab09_constants import (
    GPU_SHAPE, NUMBER, SCALE_ROWS_VARIANTS, TRANSPOSE_VARIANTS, TUNED_TARGET_PCT)
from experiments.lab09_points import BUSY_PCT, ELEMENTWISE, recorded, roofline_points


# --- 3. the article's closing advice ---------------------------------------------------------------

# (label, lab, record, unfused variant, fused variant, size, the main kernel whose bound it has)
FUSION_PAIRS = (
    ("02 chain", "02", "chain", "unfused", "fused", ELEMENTWISE, "02 chain unfused"),
    ("04 epilogue, tiled", "04", "epilogue", "tiled_unfused", "tiled_fused", 4096, "04 GEMM tiled"),
    ("04 epilogue, register-tiled", "04", "epilogue", "register_tiled_unfused", "register_tiled_fused",
     4096, "04 GEMM register-tiled"),
    ("04 epilogue, double-buffered", "04", "epilogue", "double_buffered_unfused",
     "double_buffered_fused", 4096, "04 GEMM register-tiled"),
    ("04 epilogue, bk16", "04", "epilogue", "bk16_unfused", "bk16_fused", 4096, "04 GEMM bk16"),
)
OCCUPANCY_PROBES = {"memory": "memory_bound", "compute": "compute_bound"}   # Lab 06's sweep
MATTERS = 1.2   # a gain below this is within what a different launch shape or run moves


def fusion_gains(points: list[dict], records_of: Callable[[str], dict] = recorded) -> list[dict]:
    """unfused time / fused time for each pair, with the bound of the pair's main kernel."""
    bounds = {p["name"]: p["bound"] for p in points}
    out = []
    for label, lab_number, name, unfused, fused, size, main in FUSION_PAIRS:
        record = records_of(lab_number)[name]
        gain = harness.row(record, unfused, size)["median_ms"] / harness.row(record, fused, size)["median_ms"]
        out.append({"pair": label, "gain": gain, "bound": bounds[main]})
    return out


def occupancy_gains(records_of: Callable[[str], dict] = recorded) -> dict:
    """Lab 06: slowest / fastest over its occupancy sweep, per kind of probe."""
    rows = records_of("06")["occupancy_vs_speed"]["rows"]
    gains = {}
    for kind, probe in OCCUPANCY_PROBES.items():
        times = [r["median_ms"] for r in rows if r["probe"] == probe]
        gains[kind] = max(times) / min(times)
    return gains


def claim_points(records: dict) -> tuple[list[dict], Callable[[str], dict]]:
    """The roofline points a claim reads, from its records: every lab's as records["labNN"]
    (live where this process measured them, `claims.sources`), lab 09's own at the top."""
    def records_of(lab_number):
        return need(records, f"lab{lab_number}")

    return roofline_points(course_solution(NUMBER), own=records, records_of=records_of), records_of


def roofline_values(records: dict) -> dict:
    points, _ = claim_points(records)
    return {"count": len(points), "highest": max(p["pct_of_roof"] for p in points),
            "highest_name": max(points, key=lambda p: p["pct_of_roof"])["name"]}


def fusion_values(records: dict) -> dict:
    points, records_of = claim_points(records)
    gains = fusion_gains(points, records_of)
    best = {bound: max((g["gain"] for g in gains if g["bound"] == bound), default=None)
            for bound in ("memory", "compute")}
    if None in best.values():
        raise Missing("no fusion pair of each bound on the roofline")
    saved = [100 * (1 - 1 / g["gain"]) for g in gains if g["bound"] == "compute"]
    return {**best, "pairs": ", ".join(f"{g['pair']} {g['gain']:.2f}x ({g['bound']})" for g in gains),
            "matters": MATTERS, "saved_lo": min(saved), "saved_hi": max(saved)}


def occupancy_values(records: dict) -> dict:
    """Lab 06's sweep: how far occupancy moved each probe, and the warps per SM the memory-bound
    probe needs with one and with four elements in flight per thread (Lab 06's own claim), with the
    sweep's top and the one-element probe's share of its best a step below."""
    def records_of(lab_number):
        return need(records, f"lab{lab_number}")

    warps = protocol.experiment("06").memory_probe_warps(records_of("06"))
    return {**occupancy_gains(records_of), **{k: warps[k] for k in ("one", "four", "top", "below", "below_lo",
                                                                     "below_hi", "repeats")}}


def _largest_rows(result: dict) -> dict:
    """The largest size's row of each variant of one benchmark's result."""
    largest = max(result["sizes"])
    return {r["variant"]: r for r in result["rows"] if r["size"] == largest}


def tuned_values(records: dict) -> dict:
    """Each scale_rows and transpose variant's % of its mix's ceiling at the largest size, the
    worst repeat's (repeats_of keeps each repeat's record)."""
    values = {}
    for benchmark, names in (("scale_rows", SCALE_ROWS_VARIANTS), ("transpose", TRANSPOSE_VARIANTS)):
        repeats = [_largest_rows(r) for r in repeats_of(records, benchmark, NUMBER)]
        for name in names:
            if any(name not in rows for rows in repeats):
                raise Missing(f"{name} is not in lab 09's {benchmark} record yet")
            values[name] = min(rows[name]["pct_of_ceiling"] for rows in repeats)
    return {**values, "target": TUNED_TARGET_PCT, "repeats": len(repeats),
            "shape": "x".join(map(str, GPU_SHAPE))}


def _profiled(variant: str) -> dict:
    """Lab 09's recorded Nsight Compute row of one scale_rows variant at the largest size."""
    found = [r for r in reference.profile_rows(NUMBER) if r["benchmark"] == "scale_rows"
             and r["variant"] == variant and r.get("warp_instructions")]
    if not found:
        raise Missing(f"no profile row with warp instructions for scale_rows {variant}")
    return max(found, key=lambda r: r["size"])


def instruction_values(records: dict) -> dict:
    """What holds the coalesced scale_rows back, from the profile: its warp instructions against
    the strided and the tuned kernel's, and its SM against its DRAM throughput."""
    strided, coalesced, wide = (_profiled(v) for v in SCALE_ROWS_VARIANTS)
    return {"same": coalesced["warp_instructions"] / strided["warp_instructions"],
            "tuned": wide["warp_instructions"] / coalesced["warp_instructions"],
            "sm": coalesced["sm_throughput_pct"], "dram": coalesced["dram_throughput_pct"], "busy": BUSY_PCT}


CLAIMS = [
    Claim("tuned_at_the_ceiling",
          "The tuned kernels reach {scale_rows_wide:.0f}% and {transpose_wide:.0f}% of the copy ceiling, the "
          "coalesced ones {scale_rows:.0f}% and {transpose:.0f}%: coalescing is {coalescing} of the way. The "
          "strided scale_rows reaches {scale_rows_strided:.0f}%, the naive transpose {transpose_naive:.0f}%. At "
          "{shape}, worst of {repeats} repeats; target for the tuned ones: {target:.0f}% ({scale_met}, "
          "{transpose_met}).",
          values=tuned_values,
          checks=(target("scale_met", "scale_rows_wide", ">=", "target"),
                  target("transpose_met", "transpose_wide", ">=", "target"),
                  says("coalescing", "scale_rows", ">=", "target", "all", "only part")),
          explains="coalescing fixes which sectors a warp asks for, not how many instructions it issues "
                   "(the next claim measures that for scale_rows). A tuned kernel below the target issues "
                   "too many instructions or keeps too few loads in flight on this GPU: its profile row "
                   "says which"),
    Claim("coalesced_issues_instructions",
          "The coalesced scale_rows has its SM {sm:.0f}% busy and its DRAM {dram:.0f}% (a unit is busy at "
          "{busy:.0f}% of its peak or more, as experiment.diagnose reads it): {sm_verdict}, and {dram_verdict}. "
          "It issues {same:.2f}x the strided kernel's warp instructions; the tuned kernel issues {tuned:.2f}x "
          "the coalesced one's (recorded by Nsight Compute at 8192 x 8192).",
          headline="the coalesced scale_rows: SM {sm:.0f}% busy, DRAM {dram:.0f}%: {sm_verdict}",
          values=instruction_values,
          checks=(says("sm_verdict", "sm", ">=", "busy", "the instructions it issues hold it back",
                       "instruction issue is not what holds it back"),
                  says("dram_verdict", "dram", "<", "busy", "DRAM is not busy", "DRAM is busy too")),
          explains="per element it computes its row and column with a signed 64-bit division and remainder, "
                   "and checks each signed index for Python's negative wrap-around; the tuned kernel indexes "
                   "unsigned on a 2-D grid and handles 4 elements per thread"),
    Claim("roofline_bounds",
          "Of the {count} main kernels on the roofline, the nearest to its roof is {highest_name} at "
          "{highest:.0f}%: {none_above}. The figure's table gives each kernel's intensity and % of roof.",
          values=roofline_values,
          checks=(says("none_above", "highest", "<=", 100, "none is above its roof", "one is ABOVE its roof, an "
                       "instrument error"),)),
    Claim("fusion_on_compute_bound",
          "Fusion's best gain under the memory roof is {memory:.2f}x: aggressive fusion {memory_verdict} on "
          "memory-bound work here (a gain of {matters:.1f}x or more counts). Under the compute roof the pairs are "
          "GEMM epilogues; fusing saved {saved_lo:.0f}-{saved_hi:.0f}% of their time (at most {compute:.2f}x): "
          "{compute_verdict}. The pairs: {pairs}.",
          headline="fusion: {memory:.2f}x on memory-bound work ({memory_verdict}); compute-bound GEMM epilogues, "
                   "at most {compute:.2f}x",
          values=fusion_values,
          checks=(says("memory_verdict", "memory", ">=", "matters", "paid", "did not pay"),
                  says("compute_verdict", "compute", "<", "matters", "small by construction, so they cannot test the "
                       "advice", "a gain that counts")),
          article="fusion",
          explains="a compute-bound kernel's roof is flat: fusing its epilogue saves bytes it was not "
                   "waiting on; a memory-bound chain's fused form moves fewer bytes for the same FLOPs. An "
                   "epilogue pass is a small share of a GEMM's time, so no compute-bound pair here could show a "
                   "large gain: the course has no compute-bound fusion that could test the article's advice"),
    Claim("occupancy_on_memory_bound",
          "Across Lab 06's occupancy sweep, occupancy moved the memory-bound probe {more} than the "
          "compute-bound one: {memory:.1f}x against {compute:.1f}x in time. What it needs is bytes in "
          "flight: with four elements in flight per thread it reached 90% of its best at {four} warps per "
          "SM; with one, only at {at_top}: {one} warps per SM, of at most {top} (at {below} it reached "
          "{below_lo:.1f}-{below_hi:.1f}% of its best over {repeats} repeats).",
          values=occupancy_values,
          checks=(says("more", "memory", ">", "compute", "more", "less"),
                  states("four", "<", "one"),
                  says("at_top", "one", ">=", "top", "the sweep's top", "a point below the sweep's top")),
          article="occupancy",
          explains="occupancy is one way to put bytes in flight, independent loads per thread another "
                   "(Little's law). The article's advice holds for kernels with one element in flight per "
                   "thread, not as a rule"),
]

