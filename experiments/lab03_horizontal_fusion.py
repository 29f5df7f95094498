"""Lab 03's experiments: four small tasks in four launches or in one, over task sizes 1K .. 64M.

Declared once, in `LAB` at the end (kernellab.course.protocol): `kernellab bench 03` (on a GPU)
validates every version (the lab's VARIANTS, in blocks of 128 and 256, and the solution side's
SOLUTION_VARIANTS), then times them over the sweep (the largest task's elements; the others are
1/2, 1/4, 1/8 of it). Which part of a call each record times:
- `tasks`, paced by the host as an eager caller runs them (`host_paced`): each version's whole
  call (the launcher's Python, then its launches) and, as `<version>_launches`, its launches
  alone: taken from one call outside the window and replayed with the same kernels and
  arguments (kernellab.gpu.launches.replayable), so the window holds launch submits and kernels
  and none of the launcher's checks and tables. The one-against-four claims read these.
- `launcher_prep`: the launchers' Python per call, measured apart (a whole call against its
  replayed launches, in pairs: timing.time_host_beyond), median and p10-p90.
- `tasks_gpu`: each version's kernels on the GPU alone, the host's work held outside the window;
  the targets (the merged kernel at least KERNEL_PACE x the speed of the four at every size) and
  the merged-kernel claims read it, beside `registers` (each kernel's registers per thread and
  theoretical occupancy at each block) and the recorded Nsight Compute rows.
- `host_launch`: the host's cost of one launch in the same run, from which `predicted_time_us`
  predicts each call (its launches' submit time or its bytes, whichever is slower) and where
  merging stops paying.
`separate_sliced` is the launch path the first version of this lab used (four device-array
views of `out` built per call), measured on its own: the cost of slicing in Python.
`kernellab tour 03` validates the versions on this device and draws the figure;
`scripts/diagnose_lab03.py` times the largest sizes all three ways in under a minute.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol, reference, registers
from kernellab.course.claims import Claim, Missing, course_solution, need, repeats_of, row, says, target
from kernellab.gpu import checks, device, launches, timing
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


LAUNCHES = "_launches"                     # a variant's launches alone: `<variant>_launches`
PREP_SIZE = SIZES[0]                       # where `launcher_prep` times the launchers' Python
PREP_CALLS = 20                            # calls of each per sample of `launcher_prep`
KERNEL_PACE = 0.98                         # the merged kernel's target against the four, every size
SOLUTION_SIDE_KERNEL = "horizontal_4_per_thread_kernel"   # the solutions' only: not in LAB.kernels


def is_merged(variant: str) -> bool:
    """Whether a variant is a merged (one-launch) version: its ledger is the fused one."""
    return variant.startswith("horizontal")


def four_launches_beside(merged: str) -> str:
    """The four-launch version a merged one is judged against: the four in the same block."""
    return "separate_block256" if merged.endswith("_block256") else "separate"


def versions(lab) -> dict:
    """The lab's versions of the four tasks, {name: (launcher, why)}: VARIANTS, and the solution
    side's SOLUTION_VARIANTS where the module has them (the starter does not)."""
    return {**lab.VARIANTS, **getattr(lab, "SOLUTION_VARIANTS", {})}


def launcher_calls(lab) -> dict:
    """Every whole call the benchmarks time, by name: (call(device_inputs, out), why). Each is
    the lab's launcher as an eager caller makes it: its Python (checks, tables), then its launches."""
    def call(launcher):
        return lambda d, out: launcher(*(d[k] for k in INPUTS), ALPHA, out=out)

    calls = {name: (call(launcher), f"{why} (the whole call: the launcher's Python, then its launches)")
             for name, (launcher, why) in versions(lab).items()}
    calls["separate_sliced"] = (
        lambda d, out: separate_sliced(lab, *(d[k] for k in INPUTS), ALPHA, out),
        "the four launches on four views of out built per call (split_output): what slicing a "
        "device array costs in Python, measured on its own")
    return calls


def launches_alone(name: str, call, ledger) -> harness.Variant:
    """The launches `call` makes, taken once per input set outside the window and replayed in it
    (launches.replayable): the same kernels, configurations and argument objects, through
    numba-cuda's whole launch path, without the launcher's own Python."""
    def take(d, out):
        return launches.replayable(lambda: call(d, out)), out

    def replay(taken, out):
        taken()
        return out

    return harness.Variant(
        f"{name}{LAUNCHES}", replay,
        f"the launches of `{name}` alone: taken from its call once, outside the window, and "
        f"replayed with its own kernels and arguments; the launcher's Python is not in the "
        f"window (`launcher_prep` measures it apart)", ledger=ledger, setup=take)


