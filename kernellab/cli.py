"""The `kernellab` command: info, tour, grade, check, bench, profile, occupancy, gradescope, release,
collect."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_info(args) -> int:
    from kernellab.gpu import device
    from kernellab.course import target
    facts = device.facts()
    print(f"mode:    {device.mode()} (KERNELLAB_DEVICE={device.requested_mode()})")
    print(f"device:  {facts.label}")
    print(f"         cc {facts.cc[0]}.{facts.cc[1]}, {facts.sm_count} SMs, "
          f"{facts.max_threads_per_sm} threads/SM, {facts.max_blocks_per_sm} blocks/SM, "
          f"{facts.registers_per_sm} registers/SM, {facts.max_shared_per_sm // 1024} KiB shared/SM, "
          f"{facts.l2_bytes // 2**20} MiB L2  [{facts.source}]")
    print(f"target:  {target.current()} (KERNELLAB_TARGET)")
    for name, version in device.versions().items():
        if name != "mode":
            print(f"{name + ':':<15}{version}")
    print(f"labs:    {', '.join(f'{n} {s}' for n, s in target.labs().items())}")
    return 0


def course_target(option: str | None) -> str:
    """tour's, bench's and profile's target: --target, else KERNELLAB_TARGET, else the solutions (which a
    student release stands in for with the recorded figures in the tour)."""
    from kernellab.course import settings
    return settings.target(option, default="solutions")


def cmd_tour(args) -> int:
    from kernellab.course import settings, tour
    name = course_target(args.target)
    with settings.using(target=name):
        return 0 if tour.run(args.labs or None, Path(args.figures), name) else 1


def cmd_bench(args) -> int:
    from kernellab.gpu import device
    from kernellab.course import settings, target
    name = course_target(args.target)
    if name == "solutions":
        target.require_solutions()
    print(f"kernellab bench: target {name}")
    if device.is_simulator():
        print("simulator mode: benchmarks validate each variant; no timing exists without a GPU "
              "(recorded H200 figures are in data/reference/h200/)")
    from kernellab.course import protocol
    specs = [protocol.bench_spec(spec) for spec in args.labs] or [(n, None) for n in target.labs()]
    if args.repeat > 1 and not device.is_simulator():
        from kernellab.course import bench
        bench.run_repeats(specs, args.repeat, Path(args.out) if args.out else None, name)
        return 0
    with settings.using(target=name):
        bench_each(specs, args.out)
    return 0


def bench_each(specs: list[tuple[str, tuple[str, ...] | None]], out: str | None):
    from kernellab.course import protocol
    for number, only in specs:
        print(f"== lab {number}{': ' + ', '.join(only) if only else ''} ==")
        protocol.bench(protocol.declaration(number), Path(out) if out else None, only)


def cmd_profile(args) -> int:
    from kernellab.course import profile, target
    name = course_target(args.target)      # bench's: the profiled kernels are the timed ones
    if name == "solutions":
        target.require_solutions()
    print(f"kernellab profile: target {name}")
    return profile.main(args.spec, Path(args.out) if args.out else None, target_name=name)


def cmd_grade(args) -> int:
    from kernellab.grading import batch, outputs, runner
    from kernellab.course import settings, target
    labs = [target.lab_number(lab) for lab in args.labs] or None   # a bad lab: one line, now
    if args.batch:
        if args.fail_under is not None:
            raise ValueError("--fail-under sets the exit code of one submission's grade; "
                             "with --batch, read the gradebook instead")
        if args.root:
            raise ValueError("give --root (one submission) or --batch (a folder of them), not both")
        batch.grade_batch(Path(args.batch), jobs=args.jobs, labs=labs,
                          out_dir=Path(args.out) if args.out else None, force=args.force,
                          timeout=args.timeout, seed=settings.seed(args.seed), stress=args.stress,
                          roster=Path(args.roster) if args.roster else None,
                          require_protection=args.require_protection)
        return 0
    if args.out or args.force or args.roster:
        raise ValueError("--out, --force and --roster go with --batch; one submission's report "
                         "is --results")
    results = outputs.report_file(Path(args.results))     # before grading: a grade is never lost
    if args.root:
        runner.submission_labs(Path(args.root))            # a wrong folder: one line, before grading
    document = runner.grade(labs, target_name="labs", results=results,
                            seed=settings.seed(args.seed), timeout=args.timeout,
                            root=Path(args.root) if args.root else None, jobs=args.jobs,
                            stress=args.stress, require_protection=args.require_protection,
                            verbose=args.verbose)
    if args.fail_under is not None and runner.percent(document) < args.fail_under:
        print(f"kernellab grade: {runner.percent(document):.4g}% is under --fail-under "
              f"{args.fail_under:g}%", file=sys.stderr)
        return 1
    if args.fail_under is not None and not runner.official(document):
        print("kernellab grade: not an official grade (see the WARNING above), so --fail-under "
              "fails it", file=sys.stderr)
        return 1
    return 0  # without --fail-under, lost points never set the exit code


def cmd_check(args) -> int:
    from kernellab.grading import batch, runner
    from kernellab.course import settings, target
    target.require_solutions()
    return 0 if runner.check(args.labs or None, Path(args.out), seed=settings.seed(args.seed),
                             timeout=args.timeout, stress=args.stress) else 1


def number_type(convert, valid, wants: str):
    """An argparse type: the text through `convert`, refused in one line unless `valid`."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            value = None
        if value is None or not valid(value):       # NaN is never valid
            raise argparse.ArgumentTypeError(f"must be {wants}, not {text!r}")
        return value
    return parse


