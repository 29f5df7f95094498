"""Lab 03's claims: what the discussion says, checked against the records (this lab's, and Lab
01's cost per array). The models a claim compares with are the solutions', so a claim never depends
on a student's stub; the claims on the launches alone read a recording that times them apart.

The host's pace drifts between repeats (about 1.5x in the reference recording), so a figure that
combines two rows or two records (a ratio, a difference, a part of a call) is computed within each
repeat from that repeat's own records, and a claim prints the median of those figures with their
range (review 6-a)."""

from __future__ import annotations

import statistics

from kernellab.course import protocol
from kernellab.course.claims import (Claim, Missing, course_solution, need, profile_rows_beside, repeats_ms,
                                     repeats_of, row, says, target, typical_ms)

from experiments.lab01_measure import typical_record
from experiments.lab03_constants import (BLOCK, GAIN_THAT_PAYS, KERNEL_PACE, KERNELS, LAUNCHES, NUMBER,
                                         SCALE_ARRAYS)
from experiments.lab03_measure import crossover, host_launch_each, kernel_ratios, launches_record, model_inputs

MERGED_ARRAYS = 6                          # x0, x1, z1, x2, x3 and out: the merged launch's arrays


def _each_repeat(records, *names) -> list[dict]:
    """Each recorded repeat's own records `names` (a live run: its one set of them)."""
    found = [repeats_of(records, name, NUMBER) for name in names]
    if len({len(each) for each in found}) > 1:
        raise Missing(f"the repeats do not all hold {', '.join(names)}")
    return [dict(zip(names, one)) for one in zip(*found)]


def _spread(key: str, figures: list[float]) -> dict:
    """Per-repeat figures as {key: their median, key_lo, key_hi}."""
    return {key: statistics.median(figures), f"{key}_lo": min(figures), f"{key}_hi": max(figures)}


def _times_us(tasks: dict, n: int) -> dict:
    """One repeat's `tasks` rows at size n, in us: each version's whole call and launches alone."""
    return {v: 1e3 * row(tasks, v, n)["median_ms"]
            for v in ("separate", "horizontal", f"separate{LAUNCHES}", f"horizontal{LAUNCHES}")}


def _python_values(records, n) -> dict:
    """The launchers' Python per call at size n, from the `tasks` rows: in each repeat the whole
    call less its launches alone, the same rows the launches are read from."""
    each = [_times_us(tasks, n) for tasks in repeats_of(records, "tasks", NUMBER)]
    return {**_spread("py_merged", [t["horizontal"] - t[f"horizontal{LAUNCHES}"] for t in each]),
            **_spread("py_four", [t["separate"] - t[f"separate{LAUNCHES}"] for t in each])}


def _launch_values(records) -> dict:
    """The host's cost of one launch: the median of the repeats, with their range."""
    each = host_launch_each(records)
    return {"launch_us": model_inputs(records)[0], "launch_lo": min(each), "launch_hi": max(each),
            "launch_repeats": len(each)}


def _crossover_values(records):
    launches_record(records)
    summary = crossover(course_solution(NUMBER), records)
    if not summary["rows"]:
        raise Missing("tasks has no validated timings of both versions")
    smallest = summary["rows"][0]
    stops_measured, stops_predicted = summary["stops_paying_at_measured"], summary["stops_paying_at_predicted"]
    return {"n": smallest["n"], "measured": smallest["measured_speedup"],
            "predicted": smallest["predicted_speedup"], **_launch_values(records),
            "separate_us": 1e3 * smallest["separate_ms"], "merged_us": 1e3 * smallest["horizontal_ms"],
            "stops_measured": stops_measured, "stops_predicted": stops_predicted,
            "stops_measured_at": _size_or_never(stops_measured),
            "stops_predicted_at": _size_or_never(stops_predicted),
            "apart": _apart(stops_measured, stops_predicted),
            **_miss_split(records, smallest["n"]), **_gain_per_repeat(records, smallest["n"])}


