"""Lab 03's measurements, and the crossover model they are compared with: the four tasks' inputs
and the calls the benchmarks time, the host's cost of one launch, the launchers' Python, the kernels'
registers, and where merging stops paying, measured and predicted.

`lab03_horizontal_fusion` declares them (its docstring says which part of a call each record
times) and the benchmarks that time these calls.
"""

from __future__ import annotations

import statistics

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import reference, registers
from kernellab.course.claims import Missing, need, repeats_ms, typical_ms
from kernellab.gpu import checks, device, launches, timing

from experiments.lab01_measure import in_each_repeat
from experiments.lab03_constants import BLOCK, GAIN_THAT_PAYS, KERNELS, LAUNCHES, NUMBER, SCALE_ARRAYS, SIZES

ALPHA = 2.5
INPUTS = ("x0", "x1", "z1", "x2", "x3")
LAUNCHES_TIMED = 100                       # back-to-back launches per sample of `host_launch`
PREP_SIZE = SIZES[0]                       # where `launcher_prep` times the launchers' Python
PREP_CALLS = 20                            # calls of each per sample of `launcher_prep`
SOLUTION_SIDE_KERNEL = "horizontal_4_per_thread_kernel"   # the solutions' only: not in LAB.kernels


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


# --- the crossover: measured against the model ----------------------------------------------------

def launches_record(records: dict) -> dict:
    """The `tasks` record, if it times the launches alone beside the whole calls (a
    `horizontal_launches` variant); `Missing` for a recording from before."""
    tasks = need(records, "tasks")
    if f"horizontal{LAUNCHES}" not in tasks["variants"]:
        raise Missing("tasks was recorded before the launches were timed apart from the launchers' "
                      "Python (no horizontal_launches variant): `kernellab bench 03` re-records it")
    return tasks


def host_launch_each(records: dict) -> list[float]:
    """The host's cost of one launch (`host_launch`, us) in each recorded repeat."""
    need(records, "host_launch", "us")
    return in_each_repeat(records, "host_launch", "us", lab=NUMBER)


def model_inputs(records: dict) -> tuple[float, float]:
    """(the host's cost of one launch in us, the copy ceiling in GB/s) that fill the crossover
    model: each the median of the recorded repeats, as the times it is compared with are."""
    need(records, "tasks", "copy_gbps")
    return (statistics.median(host_launch_each(records)),
            statistics.median(in_each_repeat(records, "tasks", "copy_gbps", lab=NUMBER)))


def crossover(lab, records: dict, suffix: str = LAUNCHES) -> dict:
    """Speed-up per size of `separate<suffix>` over `horizontal<suffix>` (the launches alone by
    default; "" for the whole calls), measured and predicted from the host's cost of one launch
    and the copy ceiling of the same runs (`model_inputs`), and the first size where merging stops
    paying; each row's time, and each of the model's inputs, is the median of the repeats, and the
    measured speed-up the median of the repeats' own (each repeat's two rows divided within it)."""
    tasks = records["tasks"]
    launch_us, gbps = model_inputs(records)
    rows = []
    for n in tasks["sizes"]:
        separate = harness.row(tasks, f"separate{suffix}", n)
        merged = harness.row(tasks, f"horizontal{suffix}", n)
        if not (separate["ok"] and merged["ok"]):
            continue  # a version that failed validation has no time to compare
        predicted = (lab.predicted_time_us(4, separate["bytes"], launch_us, gbps)
                     / lab.predicted_time_us(1, merged["bytes"], launch_us, gbps))
        gains = [s / m for s, m in zip(repeats_ms(separate), repeats_ms(merged))]
        rows.append({"n": n, "separate_ms": typical_ms(separate), "horizontal_ms": typical_ms(merged),
                     "measured_speedup": statistics.median(gains), "predicted_speedup": predicted,
                     "predicted_merged_us": lab.predicted_time_us(1, merged["bytes"], launch_us, gbps),
                     "predicted_separate_us": lab.predicted_time_us(4, separate["bytes"], launch_us, gbps)})

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