positive_int = number_type(int, lambda v: v >= 1, "a whole number of at least 1")          # -j
seed_int = number_type(int, lambda v: v >= 0, "a whole number of at least 0")              # --seed
positive_seconds = number_type(float, lambda v: v > 0, "a number of seconds above 0")      # --timeout
percentage = number_type(float, lambda v: 0 <= v <= 100, "a percentage from 0 to 100")   # --fail-under


def cmd_occupancy(args) -> int:
    from kernellab import occupancy_cli
    return occupancy_cli.main(args)


def cmd_mutants(args) -> int:
    from kernellab.grading import mutants
    from kernellab.course import settings, target
    target.require_solutions()
    verdicts = mutants.run(args.labs or None, jobs=args.jobs, seeds=args.seeds,
                            first_seed=settings.seed(args.seed))
    return 0 if all(v.as_expected for found in verdicts.values() for v in found) else 1


def cmd_gradescope(args) -> int:
    from kernellab.grading import gradescope
    print(gradescope.build_bundle(Path(args.out), args.labs or None, force=args.force))
    return 0


def cmd_collect(args) -> int:
    from kernellab.grading import collect
    collect.collect(Path(args.roster), Path(args.dir), args.deadline, jobs=args.jobs)
    return 0


def cmd_release(args) -> int:
    from kernellab.grading import outputs, release
    outputs.writable(Path(args.out), "release")
    print(f"student release written to {release.build(Path(args.out), args.repo_url)} "
          "(no solution code in it)")
    return 0