def ledger_of(lab, variant: str):
    """The bytes a variant declares at sweep value n: the fused ledger for a merged one."""
    return lambda n: lab.tasks_ledger(task_sizes(n), fused=is_merged(variant))


def tasks_benchmark(lab) -> harness.Benchmark:
    """Host-paced, as an eager caller waits: every whole call, and each version's launches alone
    beside it."""
    calls = launcher_calls(lab)
    variants = [harness.Variant(name, call, why, ledger=ledger_of(lab, name))
                for name, (call, why) in calls.items()]
    variants += [launches_alone(name, calls[name][0], ledger_of(lab, name)) for name in versions(lab)]
    return harness.Benchmark(
        name="tasks", axis="elements in the largest task", sizes=SIZES, sim_sizes=SIM_SIZES,
        tour_sizes=TOUR_SIZES, make_inputs=tasks_inputs,
        reference=lambda host: tasks_reference(lab, host), variants=variants, rtol=1e-6,
        host_paced=True)


def kernels_benchmark(lab) -> harness.Benchmark:
    """The GPU alone: each version's whole call with the host's work held outside the window
    (the harness's hold kernel), so what is timed is the kernels, back to back."""
    calls = launcher_calls(lab)
    variants = [harness.Variant(name, calls[name][0],
                                f"{why}: GPU time only, the host's work held outside the window",
                                ledger=ledger_of(lab, name))
                for name, (_, why) in versions(lab).items()]
    return harness.Benchmark(
        name="tasks_gpu", axis="elements in the largest task", sizes=SIZES, sim_sizes=SIM_SIZES,
        tour_sizes=TOUR_SIZES, make_inputs=tasks_inputs,
        reference=lambda host: tasks_reference(lab, host), variants=variants, rtol=1e-6)


def benchmarks(lab, torch) -> list[harness.Benchmark]:
    return [tasks_benchmark(lab), kernels_benchmark(lab)]


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


def measure_launcher_prep(lab) -> dict:
    """The launchers' own Python per call, measured apart: each whole call's host time, the host
    time of its launches alone (replayed, as the `_launches` rows), and the difference, from
    paired samples (timing.time_host_beyond) at the sweep's smallest size."""
    rng = np.random.default_rng(0)
    host = tasks_inputs(rng, PREP_SIZE)
    d = {k: device.cuda().to_device(v) for k, v in host.items()}
    out = checks.poisoned(sum(task_sizes(PREP_SIZE)))
    found = {}
    for name, (call, _) in launcher_calls(lab).items():
        whole = lambda call=call: call(d, out)
        replay = launches.replayable(whole)
        split = timing.time_host_beyond(whole, replay, inner=PREP_CALLS, reps=30)
        found[name] = {"launches": len(replay.launches),
                       **{f"{part}_{stat}": getattr(t, f"{stat}_ms") * 1e3
                          for part, t in (("call_us", split["whole"]), ("launches_us", split["part"]),
                                          ("prep_us", split["rest"])) for stat in ("median", "p10", "p90")}}
    return {"size": PREP_SIZE, "calls_per_sample": PREP_CALLS, "reps": 30, "variants": found,
            "how": ("host time per call from an idle GPU, paired samples: call_us the whole call "
                    "(the launcher's Python and its launches), launches_us its launches alone "
                    "(replayed with its own kernels and arguments), prep_us the difference within "
                    "each pair: the launcher's Python (checks, sizes, offsets, tables)"),
            "provenance": reference.provenance()}


def measure_registers(lab) -> dict:
    """Registers per thread and theoretical occupancy of every declared kernel at each block the
    variants launch it with (the driver's figures on a GPU, ptxas's without one)."""
    blocks = sorted({BLOCK, lab.WIDE_BLOCK})
    names = [kernel.name for kernel in KERNELS]
    if hasattr(lab, SOLUTION_SIDE_KERNEL):                  # as horizontal_kernel's arguments
        names.append(SOLUTION_SIDE_KERNEL)
    signature = {SOLUTION_SIDE_KERNEL: lab.SIGNATURES["horizontal_kernel"]}
    shapes = [(name, block) for name in names for block in blocks]
    rows = registers.resources_rows([(getattr(lab, name), signature.get(name), block) for name, block in shapes])
    rows = [{"kernel": name, **row} for (name, _), row in zip(shapes, rows)]
    print(registers.table(rows))
    return {"provenance": reference.provenance(), "rows": rows}


