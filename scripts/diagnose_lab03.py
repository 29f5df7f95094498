"""Lab 03 on one GPU in under a minute: is the merged kernel slower than the four, and where?

For largest-task sizes 2^20, 2^24, 2^25 and 2^26 (the other tasks 1/2, 1/4, 1/8 of it), each
version of the four tasks (the lab's VARIANTS and the solution side's SOLUTION_VARIANTS) is
validated once against the float64 reference, then timed with CUDA events (kernellab.gpu.timing
.time_gpu: warm-up, REPS samples, each the mean of enough back-to-back calls to last ~1 ms; the
median and p10-p90) three ways:
  gpu       the whole call, the host's work held outside the window by a hold kernel ahead of each
            sample: the kernels alone, back to back
  launches  the call's launches alone, taken from one call and replayed with its own kernels and
            arguments (kernellab.gpu.launches.replayable), host-paced: launch submits and kernels,
            none of the launcher's Python
  call      the whole call, host-paced, the launcher's Python inside: what Lab 03's `tasks` rows
            measured until 2026-12-01
Each column's "4/1" is the four launches' time over the version's (a merged version against the
four as given; a block-256 one against the four in blocks of 256): at least 0.98 is the target.
Where one input set fits in L2, the calls rotate through enough sets to cover 3x the L2.
Then, per kernel: registers per thread (on a GPU the launched specialisation's
`get_regs_per_thread`, beside kernellab's driver figure for the declared signature; ptxas's in the
simulator) and the theoretical occupancy at the block launched; and, on a GPU, each launcher's
own Python per call at 1,024 elements (paired samples, kernellab.gpu.timing.time_host_beyond).
In the simulator it validates every version at a tiny size and says no timing exists.

    KERNELLAB_DEVICE=gpu python3 scripts/diagnose_lab03.py [--reps 30] [--sizes 20,24,25,26]
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernellab.gpu import checks, device, timing   # noqa: E402  (kernellab before numba.cuda)
from kernellab.gpu.launches import replayable   # noqa: E402
from kernellab.course import protocol, registers, target   # noqa: E402

import numpy as np   # noqa: E402

SIM_SIZE = 301                 # the simulator's one size: tasks of 301, 150, 75 and 37 elements
MIN_REPS = 20
SAMPLE_MS = 1.0                # each sample lasts about this long (back-to-back calls) ...
MAX_INNER = 50                 # ... but holds at most this many calls
L2_COVER = 3                   # rotate input sets until they cover this many L2s ...
MAX_SETS = 8                   # ... with at most this many
MODES = {"gpu": True, "launches": False, "call": False}   # mode -> the host's work held outside


class BadInput(ValueError):
    """A command-line value this script cannot use: one line, exit 2."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise BadInput(message)


def exponents(text: str) -> list[int]:
    try:
        found = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--sizes takes powers of two as exponents, e.g. 20,24,25,26; got {text!r}")
    if not found or any(not 10 <= k <= 27 for k in found):
        raise argparse.ArgumentTypeError(f"--sizes exponents must lie in 10..27; got {text!r}")
    return found


