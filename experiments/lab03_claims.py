"""Lab 03's claims: what the discussion says, checked against the records (this lab's, and Lab
01's cost per array). The models a claim compares with are the solutions', so a claim never depends
on a student's stub; the claims on the launches alone read a recording that times them apart."""

from __future__ import annotations

from kernellab.course import protocol, reference
from kernellab.course.claims import Claim, Missing, course_solution, need, repeats_of, row, says, target

from experiments.lab03_constants import BLOCK, KERNEL_PACE, KERNELS, LAUNCHES, NUMBER, SCALE_ARRAYS
from experiments.lab03_measure import crossover, four_launches_beside, kernel_ratios, launches_record

MERGED_ARRAYS = 6                          # x0, x1, z1, x2, x3 and out: the merged launch's arrays


def _prep_values(records) -> dict:
    """The launchers' Python per call, measured apart (`launcher_prep`)."""
    prep = need(records, "launcher_prep", "variants")
    merged, separate = need(prep, "horizontal"), need(prep, "separate")
    return {"prep_n": need(records, "launcher_prep", "size"),
            "prep_merged_us": merged["prep_us_median"], "prep_merged_p10_us": merged["prep_us_p10"],
            "prep_merged_p90_us": merged["prep_us_p90"], "prep_separate_us": separate["prep_us_median"],
            "call_merged_us": merged["call_us_median"], "launch_merged_us": merged["launches_us_median"]}


def _crossover_values(records):
    launches_record(records)
    launch = need(records, "host_launch")
    summary = crossover(course_solution(NUMBER), records)
    if not summary["rows"]:
        raise Missing("tasks has no validated timings of both versions")
    smallest = summary["rows"][0]
    return {"n": smallest["n"], "measured": smallest["measured_speedup"],
            "predicted": smallest["predicted_speedup"], "launch_us": launch["us"],
            "separate_us": 1e3 * smallest["separate_ms"], "merged_us": 1e3 * smallest["horizontal_ms"],
            "stops_measured": summary["stops_paying_at_measured"],
            "stops_predicted": summary["stops_paying_at_predicted"],
            "stops_measured_at": _size_or_never(summary["stops_paying_at_measured"]),
            "stops_predicted_at": _size_or_never(summary["stops_paying_at_predicted"]),
            "apart": _apart(summary["stops_paying_at_measured"], summary["stops_paying_at_predicted"]),
            **_gain_per_repeat(records, smallest["n"])}


def _small_tasks_values(records):
    return {**_crossover_values(records), **_prep_values(records)}


def _gain_per_repeat(records, n) -> dict:
    """Four launches over one (the launches alone) at size n in each recorded repeat: a
    host-paced call's time moves between repeats by more than the gain, so the claim gives the
    range, each repeat on its own."""
    gains = [row(tasks, f"separate{LAUNCHES}", n)["median_ms"] / row(tasks, f"horizontal{LAUNCHES}", n)["median_ms"]
             for tasks in repeats_of(records, "tasks", NUMBER)]
    return {"gain_lo": min(gains), "gain_hi": max(gains), "repeats": len(gains)}


def _apart(measured, predicted):
    """How far apart two crossover sizes are (>= 1), or Missing where one never comes."""
    if not (measured and predicted):
        raise Missing("merging never stops paying within the sweep, measured or predicted")
    return max(measured / predicted, predicted / measured)


def _largest_values(records):
    """The largest task size: both calls' launches alone against the launch-or-bytes model of
    the same run."""
    tasks, launch = launches_record(records), need(records, "host_launch")
    n = max(tasks["sizes"])
    separate, merged = row(tasks, f"separate{LAUNCHES}", n), row(tasks, f"horizontal{LAUNCHES}", n)
    model_ms = max(4 * launch["us"] / 1e3, separate["bytes"] / tasks["copy_gbps"] / 1e6)
    return {"top_n": n, "top_ratio": separate["median_ms"] / merged["median_ms"],
            "top_separate_ms": separate["median_ms"], "top_merged_ms": merged["median_ms"],
            "top_model_ms": model_ms,
            "top_over_model": min(separate["median_ms"], merged["median_ms"]) / model_ms}


def _size_or_never(n):
    return f"{n:,} elements in the largest task" if n else "no size of the sweep"


