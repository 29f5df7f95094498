"""Lab 03's experiments: four small tasks in four launches or in one, over task sizes 1K .. 64M.

Declared once, in `LAB` at the end (kernellab.course.protocol): `kernellab bench 03` (on a GPU)
validates every version, then times them over the sweep (the largest task's elements; the
others are 1/2, 1/4, 1/8 of it) paced by the host, as an eager caller runs them (`host_paced`);
the model says each call's time is its launches' submit time or its bytes, whichever is slower,
and the claims say where the recorded sweep bears that out. Beside it,
`host_launch` measures the host's cost of one launch in the same run, from which
`predicted_time_us` predicts each call, and where merging stops paying.
`separate_sliced` is the launch path the first version of this lab used (four device-array
views of `out` built per call), measured on its own: the cost of slicing in Python.
`kernellab tour 03` validates the versions on this device and draws the figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.course.claims import Claim, Missing, course_solution, need, repeats_of, row, says
from kernellab.gpu import checks, timing
from kernellab.show import plots

NUMBER = "03"
ALPHA = 2.5
SIZES = [2**k for k in range(10, 27)]      # the largest task: 1K .. 64M elements, until the bytes
                                           # outlast four launches' submit time
TOUR_SIZES = [2**10, 2**16, 2**22]
SIM_SIZES = [301]                          # tasks of 301, 150, 75 and 37 elements
GAIN_THAT_PAYS = 1.05                      # merging "pays" while it saves more than 5%
INPUTS = ("x0", "x1", "z1", "x2", "x3")
BLOCK = 128                                # every launcher's default block (the lab's DEFAULT_BLOCK)
LAUNCHES_TIMED = 100                       # back-to-back launches per sample of `host_launch`
MERGED_ARRAYS = 6                          # x0, x1, z1, x2, x3 and out: the merged launch's arrays
SCALE_ARRAYS = 2                           # x0 and out: the arrays of the launch `host_launch` times


def task_sizes(n):
    """The four tasks at sweep value n: different sizes, as independent work usually is."""
    return (n, n // 2, n // 4, n // 8)


def tasks_inputs(rng, n) -> dict:
    """Host inputs of the four tasks at sweep value n (nonzero float32)."""
    n0, n1, n2, n3 = task_sizes(n)
    return {"x0": checks.nonzero(rng, n0), "x1": checks.nonzero(rng, n1),
            "z1": checks.nonzero(rng, n1), "x2": checks.nonzero(rng, n2),
            "x3": checks.nonzero(rng, n3)}


def tasks_reference(lab, host: dict):
    """The float64 result every version must compute (the lab's reference_tasks)."""
    return lab.reference_tasks(*(host[k] for k in INPUTS), ALPHA)


def separate_sliced(lab, x0, x1, z1, x2, x3, alpha, out, block=BLOCK):
    """The four launches of `separate_tasks`, each on a view of `out` (`split_output`) at offset
    0: the launch path the first version of this lab used. Each view is a new device-array object
    built in Python on every call; the kernels and bytes are the same."""
    sizes = lab.task_sizes_of(x0, x1, z1, x2, x3)
    views = lab.split_output(out, sizes)
    kernels = lab.task_kernels(x0, x1, z1, x2, x3, np.float32(alpha))
    for size, view, (kernel, inputs) in zip(sizes, views, kernels):
        if size:
            kernel[lab.blocks_for(size, block), block](*inputs, view, 0)
    return out


def tasks_benchmark(lab) -> harness.Benchmark:
    def runner(launcher):
        return lambda d, out: launcher(*(d[k] for k in INPUTS), ALPHA, out=out)

    def ledger(fused):
        return lambda n: lab.tasks_ledger(task_sizes(n), fused=fused)

    variants = [harness.Variant(name, runner(launcher), why, ledger=ledger(name == "horizontal"))
                for name, (launcher, why) in lab.VARIANTS.items()]
    variants.append(harness.Variant(
        "separate_sliced", lambda d, out: separate_sliced(lab, *(d[k] for k in INPUTS), ALPHA, out),
        "the four launches on four views of out built per call (split_output): what slicing a "
        "device array costs in Python, measured on its own", ledger=ledger(False)))
    return harness.Benchmark(
        name="tasks", axis="elements in the largest task", sizes=SIZES, sim_sizes=SIM_SIZES,
        tour_sizes=TOUR_SIZES, make_inputs=tasks_inputs,
        reference=lambda host: tasks_reference(lab, host), variants=variants, rtol=1e-6,
        host_paced=True)


def benchmarks(lab, torch) -> list[harness.Benchmark]:
    return [tasks_benchmark(lab)]


def measure_host_launch(lab) -> dict:
    """What one launch costs the host: the given scale kernel on a 1-element task, launched
    back to back with the host's submit inside the window (the GPU waits for the host)."""
    x, out = checks.poisoned(1), checks.poisoned(1)
    alpha = np.float32(ALPHA)

    def launch():
        lab.scale_kernel[1, BLOCK](alpha, x, out, 0)

    measured = timing.time_gpu(lambda: [launch() for _ in range(LAUNCHES_TIMED)], warmup=3,
                               reps=30, hide_host=False)
    per_launch = 1e3 / LAUNCHES_TIMED
    return {"us": measured.median_ms * per_launch, "p10_us": measured.p10_ms * per_launch,
            "p90_us": measured.p90_ms * per_launch, "reps": len(measured.samples_ms),
            "arrays": SCALE_ARRAYS, "launches_per_sample": LAUNCHES_TIMED,
            "how": "scale_kernel on 1 element, 100 launches back to back, host submit inside",
            "provenance": reference.provenance()}


def validate(lab, seed: int) -> list[str]:
    """What the benchmark's validation does not cover: the block the declaration states is the
    launchers' default, and the block table of the sweep's tasks covers each task exactly."""
    if lab.DEFAULT_BLOCK != BLOCK:
        raise AssertionError(f"the launchers' DEFAULT_BLOCK is {lab.DEFAULT_BLOCK}; LAB declares {BLOCK}")
    for n in (*SIM_SIZES, *SIZES):
        starts = [int(s) for s in lab.task_block_starts(task_sizes(n), BLOCK)]
        owned = np.diff(starts) * BLOCK - np.array(task_sizes(n))
        if starts[0] != 0 or not ((0 <= owned) & (owned < BLOCK)).all():
            raise AssertionError(f"task_block_starts({task_sizes(n)}, {BLOCK}) = {starts}: a task "
                                 f"owns too few or too many blocks")
    return ["declared block", "block tables of the sweep"]


# --- the crossover: measured against the model ----------------------------------------------------

def offsets_record(records: dict) -> dict:
    """The `tasks` record, if it was measured with the launchers that pass offsets (it has the
    `separate_sliced` variant beside them); `Missing` for a recording from before."""
    tasks = need(records, "tasks")
    if "separate_sliced" not in tasks["variants"]:
        raise Missing("tasks was recorded before the launchers passed offsets instead of slicing "
                      "(no separate_sliced variant): `kernellab bench 03` re-records it")
    return tasks


def crossover(lab, records: dict) -> dict:
    """Speed-up per size, measured and predicted from the host's cost of one launch and the copy
    bandwidth of the same run, and the first size where merging stops paying."""
    tasks = records["tasks"]
    launch_us, gbps = records["host_launch"]["us"], tasks["copy_gbps"]
    rows = []
    for n in tasks["sizes"]:
        separate, merged = harness.row(tasks, "separate", n), harness.row(tasks, "horizontal", n)
        if not (separate["ok"] and merged["ok"]):
            continue  # a version that failed validation has no time to compare
        predicted = (lab.predicted_time_us(4, separate["bytes"], launch_us, gbps)
                     / lab.predicted_time_us(1, merged["bytes"], launch_us, gbps))
        rows.append({"n": n, "separate_ms": separate["median_ms"], "horizontal_ms": merged["median_ms"],
                     "measured_speedup": separate["median_ms"] / merged["median_ms"],
                     "predicted_speedup": predicted})

    def first_below(key):
        return next((r["n"] for r in rows if r[key] < GAIN_THAT_PAYS), None)

    return {"gain_that_pays": GAIN_THAT_PAYS, "rows": rows,
            "stops_paying_at_measured": first_below("measured_speedup"),
            "stops_paying_at_predicted": first_below("predicted_speedup"),
            "launch_us": launch_us, "copy_gbps": gbps}


def key_figure(lab, records: dict) -> str:
    """The tour's one line: the gain at the smallest size and where merging stops paying."""
    try:
        offsets_record(records)
        need(records, "host_launch")
    except Missing as missing:
        return f"awaiting data: {missing}"
    summary = crossover(lab, records)
    if not summary["rows"]:
        return "no validated timings of both versions"
    smallest, stops = summary["rows"][0], summary["stops_paying_at_measured"]
    return (f"one launch {smallest['measured_speedup']:.1f}x faster than four at "
            f"{smallest['n']:,} elements (model {smallest['predicted_speedup']:.1f}x); stops paying "
            f"at {f'{stops:,}' if stops else 'no size in the sweep'}")


def speedup_figure(lab, records: dict, figures_dir: Path) -> Path:
    tasks = records["tasks"]
    summary = crossover(lab, records)
    fig, (ax_time, ax_gain) = plots.new_figure("Four tasks: four launches or one (host-paced)",
                                               tasks, ncols=2)
    plots.time_vs_size(ax_time, tasks)
    ax_time.axhline(summary["launch_us"] / 1e3, color="C3", linestyle="--",
                    label=f"one launch, host-paced ({summary['launch_us']:.1f} us, same run)")
    ax_time.legend()
    x = [r["n"] for r in summary["rows"]]
    ax_gain.plot(x, [r["measured_speedup"] for r in summary["rows"]], marker="o", label="measured")
    ax_gain.plot(x, [r["predicted_speedup"] for r in summary["rows"]], linestyle="--",
                 label=f"predicted: max(launches x {summary['launch_us']:.1f} us, bytes / copy bandwidth)")
    ax_gain.axhline(GAIN_THAT_PAYS, color="grey", linestyle=":", label=f"{GAIN_THAT_PAYS}x: stops paying")
    ax_gain.set_xscale("log", base=2)
    ax_gain.set_xlabel(tasks["axis"])
    ax_gain.set_ylabel("separate time / horizontal time")
    ax_gain.grid(True, which="both", alpha=0.3)
    ax_gain.legend()
    return plots.save(fig, "lab03_speedup", figures_dir)


# --- claims: what the discussion says, checked against the records -----------------------------
# (the models a claim compares with are the solutions', so a claim never depends on a student's
# stub; every claim reads a recording made with the launchers that pass offsets)

def _crossover_values(records):
    offsets_record(records)
    launch = need(records, "host_launch")
    summary = crossover(course_solution(NUMBER), records)
    if not summary["rows"]:
        raise Missing("tasks has no validated timings of both versions")
    smallest = summary["rows"][0]
    return {"n": smallest["n"], "measured": smallest["measured_speedup"],
            "predicted": smallest["predicted_speedup"], "launch_us": launch["us"],
            "separate_us": 1e3 * smallest["separate_ms"], "merged_us": 1e3 * smallest["horizontal_ms"],
            "over_launch": 1e3 * smallest["horizontal_ms"] / launch["us"],
            "stops_measured": summary["stops_paying_at_measured"],
            "stops_predicted": summary["stops_paying_at_predicted"],
            "stops_measured_at": _size_or_never(summary["stops_paying_at_measured"]),
            "stops_predicted_at": _size_or_never(summary["stops_paying_at_predicted"]),
            "apart": _apart(summary["stops_paying_at_measured"], summary["stops_paying_at_predicted"]),
            **_gain_per_repeat(records, smallest["n"])}


def _gain_per_repeat(records, n) -> dict:
    """Four launches over one at size n in each recorded repeat: a host-paced call's time moves
    between repeats by more than the gain, so the claim gives the range, each repeat on its own."""
    gains = [row(tasks, "separate", n)["median_ms"] / row(tasks, "horizontal", n)["median_ms"]
             for tasks in repeats_of(records, "tasks", NUMBER)]
    return {"gain_lo": min(gains), "gain_hi": max(gains), "repeats": len(gains)}


def _apart(measured, predicted):
    """How far apart two crossover sizes are (>= 1), or Missing where one never comes."""
    if not (measured and predicted):
        raise Missing("merging never stops paying within the sweep, measured or predicted")
    return max(measured / predicted, predicted / measured)


def _largest_values(records):
    """The largest task size: both calls against the launch-or-bytes model of the same run."""
    tasks, launch = offsets_record(records), need(records, "host_launch")
    n = max(tasks["sizes"])
    separate, merged = row(tasks, "separate", n), row(tasks, "horizontal", n)
    model_ms = max(4 * launch["us"] / 1e3, separate["bytes"] / tasks["copy_gbps"] / 1e6)
    return {"top_n": n, "top_ratio": separate["median_ms"] / merged["median_ms"],
            "top_separate_ms": separate["median_ms"], "top_merged_ms": merged["median_ms"],
            "top_model_ms": model_ms,
            "top_over_model": min(separate["median_ms"], merged["median_ms"]) / model_ms}


def _size_or_never(n):
    return f"{n:,} elements in the largest task" if n else "no size of the sweep"


def _argument_values(records):
    values = _crossover_values(records)
    per_array, _ = protocol.experiment("01").per_array_us(need(records, "lab01"))
    extra = MERGED_ARRAYS - SCALE_ARRAYS
    return {**values, "per_array": per_array, "arrays": MERGED_ARRAYS, "extra": extra,
            "extra_us": extra * per_array,
            "rest_us": values["merged_us"] - values["launch_us"] - extra * per_array,
            "rest_over_launch": (values["merged_us"] - values["launch_us"] - extra * per_array)
                                / values["launch_us"]}


def _slicing_values(records):
    tasks = offsets_record(records)
    n = min(tasks["sizes"])
    separate, sliced = row(tasks, "separate", n), row(tasks, "separate_sliced", n)
    slicing_us = 1e3 * (sliced["median_ms"] - separate["median_ms"])
    return {"n": n, "separate_us": 1e3 * separate["median_ms"], "sliced_us": 1e3 * sliced["median_ms"],
            "slicing_us": slicing_us, "per_view_us": slicing_us / 4}


CLAIMS = [
    Claim("small_tasks_gain",
          "At {n:,} elements in the largest task one launch takes {merged_us:.0f} us against {separate_us:.0f} us "
          "for four, as an eager caller waits for them (each row its worst repeat): {measured:.2f}x the speed of "
          "four; each repeat on its own, {gain_lo:.2f}-{gain_hi:.2f}x over {repeats} ({faster}). The "
          "launch-or-bytes model, from one launch's host cost measured in the same run ({launch_us:.1f} us), "
          "predicts {predicted:.1f}x, {model}.",
          headline="4 small tasks in one launch: {gain_lo:.2f}-{gain_hi:.2f}x the speed of 4 launches at {n:,} "
                   "elements ({repeats} repeats)",
          values=_crossover_values,
          checks=(says("faster", "gain_lo", ">", 1, "faster in every repeat", "not faster in every repeat"),
                  says("model", "predicted", ">=", "gain_hi", "more than any repeat measured",
                       "no more than a repeat measured")),
          explains="the model charges every launch the same host cost, that of a launch with two "
                   "array arguments; the merged launch passes six, and each array argument costs the "
                   "host microseconds to prepare (next line), so one merged call costs more than one "
                   "launch of the model."),
    Claim("merged_call_cost",
          "The merged call takes {merged_us:.0f} us at {n:,} elements, {over_launch:.1f}x one launch of "
          "the scale kernel ({launch_us:.1f} us): its {extra} array arguments beyond that launch's two "
          "cost about {extra_us:.0f} us at the {per_array:.1f} us per array Lab 01 measured, which "
          "leaves {rest_us:.0f} us ({rest_over_launch:.1f}x a launch) for the Python in the launcher "
          "(two small tables, no slices): a merged launcher is not free, {beats} four launches "
          "({separate_us:.0f} us).",
          values=_argument_values,
          checks=(says("beats", "merged_us", "<", "separate_us", "yet it still beats", "and it loses to"),),
          explains="the first form of this claim expected the launcher's Python to cost less than one "
                   "launch; the 2026-12-01 recording (3 repeats, host-paced) measured more, so the "
                   "claim states the measured split instead"),
    Claim("slicing_is_its_own_cost",
          "Slicing `out` into the four views the first version of this lab launched on {costs} "
          "{slicing_us:.0f} us per call at {n:,} elements (about {per_view_us:.0f} us per view): the "
          "four launches take {sliced_us:.0f} us on views and {separate_us:.0f} us with offsets. A "
          "device-array slice is a new array object built in Python, on every call.",
          values=_slicing_values,
          checks=(says("costs", "slicing_us", ">", 0, "costs", "saves"),)),
    Claim("stops_paying",
          "Merging stops paying (a gain under 5%) at {stops_measured_at}, measured; the model says "
          "{stops_predicted_at}, {agree} ({apart:.1f}x apart).",
          values=_crossover_values,
          checks=(says("agree", "apart", "<=", 4, "within 4x of the measurement", "more than 4x off"),)),
    Claim("largest_tasks_neither_paced",
          "At {top_n:,} elements in the largest task one launch runs at {top_ratio:.2f}x the speed of four "
          "({top_verdict}): the calls take {top_separate_ms:.2f} ms (four launches) and {top_merged_ms:.2f} ms "
          "(one), while the model's max(four launches, the bytes at the copy bandwidth) is {top_model_ms:.2f} "
          "ms: even the faster call takes {top_over_model:.1f}x that, {paced}.",
          headline="{top_ratio:.2f}x at {top_n:,} ({top_verdict})",
          values=_largest_values,
          checks=(says("top_verdict", "top_ratio", "<", 1, "merging loses", "merging still pays"),
                  says("paced", "top_over_model", ">", 1.5, "more than 1.5x: neither the launches nor the bytes at "
                       "copy speed set these calls' time", "within 1.5x of the model")),
          explains="the model was written on the rule that a call takes its launches' submit time or its "
                   "bytes, whichever is slower; at the largest sizes both versions take several times the "
                   "time their bytes need at the copy bandwidth of the same run, and the merged kernel longer "
                   "than the four. What sets that time is not measured here (no Nsight Compute rows of "
                   "Lab 03 are recorded: `kernellab profile 03` on a GPU would show each kernel's DRAM "
                   "bytes and throughput)"),
]


LAB = protocol.Lab(
    number=NUMBER, title="horizontal fusion",
    kernels=(
        protocol.Kernel("scale_kernel", "1-D: one thread per element of task 0", block_size=BLOCK),
        protocol.Kernel("add_kernel", "1-D: one thread per element of task 1", block_size=BLOCK),
        protocol.Kernel("relu_kernel", "1-D: one thread per element of task 2", block_size=BLOCK),
        protocol.Kernel("square_kernel", "1-D: one thread per element of task 3", block_size=BLOCK),
        protocol.Kernel("horizontal_kernel",
                        "1-D: every task's blocks end to end, each block one task's part",
                        block_size=BLOCK),
    ),
    references=("reference_tasks",),
    validate=validate,
    benchmarks=benchmarks,
    measurements=(protocol.Measurement(
        "host_launch", measure_host_launch,
        "the host's cost of one launch, in the same run: the model's launch time"),),
    figures=(protocol.Figure("lab03_speedup", speedup_figure, needs=("tasks", "host_launch")),),
    claims=CLAIMS,
    key_figure=key_figure,
)