def _miss_split(records, n) -> dict:
    """The model's miss on the gain at size n, in each repeat with that repeat's own launch cost
    (`host_launch`) and copy ceiling, split into its two factors: the model's four launches over
    what they took, and what the merged launch took over the model's one (the launches alone)."""
    solution = course_solution(NUMBER)
    four, merged = [], []
    for each in _each_repeat(records, "tasks", "host_launch"):
        tasks, launch_us = each["tasks"], each["host_launch"]["us"]
        separate, one = row(tasks, f"separate{LAUNCHES}", n), row(tasks, f"horizontal{LAUNCHES}", n)
        four.append(solution.predicted_time_us(4, separate["bytes"], launch_us, tasks["copy_gbps"])
                    / (1e3 * separate["median_ms"]))
        merged.append(1e3 * one["median_ms"]
                      / solution.predicted_time_us(1, one["bytes"], launch_us, tasks["copy_gbps"]))
    return {**_spread("four_ratio", four), **_spread("merged_over", merged),
            "four_over": sum(r > 1 for r in four), "merged_more": sum(r > 1 for r in merged)}


def _stops_values(records):
    """Where merging stops paying, measured and predicted (each on the medians of the repeats),
    and at the measured stop the merged call and its kernel on the GPU alone against the model."""
    values = _crossover_values(records)
    n = values["stops_measured"]
    at_stop = next(r for r in crossover(course_solution(NUMBER), records)["rows"] if r["n"] == n)
    kernel_us = 1e3 * typical_ms(row(need(records, "tasks_gpu"), "horizontal", n))
    return {**values, "stop_merged_us": 1e3 * at_stop["horizontal_ms"], "stop_kernel_us": kernel_us,
            "stop_model_us": at_stop["predicted_merged_us"],
            "stop_kernel_over_model": kernel_us / at_stop["predicted_merged_us"]}


def _small_tasks_values(records):
    values = _crossover_values(records)
    return {**values, **_python_values(records, values["n"])}


def _gain_per_repeat(records, n) -> dict:
    """Four launches over one (the launches alone) at size n in each recorded repeat: a
    call's time moves between repeats by more than the gain, so the claim gives the
    range, each repeat on its own (the crossover's measured gain is their median)."""
    gains = [row(tasks, f"separate{LAUNCHES}", n)["median_ms"] / row(tasks, f"horizontal{LAUNCHES}", n)["median_ms"]
             for tasks in repeats_of(records, "tasks", NUMBER)]
    return {"gain_lo": min(gains), "gain_hi": max(gains), "repeats": len(gains)}


def _apart(measured, predicted):
    """How far apart two crossover sizes are (>= 1), or Missing where one never comes."""
    if not (measured and predicted):
        raise Missing("merging never stops paying within the sweep, measured or predicted")
    return max(measured / predicted, predicted / measured)


def _largest_values(records):
    """The largest task size: both calls' launches alone against the launch-or-bytes model, each
    repeat against the model filled with its own launch cost and copy ceiling."""
    tasks = launches_record(records)
    launch_us, gbps = model_inputs(records)
    n = max(tasks["sizes"])
    separate, merged = row(tasks, f"separate{LAUNCHES}", n), row(tasks, f"horizontal{LAUNCHES}", n)

    def model_ms(launch_us, gbps):
        return max(4 * launch_us / 1e3, separate["bytes"] / gbps / 1e6)

    ratios, same_inner, over_model = [], [], []
    for each in _each_repeat(records, "tasks", "host_launch"):
        timed = {v: row(each["tasks"], f"{v}{LAUNCHES}", n) for v in ("separate", "horizontal")}
        one = {v: r["median_ms"] for v, r in timed.items()}
        ratios.append(one["separate"] / one["horizontal"])
        if timed["separate"]["inner"] == timed["horizontal"]["inner"]:   # as many calls per timing sample
            same_inner.append(ratios[-1])
        over_model.append(min(one.values()) / model_ms(each["host_launch"]["us"], each["tasks"]["copy_gbps"]))
    if not same_inner:
        raise Missing(f"no repeat timed both calls at {n:,} with as many calls per sample")
    same = statistics.median(same_inner)
    return {"top_n": n, "top_ratio": statistics.median(ratios), "top_lo": min(ratios), "top_hi": max(ratios),
            "top_unequal": len(ratios) - len(same_inner), "top_equal": len(same_inner), "top_same": same,
            "top_same_gap_pct": 100 * abs(same - 1), "top_repeats": len(ratios),
            "top_separate_ms": typical_ms(separate), "top_merged_ms": typical_ms(merged),
            "top_model_ms": model_ms(launch_us, gbps), "top_over_model": statistics.median(over_model)}