def validate(lab, seed: int) -> list[str]:
    """What the benchmark's validation does not cover: the block the declaration states is the
    launchers' default, and the block tables of the sweep's tasks cover each task exactly at
    every block the variants launch with."""
    if lab.DEFAULT_BLOCK != BLOCK:
        raise AssertionError(f"the launchers' DEFAULT_BLOCK is {lab.DEFAULT_BLOCK}; LAB declares {BLOCK}")
    for block in (BLOCK, lab.WIDE_BLOCK):
        for n in (*SIM_SIZES, *SIZES):
            starts = [int(s) for s in lab.task_block_starts(task_sizes(n), block)]
            owned = np.diff(starts) * block - np.array(task_sizes(n))
            if starts[0] != 0 or not ((0 <= owned) & (owned < block)).all():
                raise AssertionError(f"task_block_starts({task_sizes(n)}, {block}) = {starts}: a task "
                                     f"owns too few or too many blocks")
    return ["declared block", "block tables of the sweep"]


# --- the crossover: measured against the model ----------------------------------------------------

def launches_record(records: dict) -> dict:
    """The `tasks` record, if it times the launches alone beside the whole calls (a
    `horizontal_launches` variant); `Missing` for a recording from before."""
    tasks = need(records, "tasks")
    if f"horizontal{LAUNCHES}" not in tasks["variants"]:
        raise Missing("tasks was recorded before the launches were timed apart from the launchers' "
                      "Python (no horizontal_launches variant): `kernellab bench 03` re-records it")
    return tasks


def crossover(lab, records: dict, suffix: str = LAUNCHES) -> dict:
    """Speed-up per size of `separate<suffix>` over `horizontal<suffix>` (the launches alone by
    default; "" for the whole calls), measured and predicted from the host's cost of one launch
    and the copy bandwidth of the same run, and the first size where merging stops paying."""
    tasks = records["tasks"]
    launch_us, gbps = records["host_launch"]["us"], tasks["copy_gbps"]
    rows = []
    for n in tasks["sizes"]:
        separate = harness.row(tasks, f"separate{suffix}", n)
        merged = harness.row(tasks, f"horizontal{suffix}", n)
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


def kernel_ratios(tasks_gpu: dict, separate: str = "separate", merged: str = "horizontal") -> list[dict]:
    """The four kernels' GPU time over the merged kernel's, per size (>= 1: the merged is faster)."""
    return [{"n": n, "ratio": harness.row(tasks_gpu, separate, n)["median_ms"]
                              / harness.row(tasks_gpu, merged, n)["median_ms"]}
            for n in tasks_gpu["sizes"]
            if harness.row(tasks_gpu, separate, n)["ok"] and harness.row(tasks_gpu, merged, n)["ok"]]


def key_figure(lab, records: dict) -> str:
    """The tour's one line: the gain of the launches alone at the smallest size and where merging
    stops paying."""
    try:
        launches_record(records)
        need(records, "host_launch")
    except Missing as missing:
        return f"awaiting data: {missing}"
    summary = crossover(lab, records)
    if not summary["rows"]:
        return "no validated timings of both versions"
    smallest, stops = summary["rows"][0], summary["stops_paying_at_measured"]
    return (f"one launch {smallest['measured_speedup']:.1f}x faster than four at "
            f"{smallest['n']:,} elements, launches alone (model {smallest['predicted_speedup']:.1f}x); "
            f"stops paying at {f'{stops:,}' if stops else 'no size in the sweep'}")