def _argument_values(records):
    """The merged call's host time split, from `launcher_prep`: the launcher's Python and the
    launch, the launch against one launch of the scale kernel and Lab 01's cost per array."""
    values = _prep_values(records)
    launch = need(records, "host_launch")
    per_array, _ = protocol.experiment("01").per_array_us(need(records, "lab01"))
    extra = MERGED_ARRAYS - SCALE_ARRAYS
    return {**values, "launch_us": launch["us"], "per_array": per_array, "arrays": MERGED_ARRAYS,
            "extra": extra, "extra_us": extra * per_array,
            "over_launch": values["launch_merged_us"] / launch["us"]}


def _slicing_values(records):
    tasks = need(records, "tasks")
    if "separate_sliced" not in tasks["variants"]:
        raise Missing("tasks was recorded before the launchers passed offsets instead of slicing "
                      "(no separate_sliced variant): `kernellab bench 03` re-records it")
    n = min(tasks["sizes"])
    separate, sliced = row(tasks, "separate", n), row(tasks, "separate_sliced", n)
    slicing_us = 1e3 * (sliced["median_ms"] - separate["median_ms"])
    return {"n": n, "separate_us": 1e3 * separate["median_ms"], "sliced_us": 1e3 * sliced["median_ms"],
            "slicing_us": slicing_us, "per_view_us": slicing_us / 4}


def _worst_kernel_ratio(records, separate: str, merged: str) -> tuple[float, int, list[dict]]:
    """The merged kernel's speed against the four's at each size, each size's worst repeat, and
    the slowest size: (ratio, size, rows per size)."""
    per_repeat = [kernel_ratios(tasks_gpu, separate, merged)
                  for tasks_gpu in repeats_of(records, "tasks_gpu", NUMBER)]
    by_size = {}
    for rows in per_repeat:
        for r in rows:
            by_size[r["n"]] = min(by_size.get(r["n"], r["ratio"]), r["ratio"])
    if not by_size:
        raise Missing("tasks_gpu has no validated timings of both versions")
    n = min(by_size, key=by_size.get)
    return by_size[n], n, [{"n": k, "ratio": v} for k, v in sorted(by_size.items())]


