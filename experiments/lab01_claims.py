"""Lab 01's claims: what the discussion says, each sentence checked against the records. A finding
reads the median of the recorded repeats and prints their range; a target reads the worst repeat.
Lab 03's claims read `per_array_us` too, on the declaration."""

from __future__ import annotations

import numpy as np

from kernellab.course.claims import Claim, course_solution, need, repeats_of, row, says, states, target, typical_ms

from experiments.lab01_constants import INSTRUMENT_BUDGET_US
from experiments.lab01_measure import INSTRUMENTS, floor_model, in_each_repeat, one_launch_us, typical_record


def _median(values) -> float:
    return float(np.median(values))


def _over_repeats(figures, digits: int = 1) -> str:
    """Where a figure's median comes from: "median of 3 repeats, 3.9-5.0", or "one run" (live)."""
    if len(figures) == 1:
        return "one run"
    return f"median of {len(figures)} repeats, {min(figures):.{digits}f}-{max(figures):.{digits}f}"


def method_repeats(records: dict, method: str) -> list[float]:
    """A launch method's host or GPU microseconds in each recorded repeat."""
    need(records, "launch_methods", "methods", method, "us")
    return in_each_repeat(records, "launch_methods", "methods", method, "us")


def method_us(records: dict, method: str) -> float:
    """A launch method's microseconds, the median of the repeats."""
    return _median(method_repeats(records, method))


def per_array_fits(records: dict) -> list[tuple[float, float]]:
    """(host submit per array argument, with none) of each repeat: the least-squares line through
    its sweep."""
    need(records, "arguments", "by_count")
    fits = []
    for arguments in repeats_of(records, "arguments", "01"):
        by_count = arguments["by_count"]
        slope, intercept = np.polyfit([r["arrays"] for r in by_count], [r["us"] for r in by_count], 1)
        fits.append((float(slope), float(intercept)))
    return fits