def speedup_figure(lab, records: dict, figures_dir: Path) -> Path:
    """Time per call against size (host-paced), and the gain of one launch over four: the whole
    calls, the launches alone and the GPU alone, where recorded, against the model."""
    tasks = records["tasks"]
    fig, (ax_time, ax_gain) = plots.new_figure("Four tasks: four launches or one", tasks, ncols=2)
    plots.time_vs_size(ax_time, tasks)
    launch_us = records["host_launch"]["us"]
    ax_time.axhline(launch_us / 1e3, color="C3", linestyle="--",
                    label=f"one launch, host-paced ({launch_us:.1f} us, same run)")
    ax_time.legend()
    suffix = LAUNCHES if f"horizontal{LAUNCHES}" in tasks["variants"] else ""
    summary = crossover(lab, records, suffix)
    x = [r["n"] for r in summary["rows"]]
    ax_gain.plot(x, [r["measured_speedup"] for r in summary["rows"]], marker="o",
                 label="host-paced, launches alone" if suffix else "host-paced, whole calls")
    if suffix:
        whole = crossover(lab, records, "")["rows"]
        ax_gain.plot([r["n"] for r in whole], [r["measured_speedup"] for r in whole], marker=".",
                     label="host-paced, whole calls (with the launchers' Python)")
    if "tasks_gpu" in records:
        gpu = kernel_ratios(records["tasks_gpu"])
        ax_gain.plot([r["n"] for r in gpu], [r["ratio"] for r in gpu], marker="s",
                     label="GPU alone (host work outside the window)")
    ax_gain.plot(x, [r["predicted_speedup"] for r in summary["rows"]], linestyle="--",
                 label=f"predicted: max(launches x {summary['launch_us']:.1f} us, bytes / copy bandwidth)")
    ax_gain.axhline(GAIN_THAT_PAYS, color="grey", linestyle=":", label=f"{GAIN_THAT_PAYS}x: stops paying")
    ax_gain.axhline(KERNEL_PACE, color="C3", linestyle=":", label=f"{KERNEL_PACE}x: the merged kernel's target")
    ax_gain.set_xscale("log", base=2)
    ax_gain.set_xlabel(tasks["axis"])
    ax_gain.set_ylabel("separate time / merged time")
    ax_gain.grid(True, which="both", alpha=0.3)
    ax_gain.legend()
    return plots.save(fig, "lab03_speedup", figures_dir)


def targets(lab, records: dict) -> dict:
    """The merged kernels against the four on the GPU alone (`tasks_gpu`): each merged version's
    worst size, met when the four's time over its own is at least KERNEL_PACE at every size of
    this run (`--repeat` judges each on its worst repeat)."""
    result = records["tasks_gpu"]
    versions = {}
    for merged in (name for name in result["variants"] if is_merged(name)):
        four = four_launches_beside(merged)
        worst = min(kernel_ratios(result, four, merged), key=lambda r: r["ratio"])
        versions[merged] = {"against": four, "worst_ratio": worst["ratio"], "worst_size": worst["n"],
                            "met": worst["ratio"] >= KERNEL_PACE}
    return {"rule": f"the four kernels' GPU time over the merged kernel's, at least {KERNEL_PACE} at "
                    f"every size of tasks_gpu", "versions": versions}


# --- claims: what the discussion says, checked against the records -----------------------------
# (the models a claim compares with are the solutions', so a claim never depends on a student's
# stub; the claims on the launches alone read a recording that times them apart)

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


KERNELS = (
    protocol.Kernel("scale_kernel", "1-D: one thread per element of task 0", block_size=BLOCK),
    protocol.Kernel("add_kernel", "1-D: one thread per element of task 1", block_size=BLOCK),
    protocol.Kernel("relu_kernel", "1-D: one thread per element of task 2", block_size=BLOCK),
    protocol.Kernel("square_kernel", "1-D: one thread per element of task 3", block_size=BLOCK),
    protocol.Kernel("horizontal_kernel",
                    "1-D: every task's blocks end to end, each block one task's part",
                    block_size=BLOCK),
)


LAB = protocol.Lab(
    number=NUMBER, title="horizontal fusion",
    kernels=KERNELS,
    references=("reference_tasks",),
    validate=validate,
    benchmarks=benchmarks,
    measurements=(
        protocol.Measurement("host_launch", measure_host_launch,
                             "the host's cost of one launch, in the same run: the model's launch time"),
        protocol.Measurement("launcher_prep", measure_launcher_prep,
                             "each launcher's own Python per call, apart from its launches (paired samples)"),
        protocol.Measurement("registers", measure_registers,
                             "registers per thread and theoretical occupancy of each kernel at each block"),
    ),
    figures=(protocol.Figure("lab03_speedup", speedup_figure, needs=("tasks", "host_launch")),),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
