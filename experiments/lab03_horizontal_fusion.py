"""Lab 03's experiments: four small tasks in four launches or in one, over task sizes 1K .. 64M.

Declared once, in `LAB` at the end (kernellab.course.protocol): `kernellab bench 03` (on a GPU)
validates every version (the lab's VARIANTS, in blocks of 128 and 256, and the solution side's
SOLUTION_VARIANTS), then times them over the sweep (the largest task's elements; the others are
1/2, 1/4, 1/8 of it). Which part of a call each record times:
- `tasks`, timed as an eager caller runs them, no hold kernel (`host_paced`): each version's whole
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
  merging stops paying. The model and the figure read it as the median of the recorded repeats
  (`model_inputs`), as they read the times; a claim that sets it, or `launcher_prep`, against
  another record does so within each repeat (lab03_claims).
`separate_sliced` is the launch path the first version of this lab used (four device-array
views of `out` built per call), measured on its own: the cost of slicing in Python.
`kernellab tour 03` validates the versions on this device and draws the figure;
`scripts/diagnose_lab03.py` times the largest sizes all three ways in under a minute.

This module is the declaration, with the benchmarks, the validation, the targets and the key
figure; the tasks' inputs, the calls the benchmarks time, the measurements and the crossover model
live in lab03_measure, the figure in lab03_figures, the claims in lab03_claims, and the constants
all of them share in lab03_constants (re-exported here, with what tests, notebook 03 and
scripts/diagnose_lab03.py read on the experiment).
"""

from __future__ import annotations

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol
from kernellab.course.claims import Missing, need
from kernellab.gpu import launches

from experiments.lab03_claims import CLAIMS
from experiments.lab03_constants import BLOCK, KERNEL_PACE, KERNELS, LAUNCHES, NUMBER, SIZES
from experiments.lab03_figures import speedup_figure
from experiments.lab03_measure import (
    crossover, four_launches_beside, is_merged, kernel_ratios, launcher_calls, launches_record,
    measure_host_launch, measure_launcher_prep, measure_registers, task_sizes, tasks_inputs, tasks_reference,
    versions)

# Read on the experiment (`protocol.experiment("03")`) by notebook 03.
from experiments.lab03_measure import ALPHA, INPUTS, host_launch_each, model_inputs

TOUR_SIZES = [2**10, 2**16, 2**22]
SIM_SIZES = [301]                          # tasks of 301, 150, 75 and 37 elements


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