TARGET_HELP = "the code to run: solutions or labs (default: KERNELLAB_TARGET, else solutions)"


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments get one line that names the problem and where help is (exit 2), not the
    usage block."""

    def error(self, message):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    from kernellab.course import settings
    top = OneLineParser(prog="kernellab", description=__doc__)
    sub = top.add_subparsers(dest="command", required=True, parser_class=OneLineParser)

    sub.add_parser("info", help="mode, device and versions").set_defaults(func=cmd_info)

    p = sub.add_parser("tour", help="run every lab's solution, validate it, draw its figures")
    p.add_argument("labs", nargs="*", help="lab numbers (default: all)")
    p.add_argument("--target", choices=settings.TARGETS, help=TARGET_HELP)
    p.add_argument("--figures", default="figures", help="folder for the figures")
    p.set_defaults(func=cmd_tour)

    p = sub.add_parser("bench", help="run the labs' declared benchmarks (timing needs a GPU)")
    p.add_argument("labs", nargs="*", metavar="LAB[:NAME,...]",
                   help="lab numbers (default: all); LAB:NAME,... runs only those benchmarks and "
                        "measurements of the lab and keeps its other records")
    p.add_argument("--target", choices=settings.TARGETS, help=TARGET_HELP)
    p.add_argument("--out", help="folder for the JSON (default: data/reference/<gpu>/)")
    p.add_argument("--repeat", type=positive_int, default=1,
                   help="run each lab's benchmarks in this many fresh processes and keep every repeat")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("profile", help="DRAM bytes and counters from Nsight Compute (GPU; recorded in the simulator)")
    p.add_argument("spec", metavar="LAB[:KERNEL]")
    p.add_argument("--target", choices=settings.TARGETS, help=TARGET_HELP)
    p.add_argument("--out", help="folder for the JSON (default: data/reference/<gpu>/)")
    p.set_defaults(func=cmd_profile)

    for name, helptext in (("grade", "grade the student's labs/ (the exit code reflects points "
                                     "only with --fail-under)"),
                           ("check", "instructors: solutions must score 100%%, the starter 0")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("labs", nargs="*", help="lab numbers (default: all)")
        p.add_argument("--seed", type=seed_int, default=None,
                       help="replay the inputs of an earlier run")
        p.add_argument("--timeout", type=positive_seconds, default=None,
                       help="seconds a single test may run before it is killed")
        p.add_argument("--no-stress", dest="stress", action="store_false",
                       help="simulator: run blocks and threads in order (stress mode is on by "
                            "default)")
    grade_p, check_p = sub.choices["grade"], sub.choices["check"]
    grade_p.add_argument("--results", default="results.json", help="Gradescope results.json path")
    grade_p.add_argument("--root", help="grade the labs/ of this folder (a submission)")
    grade_p.add_argument("--batch", help="grade every submission folder inside this folder")
    grade_p.add_argument("-j", "--jobs", type=positive_int, default=2,
                         help="labs (or, with --batch, submissions) graded at once")
    grade_p.add_argument("--out", help="with --batch: the folder for gradebook.csv and each "
                                       "submission's report (default: a new "
                                       "gradebook-<date>-<time> folder here)")
    grade_p.add_argument("--force", action="store_true",
                         help="with --batch: replace the reports in an --out that holds some")
    grade_p.add_argument("--roster", metavar="ROSTER.csv",
                         help="with --batch: the class list (submission,name,email,sis_user_id,"
                              "sis_login_id,section,username; only submission is required), for "
                              "canvas.csv and moodle.csv beside gradebook.csv")
    grade_p.add_argument("--verbose", action="store_true",
                         help="say in the header what the protection covers")
    grade_p.add_argument("--require-protection", choices=("bwrap", "user"),
                         help="refuse to grade where student code would run less protected "
                              "than this (see the grade's header)")
    grade_p.add_argument("--fail-under", type=percentage, metavar="PERCENT",
                         help="exit with code 1 when the score is under PERCENT of the points, "
                              "or the grade is not official; without it the exit code ignores "
                              "the points")
    grade_p.set_defaults(func=cmd_grade)
    check_p.add_argument("--out", default=".kernellab/check", help="folder for both results.json")
    check_p.set_defaults(func=cmd_check)

    p = sub.add_parser("occupancy", help="occupancy for a configuration or a lab kernel")
    p.add_argument("kernel", nargs="?", help="FILE.py:KERNEL, resolved and compiled for its resources")
    p.add_argument("--cc", help="compute capability, e.g. 9.0 (default: this device's)")
    p.add_argument("--block-size", type=positive_int)
    p.add_argument("--registers", type=positive_int)
    p.add_argument("--static-shared", type=int, default=None)
    p.add_argument("--dynamic-shared", type=int, default=0)
    p.add_argument("--carveout", type=int, default=-1)
    p.add_argument("--signature", help="Numba signature for FILE.py:KERNEL")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_occupancy)

    p = sub.add_parser("mutants", help="instructors: the graded tests must catch planted bugs")
    p.add_argument("labs", nargs="*")
    p.add_argument("-j", "--jobs", type=positive_int, default=2)
    p.add_argument("--seeds", type=positive_int, default=3,
                   help="seeds each mutant is graded on; killed only if every seed kills it")
    p.add_argument("--seed", type=seed_int, default=None,
                   help="the first seed (default: fresh, printed)")
    p.set_defaults(func=cmd_mutants)

    p = sub.add_parser("gradescope", help="build a Gradescope autograder bundle")
    p.add_argument("labs", nargs="*", help="labs it grades (default: all)")
    p.add_argument("--out", default="build/gradescope", help="folder for the bundle and its zip")
    p.add_argument("--force", action="store_true", help="replace a bundle already in --out")
    p.set_defaults(func=cmd_gradescope)

    p = sub.add_parser("collect", help="instructors: each student's repository at the deadline, "
                                       "for grade --batch")
    p.add_argument("roster", help="the roster CSV, with a repo column (a git URL per submission)")
    p.add_argument("dir", help="a new folder: one folder per submission, and collected.csv")
    p.add_argument("--deadline", metavar="ISO-8601",
                   help="take each repository's last commit at or before this time, with its "
                        "time zone (e.g. 2026-12-01T23:59:00+00:00); default: the newest")
    p.add_argument("-j", "--jobs", type=positive_int, default=4,
                   help="repositories fetched at once")
    p.set_defaults(func=cmd_collect)

    p = sub.add_parser("release", help="instructors: write the student distribution (no solutions)")
    p.add_argument("out", help="a new folder for the release")
    p.add_argument("--repo-url", help="the students' repository (no solutions): its notebooks' "
                                      "Colab cell clones it (default: none; they ask for one)")
    p.set_defaults(func=cmd_release)
    return top


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, RuntimeError) as exc:  # bad input: one clear line, not a traceback
        print(f"kernellab {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