def _size_or_never(n):
    return f"{n:,} elements in the largest task" if n else "no size of the sweep"


def _argument_values(records):
    """The merged call's host time in two parts, within each repeat of the `tasks` rows: the
    launcher's Python (the whole call less its launches alone) and its launch; the launch against
    the same repeat's launch of the scale kernel (`host_launch`) and Lab 01's cost per array;
    `launcher_prep`, which times the Python apart in its own harness, against its own launch."""
    values = _crossover_values(records)
    n = values["n"]
    if int(need(records, "launcher_prep", "size")) != n:
        raise Missing(f"launcher_prep was timed at {need(records, 'launcher_prep', 'size'):,} elements, "
                      f"the tasks' smallest size is {n:,}")
    need(records, "launcher_prep", "variants", "horizontal")
    lab01 = need(records, "lab01")
    if need(records, "tasks").get("live") and not any(isinstance(r, dict) and r.get("live") for r in lab01.values()):
        raise Missing("the live launches would lose Lab 01's cost per array recorded on another machine")
    per_array, _ = protocol.experiment("01").per_array_us(lab01)
    extra = MERGED_ARRAYS - SCALE_ARRAYS
    python, over_launch, rest, prep = [], [], [], []
    for each in _each_repeat(records, "tasks", "host_launch", "launcher_prep"):
        times, launch_us = _times_us(each["tasks"], n), each["host_launch"]["us"]
        one = times[f"horizontal{LAUNCHES}"]
        python.append((times["horizontal"] - one) / one)
        over_launch.append(one / launch_us)
        rest.append(one - launch_us - extra * per_array)
        apart = each["launcher_prep"]["variants"]["horizontal"]
        prep.append(apart["prep_us_median"] / apart["launches_us_median"])
    return {**values, **_python_values(records, n), "per_array": per_array, "extra": extra,
            "extra_us": extra * per_array, **_spread("python_ratio", python),
            **_spread("over_launch", over_launch), **_spread("rest_us", rest),
            "rest_more": sum(r > extra * per_array for r in rest), **_spread("prep_ratio", prep)}