def _short_size(n: int) -> str:
    for unit, scale in (("M", 2**20), ("K", 2**10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale}{unit}"
    return f"{n:,}"


def _registers_row(records, kernel: str, block: int) -> dict:
    for r in need(records, "registers", "rows"):
        if r["kernel"] == kernel and r["block"] == block:
            return r
    raise Missing(f"registers has no row for {kernel} at blocks of {block}")


def _kernel_pace_values(records):
    need(records, "tasks_gpu")
    worst, n, rows = _worst_kernel_ratio(records, "separate", "horizontal")
    wide_worst, wide_n, _ = _worst_kernel_ratio(records, four_launches_beside("horizontal_block256"),
                                                "horizontal_block256")
    quad_worst, quad_n, _ = _worst_kernel_ratio(records, four_launches_beside("horizontal_4_per_thread"),
                                                "horizontal_4_per_thread")
    merged = _registers_row(records, "horizontal_kernel", BLOCK)
    separate = [_registers_row(records, k.name, BLOCK) for k in KERNELS if k.name != "horizontal_kernel"]
    return {"worst": worst, "worst_n": n, "wide_worst": wide_worst, "wide_n": wide_n,
            "quad_worst": quad_worst, "quad_n": quad_n,
            "by_size": ", ".join(f"{_short_size(r['n'])} {r['ratio']:.2f}x" for r in rows),
            "under": ", ".join(_short_size(r["n"]) for r in rows if r["ratio"] < KERNEL_PACE) or "no size",
            "repeats": len(repeats_of(records, "tasks_gpu", NUMBER)),
            "merged_regs": merged["registers"], "merged_occ": merged["occupancy"],
            "separate_regs": max(r["registers"] for r in separate),
            "separate_occ": min(r["occupancy"] for r in separate)}


def _profiled_kernels_values(records):
    """The recorded Nsight Compute rows of the merged and the four kernels (each kernel alone,
    caches flushed), beside the host-paced whole calls of the same size."""
    tasks = need(records, "tasks")
    profiled = [r for r in reference.profile_rows(NUMBER)
                if r["benchmark"] == "tasks" and r["variant"] in ("separate", "horizontal")]
    if not profiled:
        raise Missing("no Nsight Compute rows of tasks (`kernellab profile 03` on a GPU records them)")
    n = max(r["size"] for r in profiled)
    merged = [r for r in profiled if r["size"] == n and r["variant"] == "horizontal"]
    separate = [r for r in profiled if r["size"] == n and r["variant"] == "separate"]
    if len(merged) != 1 or len(separate) != 4:
        raise Missing(f"the profile of tasks at {n:,} lacks the merged kernel or one of the four")
    paced_merged, paced_separate = row(tasks, "horizontal", n), row(tasks, "separate", n)
    merged_us = merged[0]["gpu_time_ns"] / 1e3
    separate_us = sum(r["gpu_time_ns"] for r in separate) / 1e3
    return {"prof_n": n, "merged_gpu_us": merged_us, "separate_gpu_us": separate_us,
            "kernel_ratio": separate_us / merged_us,
            "merged_regs": merged[0]["registers_per_thread"],
            "separate_regs": max(r["registers_per_thread"] for r in separate),
            "merged_occ": merged[0]["achieved_occupancy_pct"],
            "paced_merged_ms": paced_merged["median_ms"], "paced_separate_ms": paced_separate["median_ms"],
            "paced_ratio": paced_separate["median_ms"] / paced_merged["median_ms"],
            "merged_outside_us": 1e3 * paced_merged["median_ms"] - merged_us,
            "separate_outside_us": 1e3 * paced_separate["median_ms"] - separate_us}


CLAIMS = [
    Claim("small_tasks_gain",
          "At {n:,} elements in the largest task, the launches alone (replayed with the launchers' own "
          "kernels and arguments, their Python outside the window) take {merged_us:.0f} us for one against "
          "{separate_us:.0f} us for four, as an eager caller waits for them (each row its worst repeat): "
          "{measured:.2f}x the speed of four; each repeat on its own, {gain_lo:.2f}-{gain_hi:.2f}x over "
          "{repeats} ({faster}). The launchers' Python, measured apart at {prep_n:,} elements, adds "
          "{prep_merged_us:.0f} us to the merged call and {prep_separate_us:.0f} us to the four. The "
          "launch-or-bytes model, from one launch's host cost measured in the same run ({launch_us:.1f} us), "
          "predicts {predicted:.1f}x, {model}.",
          headline="4 small tasks in one launch: {gain_lo:.2f}-{gain_hi:.2f}x the speed of 4 launches at {n:,} "
                   "elements, launches alone ({repeats} repeats)",
          values=_small_tasks_values,
          checks=(says("faster", "gain_lo", ">", 1, "faster in every repeat", "not faster in every repeat"),
                  says("model", "predicted", ">=", "gain_hi", "more than any repeat measured",
                       "no more than a repeat measured")),
          explains="the model charges every launch the same host cost, that of a launch with two "
                   "array arguments; the merged launch passes six, and each array argument costs the "
                   "host microseconds to prepare (next line), so one merged launch costs more than one "
                   "launch of the model."),
    Claim("merged_call_cost",
          "Per merged call at {prep_n:,} elements the host spends {call_merged_us:.0f} us (paired samples from "
          "an idle GPU): the launcher's Python (checks, offsets, the block table) {prep_merged_us:.0f} us "
          "(p10-p90 {prep_merged_p10_us:.0f}-{prep_merged_p90_us:.0f}), and its one launch {launch_merged_us:.0f} "
          "us, {over_launch:.1f}x one launch of the scale kernel ({launch_us:.1f} us), whose {extra} array "
          "arguments beyond that launch's two cost about {extra_us:.0f} us at the {per_array:.1f} us per "
          "array Lab 01 measured. The launcher's Python {python} its launch.",
          values=_argument_values,
          checks=(says("python", "prep_merged_us", "<", "launch_merged_us", "costs less than",
                       "costs more than"),),
          explains="until the 2026-12-01 recording this split was inferred (the call less a launch less "
                   "the arrays); `launcher_prep` now measures the launcher's Python on its own"),
    Claim("slicing_is_its_own_cost",
          "Slicing `out` into the four views the first version of this lab launched on {costs} "
          "{slicing_us:.0f} us per call at {n:,} elements (about {per_view_us:.0f} us per view): the "
          "four launches take {sliced_us:.0f} us on views and {separate_us:.0f} us with offsets. A "
          "device-array slice is a new array object built in Python, on every call.",
          values=_slicing_values,
          checks=(says("costs", "slicing_us", ">", 0, "costs", "saves"),)),
    Claim("stops_paying",
          "Merging stops paying (a gain under 5%, the launches alone) at {stops_measured_at}, measured; the "
          "model says {stops_predicted_at}, {agree} ({apart:.1f}x apart).",
          values=_crossover_values,
          checks=(says("agree", "apart", "<=", 4, "within 4x of the measurement", "more than 4x off"),)),
    Claim("largest_tasks_neither_paced",
          "At {top_n:,} elements in the largest task one launch runs at {top_ratio:.2f}x the speed of four, "
          "the launches alone, host-paced ({top_verdict}): they take {top_separate_ms:.2f} ms (four) and "
          "{top_merged_ms:.2f} ms (one), while the model's max(four launches, the bytes at the copy bandwidth) "
          "is {top_model_ms:.2f} ms: even the faster takes {top_over_model:.1f}x that, {paced}.",
          headline="{top_ratio:.2f}x at {top_n:,} ({top_verdict})",
          values=_largest_values,
          checks=(says("top_verdict", "top_ratio", "<", 1, "merging loses", "merging still pays"),
                  says("paced", "top_over_model", ">", 1.5, "more than 1.5x: neither the launches nor the bytes at "
                       "copy speed set these calls' time", "within 1.5x of the model")),
          explains="the model was written on the rule that a call takes its launches' submit time or its "
                   "bytes, whichever is slower; the kernels' own speed is in tasks_gpu (next claim) and in "
                   "the Nsight Compute rows (`kernellab profile 03`)"),
    Claim("merged_kernel_keeps_pace",
          "On the GPU alone (each call's host work held outside the window; each size its worst of "
          "{repeats} repeats), the merged kernel runs at {worst:.2f}x the speed of the four kernels at its "
          "slowest size, {worst_n:,} elements (target: at least " + f"{KERNEL_PACE:.2f}" + "x at every "
          "size {verdict}); in blocks of 256, against the four in blocks of 256, at {wide_worst:.2f}x at "
          "{wide_n:,} ({wide_verdict}); with 4 elements per thread (solution side), against the four as "
          "given, at {quad_worst:.2f}x at {quad_n:,} ({quad_verdict}). Four over one, by size: {by_size} "
          "(under " + f"{KERNEL_PACE:.2f}" + "x: {under}). The merged kernel uses {merged_regs} registers per thread against "
          "at most {separate_regs} for the four: at blocks of 128 it may hold {merged_occ:.0%} of an SM's warp "
          "slots, the four at least {separate_occ:.0%} ({occupancy}).",
          headline="merged kernel at least {worst:.2f}x the speed of 4 on the GPU alone {verdict}",
          values=_kernel_pace_values,
          checks=(target("verdict", "worst", ">=", KERNEL_PACE),
                  target("wide_verdict", "wide_worst", ">=", KERNEL_PACE),
                  target("quad_verdict", "quad_worst", ">=", KERNEL_PACE),
                  says("occupancy", "merged_occ", ">=", "separate_occ", "registers cost the merged kernel no "
                       "occupancy", "its registers cost it occupancy"))),
    Claim("merged_call_was_slower_outside_its_kernel",
          "Under Nsight Compute at {prof_n:,} elements (each kernel alone, caches flushed) the merged kernel "
          "ran {merged_gpu_us:.0f} us and the four kernels {separate_gpu_us:.0f} us summed: {kernel_ratio:.2f}x "
          "the speed of the four ({kernel_verdict}), at {merged_regs} registers per thread against at most "
          "{separate_regs}, {merged_occ:.0f}% of warp slots occupied on average. The host-paced whole calls of "
          "that size took {paced_merged_ms:.2f} ms (one) and {paced_separate_ms:.2f} ms (four), "
          "{paced_ratio:.2f}x: the merged call spent {merged_outside_us:.0f} us outside its kernel, the four "
          "{separate_outside_us:.0f} us outside theirs ({outside}).",
          values=_profiled_kernels_values,
          checks=(says("kernel_verdict", "kernel_ratio", ">=", KERNEL_PACE, "as fast, within 2%",
                       "slower by more than 2%"),
                  says("outside", "merged_outside_us", ">", "separate_outside_us",
                       "the merged call's is the longer", "the merged call's is not the longer")),
          explains="a host-paced call's window opens before the launcher's first line, and the merged call's "
                   "Python and its one launch come before its only kernel, while the four launches submit three "
                   "of theirs as the first kernel runs. Time outside the profiled kernels is host work the GPU "
                   "waited for, or a kernel slower in the sequence than alone under the profiler: the "
                   "launches-alone rows (tasks) and the GPU-alone rows (tasks_gpu) measure the parts on their own"),
]