def reps(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < MIN_REPS:
        raise argparse.ArgumentTypeError(f"--reps must be an integer >= {MIN_REPS}; got {text!r}")
    return value


def input_sets(experiment, rng, n: int, simulated: bool) -> tuple[list, dict]:
    """[(device inputs, poisoned output)] at size n, one set or as many as cover L2_COVER L2s, and
    the first set's host inputs."""
    cuda = device.cuda()
    first = experiment.tasks_inputs(rng, n)
    total = sum(experiment.task_sizes(n))
    set_bytes = sum(a.nbytes for a in first.values()) + 4 * total
    count = 1 if simulated else min(MAX_SETS, math.ceil(L2_COVER * device.facts().l2_bytes / set_bytes))
    hosts = [first] + [experiment.tasks_inputs(rng, n) for _ in range(count - 1)]
    return [({k: cuda.to_device(v) for k, v in host.items()}, checks.poisoned(total)) for host in hosts], first


def timed(fn, hide_host: bool, reps_: int) -> timing.Timing:
    probe = timing.time_gpu(fn, warmup=2, reps=3, hide_host=hide_host)
    inner = int(min(MAX_INNER, max(1, round(SAMPLE_MS / max(probe.median_ms, 1e-6)))))
    return timing.time_gpu(fn, warmup=3, reps=reps_, inner=inner, hide_host=hide_host)


def measure_size(experiment, lab, calls: dict, n: int, reps_: int, simulated: bool) -> tuple[dict, dict]:
    """{version: {mode: Timing}} at size n (empty in the simulator), and {version: its launches}."""
    sets, first = input_sets(experiment, np.random.default_rng(n), n, simulated)
    expected = experiment.tasks_reference(lab, first)
    found, launched = {}, {}
    for name, call in calls.items():
        d, out = sets[0]
        checks.assert_matches(call(d, out), expected, rtol=1e-6, what=f"{name} at {n:,}")
        replays = [replayable(lambda d=d, out=out: call(d, out)) for d, out in sets]
        launched[name] = replays[0].launches
        if simulated:
            continue
        whole_sets, replay_sets = itertools.cycle(sets), itertools.cycle(replays)

        def whole():
            d, out = next(whole_sets)
            call(d, out)

        per_mode = {"gpu": whole, "launches": lambda: next(replay_sets)(), "call": whole}
        found[name] = {mode: timed(per_mode[mode], hide, reps_) for mode, hide in MODES.items()}
    return found, launched


def timing_table(experiment, results: dict) -> str:
    head = f"{'largest task':>12} {'version':<26}" + "".join(
        f" {mode + ' ms':>10} {'p10-p90':>15} {'4/1':>5}" for mode in MODES)
    lines = [head]
    for n, by_version in results.items():
        for name, modes in by_version.items():
            cells = []
            for mode in MODES:
                t = modes[mode]
                four = by_version[experiment.four_launches_beside(name)][mode].median_ms / t.median_ms
                exposed = "*" if t.host_exposed else " "
                cells.append(f" {t.median_ms:10.4f} {t.p10_ms:7.4f}-{t.p90_ms:<7.4f} {four:5.2f}{exposed}")
            lines.append(f"{n:>12,} {name:<26}" + "".join(cells))
    lines.append("4/1: the four launches' median over this version's (>= 1: the version is faster); "
                 "* : the host's submit outlasted the hold in some samples (gpu column)")
    return "\n".join(lines)


def kernel_table(lab, launched: dict) -> str:
    """Registers and theoretical occupancy of every kernel a version launched, at its block."""
    shapes = {}
    for launches in launched.values():
        for launch in launches:
            shapes.setdefault((launch.name, launch.block[0]), launch.kernel)
    signature = {"horizontal_4_per_thread_kernel": "horizontal_kernel"}   # its arguments' types
    rows = registers.resources_rows([(kernel, lab.SIGNATURES[signature.get(name, name)], block)
                                     for (name, block), kernel in shapes.items()])
    lines = [f"{'kernel':<32} {'block':>5} {'regs':>5} {'launched':>8} {'source':>7} {'blocks/SM':>9} "
             f"{'occupancy':>9}  limited by"]
    for ((name, block), kernel), row in zip(shapes.items(), rows):
        launched_regs = "-" if device.is_simulator() else \
            "/".join(str(v) for v in sorted(set(kernel.get_regs_per_thread().values())))
        lines.append(f"{name:<32} {block:>5} {row['registers']:>5} {launched_regs:>8} {row['source']:>7} "
                     f"{row['active_blocks']:>9} {row['occupancy']:>8.0%}  {', '.join(row['limiters'])}")
    lines.append("regs: kernellab's figure for the declared signature (driver on a GPU, ptxas without); "
                 "launched: the dispatcher's compiled specialisations (get_regs_per_thread)")
    return "\n".join(lines)


def prep_table(experiment, lab) -> str:
    prep = experiment.measure_launcher_prep(lab)
    lines = [f"the launchers' Python per call at {prep['size']:,} elements ({prep['how']}):",
             f"{'version':<26} {'call us':>8} {'launches us':>11} {'prep us':>8} {'prep p10-p90':>13}"]
    for name, v in prep["variants"].items():
        lines.append(f"{name:<26} {v['call_us_median']:8.1f} {v['launches_us_median']:11.1f} "
                     f"{v['prep_us_median']:8.1f} {v['prep_us_p10']:6.1f}-{v['prep_us_p90']:<6.1f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = Parser(description="Lab 03: the merged kernel against the four, the host outside the window")
    parser.add_argument("--reps", type=reps, default=30, help=f"samples per timing (>= {MIN_REPS})")
    parser.add_argument("--sizes", type=exponents, default=[20, 24, 25, 26],
                        help="the largest task's sizes as powers of two, e.g. 20,24,25,26")
    try:
        args = parser.parse_args(argv)
    except BadInput as bad:
        print(f"diagnose_lab03: {bad}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    simulated = device.is_simulator()
    experiment, lab = protocol.experiment("03"), target.load("03", "solutions")
    calls = {name: call for name, (call, _) in experiment.launcher_calls(lab).items()
             if name != "separate_sliced"}
    print(f"lab 03 diagnosis on {device.facts().label}; versions: {', '.join(calls)}")
    sizes = [SIM_SIZE] if simulated else [2**k for k in args.sizes]
    results, launched = {}, {}
    for n in sizes:
        results[n], launched = measure_size(experiment, lab, calls, n, args.reps, simulated)
        print(f"  {n:,}: validated{'' if simulated else ' and timed'} ({time.perf_counter() - started:.0f} s)")
    if simulated:
        print(f"simulator: every version validated at {SIM_SIZE:,}; no timing exists without a GPU")
    else:
        print(timing_table(experiment, results))
        print(prep_table(experiment, lab))
    print(kernel_table(lab, launched))
    print(f"done in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