def per_array_us(records: dict) -> tuple[float, float]:
    """(host submit per array argument, with none): the fitted line of the repeat whose slope is
    the median (the lower middle of an even count), so the two figures are one line's."""
    fits = sorted(per_array_fits(records))
    return fits[(len(fits) - 1) // 2]


def _launch_values(records):
    """Each method's median over the repeats (three with their range); the targets on the worst
    repeat (the slowest replay, the smallest plain-over-replay ratio), as the benchmark judges them."""
    host, gpu = method_us(records, "plain, host submit"), method_us(records, "plain, GPU side (queue full)")
    empty, pre = method_us(records, "empty kernel, host submit"), method_us(records, "prebuilt, host submit")
    sync = method_us(records, "synchronized")
    replays = method_repeats(records, "graph replay, GPU events")
    hosts = method_repeats(records, "plain, host submit")
    ratios = [h / r for h, r in zip(hosts, replays)]
    empty_pcts = [100 * e / h for e, h in zip(method_repeats(records, "empty kernel, host submit"), hosts)]
    waits = [s - h for s, h in zip(method_repeats(records, "synchronized"), hosts)]   # within each repeat
    ranges = {f"{key}_{end}": pick(method_repeats(records, method))
              for key, method in (("host", "plain, host submit"), ("empty", "empty kernel, host submit"),
                                  ("pre", "prebuilt, host submit"))
              for end, pick in (("lo", min), ("hi", max))}
    return {"host": host, "host_span": _over_repeats(hosts), "gpu": gpu, "idle": 100 * (1 - gpu / host), "pre": pre, "empty": empty,
            "empty_pct": _median(empty_pcts), "empty_pct_lo": min(empty_pcts), "empty_pct_hi": max(empty_pcts),
            "waits": _median(waits), "waits_lo": min(waits), "waits_hi": max(waits), "sync": sync, "host_over_gpu": host / gpu,
            "repeats": len(replays), "replay": max(replays),
            "worst_of": f"the worst of {len(replays)} repeats" if len(replays) > 1 else "one run", "ratio": min(ratios), **ranges,
            "replay_max": need(records, "launch_methods", "targets", "replay_us_max"),
            "ratio_min": need(records, "launch_methods", "targets", "ratio_min")}


def _profile_values(records):
    """A launch under cProfile against the same launch unprofiled: each the median of the repeats,
    and their ratio within each repeat (the host's pace drifts between repeats), its median and range."""
    profile = need(records, "launch_profile")
    profiled = in_each_repeat(records, "launch_profile", "profiled_us_per_launch")
    host = method_repeats(records, "plain, host submit")
    ratios = [p / h for p, h in zip(profiled, host)]
    return {"launches": profile["launches"], "profiled": _median(profiled), "host": _median(host),
            "profiled_ratio": _median(ratios), "ratio_lo": min(ratios), "ratio_hi": max(ratios)}


def _host_array_values(records):
    """The fitted cost per array argument (median and range of the repeats), its line's intercept
    against the launches with no array (their range over the repeats), and the smallest host array
    against a device array (medians)."""
    fits = per_array_fits(records)
    slope, none = per_array_us(records)
    measured_none = [r["us"] for arguments in repeats_of(records, "arguments", "01")
                     for r in arguments["by_count"] if r["arrays"] == 0]
    smallest = min(typical_record(records, "arguments")["host_arrays"], key=lambda r: r["bytes"])
    slopes = [f[0] for f in fits]
    return {"per_array": slope, "none": none, "per_array_lo": min(slopes), "per_array_hi": max(slopes),
            "per_array_span": _over_repeats(slopes), "bytes": int(smallest["bytes"]),
            "none_lo": min(measured_none), "none_hi": max(measured_none),
            "host": smallest["host"]["us"], "device": smallest["device"]["us"],
            "host_over_device": smallest["host"]["us"] / smallest["device"]["us"]}


def _slope_values(records):
    """The fitted lines of every recorded repeat: each repeat's slope differs by more than one
    fit's error (the host's pace), so the claim prints the range, never one repeat's."""
    fits = [r["fits"] for r in repeats_of(records, "kernel_count", "01")]
    eager, graph = [f["eager"]["per_launch_us"] for f in fits], [f["graph"]["per_launch_us"] for f in fits]
    fixed = [f["eager"]["fixed_us"] for f in fits]
    single = [r["eager_us"] for counts in repeats_of(records, "kernel_count", "01") for r in counts["rows"]
              if r["count"] == 1]
    return {"eager": float(np.median(eager)), "graph": float(np.median(graph)),
            "eager_span": _over_repeats(eager), "graph_span": _over_repeats(graph, 2),
            "replay_gain": min(eager) / max(graph), "fixed_lo": min(fixed),
            "fixed_to": f" to {max(fixed):.0f}" if len(fits) > 1 else "",
            "fits": f"{len(fits)} repeats" if len(fits) > 1 else "one run",
            "single": f"{min(single):.0f}-{max(single):.0f}" if len(single) > 1 else f"{single[0]:.0f}"}


def _rows_values(records):
    rows = need(records, "merge_rows")
    n = min(rows["sizes"])
    separate, sliced = row(rows, "separate", n), row(rows, "separate_sliced", n)
    count = separate["launches"]                 # one launch per row: the rows of the recording
    one = one_launch_us(rows, "merged")          # one launch of the batch, same arguments, same run
    sep, sliced_ms = typical_ms(separate), typical_ms(sliced)
    return {"n": n, "rows": count, "one": one, "model": count * one / 1e3, "sep": sep, "sliced": sliced_ms,
            "sep_lo": min(separate.get("repeat_ms") or [sep]), "sep_hi": max(separate.get("repeat_ms") or [sep]),
            "slice_us": 1e3 * (sliced_ms - sep) / count,
            "model_off": max(sep / (count * one / 1e3), (count * one / 1e3) / sep)}


def _merged_values(records):
    """How far, from the smallest size on, one launch of the batch stays within 2x of its fastest
    size, against the floor model's crossover per row (the figure's, from the course's solution)."""
    rows = need(records, "merge_rows")
    one = one_launch_us(rows, "merged")
    count = row(rows, "separate", min(rows["sizes"]))["launches"]
    upto = 0
    for size in sorted(rows["sizes"]):
        if 1e3 * typical_ms(row(rows, "merged", size)) > 2 * one:
            break
        upto = size
    crossover = floor_model(course_solution("01"), rows, "merged")[2]
    return {"rows": count, "one": one, "upto": upto, "crossover_row": -(-crossover // count)}


def _around_values(records):
    """Each step's median over the repeats (the sliced launch with its range)."""
    need(records, "python_around_launch", "steps")
    steps = typical_record(records, "python_around_launch")["steps"]
    launch, sliced = steps["launch with a row index"]["us"], steps["launch on slices"]["us"]
    each_sliced = in_each_repeat(records, "python_around_launch", "steps", "launch on slices", "us")
    return {"launch": launch, "slice": steps["slice x[row]"]["us"], "repeats": len(each_sliced),
            "alloc": steps["allocate a row"]["us"], "sliced": sliced, "ratio": sliced / launch,
            "around": steps["slice x[row]"]["us"] + steps["allocate a row"]["us"], "sliced_extra": sliced - launch,
            "sliced_lo": min(each_sliced), "sliced_hi": max(each_sliced),
            "parts": launch + 2 * steps["slice x[row]"]["us"]}


def _wrapper_values(records):
    """Every repeat's moves against its control (WRAPPER_METHOD); the target on the worst repeat."""
    repeats = []
    for record in repeats_of(records, "wrapper_overhead", "01"):
        before = need(record, "plain_over_control", "before")
        ratios = need(record, "ratios")
        repeats.append({"record": 100 * (ratios["after_record_launches"] - 1),
                        "capture": 100 * (ratios["after_capture"] - 1), "ratio": before["median"],
                        "spread": 100 * (before["p90"] - before["p10"]) / before["median"]})
    worst = max(repeats, key=lambda m: max(m["record"], m["capture"]))
    return {**worst, "repeats": len(repeats), "worst": max(worst["record"], worst["capture"]),
            "target_pct": 100 * need(records, "wrapper_overhead", "target", "max_overhead")}


INSTRUMENT_WORDS = {"record_launches": "record_launches", "timeline": "a Timeline",
                    "poisoned_allocations": "the grader's poisoned allocations"}


def _while_on_values(records):
    """Each instrument's cost to a plain launch while open, the worst repeat's; where the record
    timed it after settling launches (`opening_us`), the costliest opening too, in words."""
    repeats = [need(r, "while_on") for r in repeats_of(records, "wrapper_overhead", "01")]
    costs = {name: max(r[name]["cost_us"] for r in repeats) for name in INSTRUMENTS}
    settled = all("opening_us" in r[name] for r in repeats for name in INSTRUMENTS)
    opening = ""
    if settled:
        name, worst = max(((name, max(r[name]["opening_us"] for r in repeats)) for name in INSTRUMENTS),
                          key=lambda pair: pair[1])
        opening = (f", each timed after its first {repeats[0][name]['settle_calls']} launches; opening one "
                   f"slows the launches right after it, {INSTRUMENT_WORDS[name]} the most: {worst:+.1f} us in all")
    return {**costs, "opening": opening,
            "largest": max(costs.values()), "budget": INSTRUMENT_BUDGET_US, "repeats": len(repeats)}


CLAIMS = [
    Claim("host_not_gpu",
          "A plain Numba launch costs the host {host:.1f} us ({host_span}); with the queue kept full the GPU spends "
          "{gpu:.2f} us per launch, {host_over_gpu:.0f}x less: between tiny kernels the GPU idles "
          "{idle:.0f}% of the time, {pace}.",
          headline="a plain Numba launch costs the host {host:.1f} us ({host_span}) and the GPU {gpu:.2f} us: {pace}",
          values=_launch_values,
          checks=(says("pace", "host_over_gpu", ">", 5, "the host sets the pace (more than 5x)",
                       "host and GPU within 5x of each other"),)),
    Claim("prebuilt_arguments",
          "An empty kernel with no arguments costs the host {empty:.1f} us ({empty_lo:.1f}-{empty_hi:.1f}), "
          "{empty_pct:.0f}% of a plain launch with one array ({host:.1f} us; the median of the repeats' own "
          "ratios, {empty_pct_lo:.0f}-{empty_pct_hi:.0f}%): {most}. Prebuilt arguments cut "
          "the submit to {pre:.1f} us ({pre_lo:.1f}-{pre_hi:.1f}), {less} (medians of {repeats} repeats).",
          headline="an empty launch with no arguments: {empty:.1f} us of the {host:.1f} us ({most}); prebuilt: "
                   "{pre:.1f} us",
          values=_launch_values,
          checks=(says("most", "empty_pct", ">", 50, "most of a launch is there before any argument",
                       "most of a launch is its argument"),
                  says("less", "pre", "<", "empty", "less than the empty launch: they also skip finding the "
                       "compiled kernel and its context, and typing", "no less than the empty launch"))),
    Claim("synchronized",
          "A synchronize after every launch costs {sync:.1f} us per launch (the median of the repeats). Within "
          "each repeat it adds {waits_lo:.1f}-{waits_hi:.1f} us to that repeat's plain submit, median {waits:.1f} us, "
          "{than} the GPU's own {gpu:.2f} us: {so}.",
          headline="a synchronize after every launch costs {sync:.1f} us per launch: {so}",
          values=_launch_values,
          checks=(says("than", "waits", ">", "gpu", "more than", "no more than"),
                  says("so", "waits", ">", "gpu", "the wait is longer than the kernel: it includes the round trip of the "
                       "launch reaching the GPU and the host noticing it finished",
                       "the wait is the GPU's work alone"))),
    Claim("graph_replay",
          "Replayed as a graph, a kernel costs {replay:.2f} us of GPU time (target: at most "
          "{replay_max:.0f} us, {replay_met}): {ratio:.0f}x less than a plain launch's host cost "
          "(target: at least {ratio_min:.0f}x, {ratio_met}); both in {worst_of}.",
          headline="graph replay {replay:.2f} us per kernel ({ratio:.0f}x less; {worst_of})",
          values=_launch_values,
          checks=(target("replay_met", "replay", "<=", "replay_max"), target("ratio_met", "ratio", ">=", "ratio_min")),
          explains="a replay leaves the host out: what remains is the GPU starting each captured kernel, "
                   "which differs between GPUs and drivers"),
    Claim("profiled_launch",
          "Under cProfile ({launches:,} launches) a plain launch costs the host {profiled:.0f} us, against "
          "{host:.1f} us unprofiled (medians of the repeats). Within each repeat it costs "
          "{ratio_lo:.1f}-{ratio_hi:.1f}x as much, median {profiled_ratio:.1f}x: {slowed}.",
          headline="under cProfile a launch costs {profiled_ratio:.1f}x as much (the median of the repeats' own "
                   "ratios, {ratio_lo:.1f}-{ratio_hi:.1f}x): {slowed}",
          values=_profile_values,
          checks=(says("slowed", "profiled_ratio", ">", 1.5, "read it for the calls a launch makes, not for time",
                       "its microseconds are close to an unprofiled launch's"),),
          explains="cProfile runs a hook at every Python call and return, and a Numba launch is dozens of "
                   "small Python calls (the profile's functions_seen)"),
    Claim("per_argument",
          "Each array argument adds {per_array:.1f} us to the host submit (the slope of a fitted line, "
          "{per_array_span}), "
          "{size}: a 1-D array is seven values (5 + 2 per dimension: data, shape and strides among them), "
          "marshalled in Python at every launch. The line's intercept, {none:.1f} us, is {above} the "
          "{none_lo:.1f}-{none_hi:.1f} us a launch with no array took: {line}.",
          headline="each array argument adds {per_array:.1f} us to a launch ({per_array_span}; {size})",
          values=_host_array_values,
          checks=(says("size", "per_array", ">", 1, "more than a microsecond each", "under a microsecond each"),
                  says("above", "none", ">", "none_hi", "above", "no higher than the top of"),
                  says("line", "none", ">", "none_hi", "the points do not lie on one line, so read the slope, "
                       "not the intercept", "the line meets the launch with no array"))),
    Claim("host_array_trap",
          "A {bytes}-byte NumPy host array as an argument costs {host:.0f} us per launch against {device:.0f} us "
          "for a device array ({host_over_device:.1f}x; medians of the repeats): {why}.",
          headline="a {bytes}-byte NumPy host array: {host:.0f} us per launch, a device array {device:.0f} us "
                   "({why})",
          values=_host_array_values,
          checks=(says("why", "host_over_device", ">", 3, "an implicit copy each way, and a wait for each",
                       "the implicit copies cost little here"),)),
    Claim("kernel_count_slope",
          "Against the number of tiny kernels, eager launches cost {eager:.1f} us each (the fitted slope, "
          "{eager_span}); replayed as a graph, {graph:.2f} us ({graph_span}): even the slowest replay is {replay_gain:.0f}x {gain}.",
          headline="the slope: {eager:.1f} us per eager launch, {graph:.2f} us per replayed kernel",
          values=_slope_values,
          checks=(says("gain", "replay_gain", ">", 10, "cheaper than the fastest eager slope (more than 10x)",
                       "cheaper than the fastest eager slope, less than 10x"),)),
    Claim("kernel_count_intercept",
          "The eager line's intercept is {fixed_lo:.0f}{fixed_to} us ({fits}): "
          "{sign}. The real fixed cost, one synchronize, is at most the count = 1 row's total "
          "({single} us, one launch included).",
          headline="the intercept: {fixed_lo:.0f}{fixed_to} us ({sign})",
          values=_slope_values,
          checks=(says("sign", "fixed_lo", ">", 0, "positive in every repeat, a fixed cost the fit resolves",
                       "not positive in every repeat, so the fit does not resolve a fixed cost"),),
          explains="the fit is dominated by the largest counts, where a 1 us change in the cost per launch moves "
                   "the total of 1,000 launches by 1,000 us, and the host's pace drifts that much inside one sweep"),
    Claim("rows_separately",
          "{rows} launches of one row each take {sep:.3f} ms at {n} elements per row (median of the repeats, "
          "{sep_lo:.3f}-{sep_hi:.3f}). The model, {rows} times one launch of the whole batch in the same run "
          "(its fastest size, {one:.1f} us), predicts "
          "{model:.3f} ms, {fit} ({model_off:.2f}x apart). Launched on slices (`x[row]`, `out[row]`) "
          "instead, the rows take {sliced:.3f} ms: {slice_us:.0f} us more per row in this run.",
          headline="{rows} one-row launches: {sep:.3f} ms, the model {model:.3f} ms ({fit})",
          values=_rows_values,
          checks=(says("fit", "model_off", "<=", 1.5, "within 1.5x of the measurement", "more than 1.5x off"),
                  states("sliced", ">", "sep"))),
    Claim("rows_merged_floor",
          "One 2D launch for all {rows} rows stays within 2x of its fastest size ({one:.1f} us) from the "
          "smallest size up to {upto:,} elements per row, {reach} the floor model's crossover "
          "({crossover_row:,} per row): {so}.",
          headline="one launch for all {rows} rows stays within 2x of its floor up to {upto:,} elements per row ({so})",
          values=_merged_values,
          checks=(says("reach", "upto", ">=", "crossover_row", "at or past", "short of"),
                  says("so", "upto", ">=", "crossover_row", "below the crossover, a batch costs one launch",
                       "the batch leaves its floor before the model's crossover"))),
    Claim("python_around_launch",
          "Around a launch that costs the host {launch:.1f} us, slicing a device array costs {slice:.1f} us "
          "and allocating a row-sized output {alloc:.1f} us (medians of {repeats} repeats), {around:.1f} us "
          "together, {than} the launch: {advice}. A launch on two fresh slices costs {sliced:.1f} us "
          "({sliced_lo:.0f}-{sliced_hi:.0f}), {more} the launch and two slices add up to ({parts:.0f} us); that "
          "is {ratio:.1f}x the launch with a row index, {sliced_extra:.0f} us more per launch in this run. A launch on new array objects also types and packs them afresh, which a launch "
          "on the same objects skips; this record does not time that part alone.",
          headline="one slice {slice:.1f} us, one allocation {alloc:.1f} us, around a launch of {launch:.1f} us: "
                   "{advice}",
          values=_around_values,
          checks=(says("than", "around", ">", "launch", "more than", "no more than"),
                  says("advice", "around", ">", "launch", "pass offsets and preallocate",
                       "slicing and allocating cost little beside the launch"),
                  says("more", "sliced", ">", "parts", "more than", "no more than"))),
    Claim("instruments_while_on",
          "While open, record_launches adds {record_launches:+.1f} us to a plain launch, a "
          "Timeline {timeline:+.1f} us and the grader's poisoned allocations {poisoned_allocations:+.1f} us "
          "(worst of {repeats} repeat(s), each against a bare launch in the same round{opening}; the traffic "
          "meter runs only in the simulator): the costliest adds {largest:+.1f} us (target: at most the {budget:.0f} us an "
          "open instrument may add, {verdict}).",
          values=_while_on_values,
          checks=(target("verdict", "largest", "<=", "budget"),),
          explains="each instrument wraps numba-cuda's launch entry point while it is open and notes the "
                   "launch (a Timeline also records two CUDA events on its stream), so a launch inside it "
                   "does more host work; none of them synchronizes"),
    Claim("instruments_cost_nothing",
          "Against a control taken in turn with it (the same kernel launched past numba-cuda's dispatcher "
          "entry point, which the hooks wrap), a plain launch moved {record:+.1f}% after record_launches and "
          "{capture:+.1f}% after a graph capture, in the worst of {repeats} repeat(s) (worst {worst:+.1f}%; "
          "target: at most {target_pct:+.0f}%, {met}); before them it cost {ratio:.2f}x its control, and that "
          "ratio's p10 to p90 spanned {spread:.1f}% of it.",
          values=_wrapper_values,
          checks=(target("met", "worst", "<=", "target_pct"),),
          explains="the dispatcher is restored after the hooks (the record says so), so both sides run "
                   "the same Python; what an instrument costs while it is open is the claim before this one"),
]