def _slicing_values(records):
    tasks = need(records, "tasks")
    if "separate_sliced" not in tasks["variants"]:
        raise Missing("tasks was recorded before the launchers passed offsets instead of slicing "
                      "(no separate_sliced variant): `kernellab bench 03` re-records it")
    n = min(tasks["sizes"])
    separate, sliced = row(tasks, "separate", n), row(tasks, "separate_sliced", n)
    pairs = sorted(zip(repeats_ms(sliced), repeats_ms(separate)), key=lambda p: p[0] - p[1])
    differences = [1e3 * (v - o) for v, o in pairs]
    middle = pairs[(len(pairs) - 1) // 2]            # the repeat with the median difference (the lower of two)
    slicing_us = 1e3 * (middle[0] - middle[1])
    spread_us = 1e3 * max(r["p90_ms"] - r["p10_ms"] for r in (separate, sliced))
    need(records, "lab01", "python_around_launch", "steps", "slice x[row]", "us")
    lab01_slice = typical_record(records["lab01"], "python_around_launch")["steps"]["slice x[row]"]["us"]
    return {"n": n, "separate_us": 1e3 * middle[1], "sliced_us": 1e3 * middle[0],
            "slicing_us": slicing_us, "slicing_lo": min(differences), "slicing_hi": max(differences),
            "repeats": len(differences), "per_view_us": slicing_us / 4, "spread_us": spread_us,
            "lab01_slice": lab01_slice}


def _kernel_ratio_by_size(records, separate: str, merged: str) -> list[dict]:
    """The four kernels' GPU time over the merged kernel's at each size: the median of the repeats
    and their range, {n, ratio, lo, hi}. A finding reads the median (one bad repeat cannot decide
    it); the target reads the lowest (it must hold in every repeat)."""
    per_repeat = [kernel_ratios(tasks_gpu, separate, merged)
                  for tasks_gpu in repeats_of(records, "tasks_gpu", NUMBER)]
    by_size: dict[int, list[float]] = {}
    for rows in per_repeat:
        for r in rows:
            by_size.setdefault(r["n"], []).append(r["ratio"])
    if not by_size:
        raise Missing("tasks_gpu has no validated timings of both versions")
    return [{"n": n, "ratio": statistics.median(ratios), "lo": min(ratios), "hi": max(ratios)}
            for n, ratios in sorted(by_size.items())]


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
    rows = _kernel_ratio_by_size(records, "separate", "horizontal")
    wide = _kernel_ratio_by_size(records, "separate_block256", "horizontal_block256")
    slowest = min(rows, key=lambda r: r["ratio"])
    lowest, lowest256 = (min(each, key=lambda r: r["lo"]) for each in (rows, wide))
    merged = _registers_row(records, "horizontal_kernel", BLOCK)
    separate = [_registers_row(records, k.name, BLOCK) for k in KERNELS if k.name != "horizontal_kernel"]
    return {"worst": slowest["ratio"], "worst_lo": slowest["lo"], "worst_hi": slowest["hi"],
            "worst_n": slowest["n"], "lowest": lowest["lo"], "lowest_n": lowest["n"], "block": BLOCK,
            "lowest256": lowest256["lo"], "lowest256_n": lowest256["n"],
            "under": ", ".join(_short_size(r["n"]) for r in rows if r["lo"] < KERNEL_PACE) or "no size",
            "repeats": len(repeats_of(records, "tasks_gpu", NUMBER)),
            "merged_regs": merged["registers"], "merged_occ": merged["occupancy"],
            "separate_regs": max(r["registers"] for r in separate),
            "separate_occ": min(r["occupancy"] for r in separate)}


def _pct_of_copy(records, variant: str, n: int) -> float:
    """A variant's share of the copy ceiling on the GPU alone at size n: the median of the repeats."""
    def pct(tasks_gpu):
        timed = row(tasks_gpu, variant, n)
        return 100 * timed["bytes"] / (timed["median_ms"] * 1e6) / tasks_gpu["copy_gbps"]
    return statistics.median(pct(tasks_gpu) for tasks_gpu in repeats_of(records, "tasks_gpu", NUMBER))


def _in_flight_values(records):
    """The largest size on the GPU alone: how close to the copy ceiling each form gets, in blocks of
    128 and 256 and with 4 elements per thread (solution side)."""
    tasks_gpu = need(records, "tasks_gpu")
    n = max(tasks_gpu["sizes"])
    wanted = ("separate", "horizontal", "separate_block256", "horizontal_block256", "horizontal_4_per_thread")
    missing = [v for v in wanted if v not in tasks_gpu["variants"]]
    if missing:
        raise Missing(f"tasks_gpu has no {', '.join(missing)} (recorded before them, or a student release)")
    pct = {v: _pct_of_copy(records, v, n) for v in wanted}
    profiled = [r for r in profile_rows_beside(tasks_gpu, NUMBER) if r["benchmark"] == "tasks" and r["size"] == n
                and r["variant"] == "horizontal"]
    if not profiled:
        raise Missing("no Nsight Compute row of the merged kernel (`kernellab profile 03` records it)")
    return {"n": n, "narrow": pct["horizontal"], "narrow_separate": pct["separate"],
            "wide": pct["horizontal_block256"], "wide_separate": pct["separate_block256"],
            "quad": pct["horizontal_4_per_thread"], "achieved": profiled[0]["achieved_occupancy_pct"],
            "theoretical": 100 * _registers_row(records, "horizontal_kernel", BLOCK)["occupancy"]}


def _profiled_kernels_values(records):
    """The recorded Nsight Compute rows of the merged and the four kernels (each kernel alone,
    caches flushed), beside the whole calls of the same size."""
    tasks = need(records, "tasks")
    profiled = [r for r in profile_rows_beside(tasks, NUMBER)
                if r["benchmark"] == "tasks" and r["variant"] in ("separate", "horizontal")]
    if not profiled:
        raise Missing("no Nsight Compute rows of tasks (`kernellab profile 03` on a GPU records them)")
    n = max(r["size"] for r in profiled)
    merged = [r for r in profiled if r["size"] == n and r["variant"] == "horizontal"]
    separate = [r for r in profiled if r["size"] == n and r["variant"] == "separate"]
    if len(merged) != 1 or len(separate) != 4:
        raise Missing(f"the profile of tasks at {n:,} lacks the merged kernel or one of the four")
    merged_us = merged[0]["gpu_time_ns"] / 1e3
    separate_us = sum(r["gpu_time_ns"] for r in separate) / 1e3
    each = [_times_us(one, n) for one in repeats_of(records, "tasks", NUMBER)]
    outside_merged = [t["horizontal"] - merged_us for t in each]
    outside_four = [t["separate"] - separate_us for t in each]
    longer = [m - f for m, f in zip(outside_merged, outside_four)]
    python = [t["horizontal"] - t[f"horizontal{LAUNCHES}"] for t in each]
    same = [i for i, one in enumerate(repeats_of(records, "tasks", NUMBER))   # as many calls per timing sample
            if row(one, "separate", n)["inner"] == row(one, "horizontal", n)["inner"]]
    same_outside = (f"with as many calls per sample in both ({len(same)} of {len(each)} repeats), "
                    f"{statistics.median(outside_merged[i] for i in same):.0f} us against "
                    f"{statistics.median(outside_four[i] for i in same):.0f}" if same else
                    "no repeat ran as many calls per sample in both")
    return {"prof_n": n, "merged_gpu_us": merged_us, "separate_gpu_us": separate_us,
            "kernel_ratio": separate_us / merged_us, "kernel_gap_pct": 100 * abs(separate_us / merged_us - 1),
            "merged_regs": merged[0]["registers_per_thread"],
            "driver_regs": _registers_row(records, "horizontal_kernel", BLOCK)["registers"],
            "merged_occ": merged[0]["achieved_occupancy_pct"], "repeats": len(each),
            "paced_merged_ms": typical_ms(row(tasks, "horizontal", n)),
            "paced_separate_ms": typical_ms(row(tasks, "separate", n)),
            **_spread("paced_ratio", [t["separate"] / t["horizontal"] for t in each]),
            **_spread("merged_outside_us", outside_merged), **_spread("separate_outside_us", outside_four),
            **_spread("longer_us", longer), "longer_in": sum(d > 0 for d in longer),
            **_spread("python_us", python), "python_in": sum(d > 0 for d in python),
            "same_outside": same_outside}


CLAIMS = [
    Claim("small_tasks_gain",
          "At {n:,} elements in the largest task, the launches alone take {merged_us:.0f} us for one "
          "launch and {separate_us:.0f} us for four (medians of {repeats} repeats). Within each repeat, one "
          "launch runs at {gain_lo:.2f}-{gain_hi:.2f}x the speed of four, median {measured:.2f}x ({faster}). "
          "In the same `tasks` rows the whole call less its launches alone, the launchers' Python, is "
          "{py_merged:.0f} us for the merged call ({py_merged_lo:.0f}-{py_merged_hi:.0f}) and {py_four:.0f} us "
          "for the four ({py_four_lo:.0f}-{py_four_hi:.0f}). The launch-or-bytes model, with one launch's host "
          "cost from the same runs ({launch_us:.1f} us, the median of {launch_repeats} repeats, "
          "{launch_lo:.1f}-{launch_hi:.1f}), predicts {predicted:.1f}x, {model}. Filled with each repeat's own "
          "launch cost, it charges the four launches {four_ratio:.2f}x what they took ({four_ratio_lo:.2f}-"
          "{four_ratio_hi:.2f}; too much in {four_over} of {repeats} repeats). The merged launch took "
          "{merged_over:.2f}x the model's one ({merged_over_lo:.2f}-{merged_over_hi:.2f}; more in "
          "{merged_more} of {repeats} repeats).",
          headline="small tasks: one launch at {measured:.2f}x the speed of four (the median of the repeats' "
                   "gains, {gain_lo:.2f}-{gain_hi:.2f}x, {faster}); the model predicted {predicted:.1f}x",
          values=_small_tasks_values,
          checks=(says("faster", "gain_lo", ">", 1, "faster in every repeat", "not faster in every repeat"),
                  says("model", "predicted", ">=", "gain_hi", "more than any repeat measured",
                       "no more than a repeat measured")),
          explains="the model charges every launch one figure, the host cost of a two-array launch timed "
                   "apart (`host_launch`), so it misses wherever a launch costs the host more or less: the "
                   "last two sentences split the miss between the four launches and the merged one, whose six "
                   "arrays the next claim prices."),
    Claim("merged_call_cost",
          "Per merged call at {n:,} elements, within each repeat of the `tasks` rows, the launcher's Python "
          "(checks, offsets, the block table) is the whole call less its launches alone. It takes "
          "{py_merged:.0f} us (repeats {py_merged_lo:.0f}-{py_merged_hi:.0f}), and the one launch "
          "{merged_us:.0f} us (medians). "
          "In each repeat that launch is {over_launch:.2f}x the same repeat's launch of the scale kernel "
          "(`host_launch`; the median, {over_launch_lo:.2f}-{over_launch_hi:.2f}x). Its {extra} array arguments "
          "beyond that launch's two cost about {extra_us:.0f} us, at the {per_array:.1f} us per array Lab 01 "
          "measured (the median of its repeats). The other {rest_us:.0f} us ({rest_us_lo:.0f}-{rest_us_hi:.0f}) "
          "these records do not split, more than the arrays' {extra_us:.0f} us in {rest_more} of {repeats} "
          "repeats; the launch also types and packs its two tuples of offsets. The launcher's Python {python} "
          "({python_ratio:.2f}x it, {python_ratio_lo:.2f}-{python_ratio_hi:.2f}). `launcher_prep`, timing "
          "the Python apart in its own harness, finds {prep_ratio:.2f}x its own launch "
          "({prep_ratio_lo:.2f}-{prep_ratio_hi:.2f}).",
          headline="one merged call at {n:,}: its launch {over_launch:.2f}x a two-array launch, the median of "
                   "the repeats (the launcher's Python {python})",
          values=_argument_values,
          checks=(says("python", "python_ratio_hi", "<", 1, "costs less than its launch in every repeat",
                       "does not cost less than its launch in every repeat"),)),
    Claim("slicing_is_its_own_cost",
          "Slicing `out` into four views on every call adds {slicing_us:.0f} us at {n:,} elements (the median "
          "of {repeats} repeats' differences, {slicing_lo:.0f}-{slicing_hi:.0f}; about {per_view_us:.0f} us per "
          "view): in the repeat with that difference the four-launch call takes {sliced_us:.0f} us on views and {separate_us:.0f} us "
          "with offsets, "
          "{resolved} ({spread_us:.1f} us). A device-array slice is a new array object built in Python, on every "
          "call; Lab 01, in another run, timed one slice alone at {lab01_slice:.0f} us.",
          headline="slicing out into 4 views: +{slicing_us:.0f} us per call at {n:,} elements ({resolved})",
          values=_slicing_values,
          checks=(says("resolved", "slicing_us", ">", "spread_us", "more than either measurement's p10-p90 spread",
                       "within either measurement's p10-p90 spread"),)),
    Claim("stops_paying",
          "Merging stops paying (a gain under 5%, the launches alone) at {stops_measured_at}, measured; the "
          "model says {stops_predicted_at}, {agree} ({apart:.1f}x apart; both judged on the medians of the "
          "repeats, the model filled with the median launch cost, {launch_us:.1f} us). At {stops_measured:,} "
          "elements the model gives the one launch {stop_model_us:.0f} us; it took {stop_merged_us:.0f} us, "
          "and its kernel alone {stop_kernel_us:.0f} us on the GPU ({stop_kernel_over_model:.1f}x the model): {slow}.",
          headline="merging stops paying at {stops_measured_at}; the model says {stops_predicted_at} ({agree}). "
                   "At {stops_measured:,} the merged kernel alone took {stop_kernel_over_model:.1f}x the model's "
                   "time: {slow}",
          values=_stops_values,
          checks=(says("agree", "apart", "<=", 2, "within one step of the sweep, which doubles the size",
                       "more than one step of the sweep apart"),
                  says("slow", "stop_kernel_over_model", ">", 1.5,
                       "it runs well below the copy ceiling, so the bytes set the time sooner than the model says",
                       "within 1.5x of it")),
          explains="the model moves the bytes at the copy ceiling; section 4 shows how much of it the "
                   "kernels reach on the GPU alone."),
    Claim("largest_tasks_neither_paced",
          "At {top_n:,} elements in the largest task one launch runs at {top_ratio:.2f}x the speed of four, "
          "the launches alone, the median of {top_repeats} repeats' own ratios ({top_lo:.2f}-{top_hi:.2f}x). "
          "Each timing sample starts from an idle GPU, so its first submit is exposed and shared among the "
          "sample's calls. In {top_unequal} of {top_repeats} repeats the two versions ran different numbers of "
          "calls per sample, so those repeats cannot separate that submit from the kernels. With as many in both "
          "({top_equal} of {top_repeats}): {top_same:.2f}x, {top_same_gap_pct:.1f}% from 1x ({top_same_verdict}). They take "
          "{top_separate_ms:.2f} ms (four) and {top_merged_ms:.2f} ms (one), each the median of its own repeats. The model, max(four launches, the bytes at copy speed), says "
          "{top_model_ms:.2f} ms at the medians of its inputs. Filled with each repeat's own, even the faster "
          "takes {top_over_model:.1f}x it (the median of the repeats), {paced}.",
          headline="{top_ratio:.2f}x at {top_n:,}, the median of {top_repeats} repeats; {top_same:.2f}x with as many "
                   "calls per sample in both ({top_same_verdict}; {top_equal} of {top_repeats} repeats); the faster "
                   "takes {top_over_model:.1f}x the model ({paced})",
          values=_largest_values,
          checks=(says("top_same_verdict", "top_same_gap_pct", "<=", 100 * (GAIN_THAT_PAYS - 1),
                       "within 5% of four launches", "more than 5% from four launches"),
                  says("paced", "top_over_model", ">", 1.5, "neither launches nor bytes at copy speed set the time",
                       "within 1.5x of the model")),
          explains="the model assumes each kernel moves its bytes at copy speed; the kernels' own speed on "
                   "the GPU alone is in the next two claims."),
    Claim("merged_kernel_keeps_pace",
          "On the GPU alone, in blocks of {block} (the lab's default), the size where the merged kernel fares "
          "worst against the four kernels is {worst_n:,} elements: {worst:.2f}x their speed, the median of "
          "{repeats} repeats ({worst_lo:.2f}-{worst_hi:.2f}x). "
          "The target is at least " + f"{KERNEL_PACE:.2f}" + "x at every size in every repeat ({verdict}: its "
          "lowest repeat, {lowest:.2f}x at {lowest_n:,}; under it: {under}). The same pair in blocks of 256 "
          "reads {lowest256:.2f}x in its lowest repeat, at {lowest256_n:,} elements: {wide_pace}. The merged kernel "
          "uses {merged_regs} registers per thread against at most {separate_regs} for the four (the "
          "driver's count). At blocks of 128 it may hold {merged_occ:.0%} of an SM's warp slots, the "
          "least of the four {separate_occ:.0%} ({occupancy}).",
          headline="the merged kernel alone, in blocks of {block}: at least {lowest:.2f}x the speed of the four at "
                   "every size in every repeat; in blocks of 256, {lowest256:.2f}x at {lowest256_n:,} "
                   "({wide_pace})",
          values=_kernel_pace_values,
          checks=(target("verdict", "lowest", ">=", KERNEL_PACE),
                  says("wide_pace", "lowest256", ">=", KERNEL_PACE,
                       f"the target, checked in blocks of {BLOCK} only, would hold here too",
                       f"the target, checked in blocks of {BLOCK} only, would not hold here"),
                  says("occupancy", "merged_occ", ">=", "separate_occ", "its registers cost it no occupancy",
                       "its registers cost it occupancy")),
          explains="each block finds its task with one to three integer comparisons, the same in every "
                   "thread of the block; the kernels' speed is set by their loads, as the next claim shows."),
    Claim("bytes_in_flight",
          "At {n:,} elements on the GPU alone (medians of the repeats), the merged kernel in blocks of 128 "
          "moves {narrow:.0f}% of the copy ceiling (the four: {narrow_separate:.0f}%). In blocks of 256 it "
          "moves {wide:.0f}% (the four: {wide_separate:.0f}%), and with 4 elements per thread "
          "{quad:.0f}% ({verdict}). Under Nsight Compute the blocks of 128 kept {achieved:.0f}% of the "
          "warp slots busy on average, where registers allow {theoretical:.0f}%.",
          headline="merged kernel, one element per thread: {narrow:.0f}% of copy in blocks of 128, {wide:.0f}% in "
                   "blocks of 256, {quad:.0f}% with 4 elements per thread in a quarter of the blocks",
          values=_in_flight_values,
          checks=(says("verdict", "quad", ">", "wide", "more loads per thread in a quarter of the blocks, more "
                       "of the copy ceiling", "more loads per thread in a quarter of the blocks did not help"),),
          explains="memory bandwidth is bytes in flight divided by memory latency (Little's law). A thread "
                   "with one element has 4 bytes in flight (8 for add), and the blocks of 128 kept only part of the "
                   "warp slots busy (the last sentence). A thread with 4 elements has 4 times the bytes in flight, "
                   "and that launch has a quarter of the blocks; the record cannot tell the two apart."),
    Claim("merged_call_was_slower_outside_its_kernel",
          "Under Nsight Compute at {prof_n:,} elements (each kernel alone, caches flushed) the merged kernel "
          "ran {merged_gpu_us:.0f} us and the four kernels {separate_gpu_us:.0f} us summed: {kernel_ratio:.2f}x "
          "the speed of the four, {kernel_gap_pct:.1f}% from 1x ({kernel_verdict}). Nsight Compute reports "
          "{merged_regs} registers per thread for the merged kernel, the driver {driver_regs}. The whole calls "
          "of that size took {paced_merged_ms:.2f} ms (one) and {paced_separate_ms:.2f} ms (four), each the median of "
          "its own repeats (against the launches alone, read the last sentence's repeat-by-repeat differences). "
          "Within each repeat the one ran at {paced_ratio:.2f}x the speed of the four "
          "({paced_ratio_lo:.2f}-{paced_ratio_hi:.2f}). The merged call spent {merged_outside_us:.0f} us outside "
          "its kernel (repeats {merged_outside_us_lo:.0f}-{merged_outside_us_hi:.0f}), the four "
          "{separate_outside_us:.0f} us outside theirs ({separate_outside_us_lo:.0f}-{separate_outside_us_hi:.0f}); "
          "{same_outside}. "
          "Repeat by repeat the merged call's is longer in {longer_in} of {repeats} ({outside}; the difference "
          "{longer_us_lo:+.0f} to {longer_us_hi:+.0f} us). Its whole call outlasts its launches alone in "
          "{python_in} of {repeats} repeats (the difference {python_us_lo:+.0f} to {python_us_hi:+.0f} us, "
          "median {python_us:+.0f}): {launches}.",
          headline="at {prof_n:,}: the kernels {kernel_verdict}; outside its kernel the merged call spent "
                   "{merged_outside_us:.0f} us, the four {separate_outside_us:.0f} us (medians; longer in "
                   "{longer_in} of {repeats} repeats); {same_outside}",
          values=_profiled_kernels_values,
          checks=(says("kernel_verdict", "kernel_gap_pct", "<=", 2, "as fast, within 2%",
                       "more than 2% apart"),
                  says("outside", "longer_us_lo", ">", 0, "every repeat", "not every repeat"),
                  says("launches", "python_us_lo", ">", 0, "in every repeat, as the launcher's Python would "
                       "make it", "at this size the repeats' scatter hides what the launcher's Python adds")),
          explains="a whole call's window opens before the launcher's first line: the launcher's Python "
                   "and any launch ahead of the first kernel count as outside it."),
]
