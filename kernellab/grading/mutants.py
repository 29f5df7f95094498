"""The mutation self-test: planted bugs the graded tests must catch, and valid alternatives they must pass.

Each lab's file `tests/mutants/labNN_topic.py` holds two lists of
`(what it is, text in the solution, its replacement)`; the text must occur exactly once:
- `MUTANTS`: typical bugs. A mutant is killed when grading it loses at least one point (a failed
  test, or a kernel that does not compile for a real GPU). It counts as killed only when EVERY
  seed kills it: a bug caught on some inputs only is a bug a student keeps.
- `ALTERNATIVES`: other correct ways to write the same function (another launch order, one atomic
  instead of a read and a write...). Each must score full marks on every seed: a test that fails
  one checks something the stub's docstring does not ask for.

    kernellab mutants [LAB ...] [-j N] [--seeds 3] [--seed FIRST]

The seeds are FIRST, FIRST + 1, ...; FIRST is fresh each run (printed) unless given.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib.util
import tempfile
from pathlib import Path

from kernellab.grading import runner, plugin
from kernellab.course import target

MUTANTS = target.ROOT / "tests" / "mutants"
DEFAULT_SEEDS = 3


@dataclasses.dataclass(frozen=True)
class Mutant:
    lab: str
    what: str
    old: str
    new: str
    valid: bool = False   # an ALTERNATIVE: must pass, not be killed


@dataclasses.dataclass(frozen=True)
class Verdict:
    mutant: Mutant
    lost: dict           # seed -> the first test that lost points ("" when every test passed)
    why: dict = dataclasses.field(default_factory=dict)   # seed -> that test's first line of feedback

    @property
    def killed(self) -> bool:
        """Every seed lost a point."""
        return bool(self.lost) and all(self.lost.values())

    @property
    def passed(self) -> bool:
        """Every seed scored full marks."""
        return not any(self.lost.values())

    @property
    def as_expected(self) -> bool:
        return self.passed if self.mutant.valid else self.killed

    def describe(self) -> str:
        """What went wrong, for the summary: the seeds that let a bug through, or that failed an
        alternative, and by which test."""
        if self.mutant.valid:
            lost = ", ".join(f"{test} on seed {seed}" + (f": {self.why[seed]}" if self.why.get(seed) else "")
                             for seed, test in self.lost.items() if test)   # a valid file that lost says why
            return f"{self.mutant.what} (lost {lost})"
        escaped = [str(s) for s, t in self.lost.items() if not t]
        return f"{self.mutant.what} (escapes seed {', '.join(escaped)})"


def load(lab: str) -> list[Mutant]:
    """The planted bugs and the valid alternatives for a lab (none when it has no mutants file)."""
    stem = target.labs()[lab]
    path = MUTANTS / f"{stem}.py"
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location(f"kernellab_mutants_{lab}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return ([Mutant(lab, *entry) for entry in module.MUTANTS]
            + [Mutant(lab, *entry, valid=True) for entry in getattr(module, "ALTERNATIVES", [])])


def mutants(lab: str) -> list[Mutant]:
    return [m for m in load(lab) if not m.valid]


def alternatives(lab: str) -> list[Mutant]:
    return [m for m in load(lab) if m.valid]


def mutated_source(mutant: Mutant) -> str:
    source = (target.ROOT / "solutions" / f"{target.labs()[mutant.lab]}.py").read_text()
    count = source.count(mutant.old)
    if count != 1:
        raise ValueError(f"lab {mutant.lab} mutant {mutant.what!r}: its text occurs {count} times "
                         f"in the solution (it must occur exactly once): {mutant.old!r}")
    return source.replace(mutant.old, mutant.new)


def first_lost(mutant: Mutant, graded: dict, seed: int, timeout: float) -> tuple[str, str]:
    """Grade the mutated solution on one seed; the first test that lost points and the first line of
    its feedback (the error's own), or ("", "")."""
    with tempfile.TemporaryDirectory(prefix="kernellab-mutant-") as tmp:
        labs_dir = Path(tmp) / "labs"
        labs_dir.mkdir()
        (labs_dir / f"{target.labs()[mutant.lab]}.py").write_text(mutated_source(mutant))
        env = runner.child_env("labs", labs_dir, seed)
        run = runner.run_lab(mutant.lab, env, Path(tmp), timeout, 2000, graded=graded,
                             first_failure=True, compile_check=False, probe=False)
        if all(o["outcome"] == "passed" for o in run.outcomes.values()):
            runner.check_compiles([run])   # only here: compiling every kernel of every mutant costs minutes
    failed = [n for n, o in run.outcomes.items() if o["outcome"] != "passed"]
    if not failed:
        return "", ""
    lines = [line.strip() for line in run.outcomes[failed[0]]["output"].splitlines() if line.strip()]
    return failed[0].split("::")[-1], (lines[0][:300] if lines else "")


def judge(mutant: Mutant, graded: dict, seeds, timeout: float = 60.0) -> Verdict:
    """Grade a mutant on each seed, stopping at the first seed that already decides it: a bug
    that escapes one seed is not killed, an alternative that loses a point has failed."""
    lost, why = {}, {}
    for seed in seeds:
        lost[seed], why[seed] = first_lost(mutant, graded, seed, timeout)
        if bool(lost[seed]) == mutant.valid:
            break
    return Verdict(mutant, lost, why)


def run(labs=None, jobs: int = 2, seeds: int = DEFAULT_SEEDS, first_seed: int | None = None,
        timeout: float = 60.0, out=print) -> dict[str, list[Verdict]]:
    """Judge every mutant and alternative of the given labs; print the results per lab."""
    if seeds < 1:
        raise ValueError(f"--seeds must be at least 1, got {seeds}")
    first_seed = plugin.new_seed() if first_seed is None else first_seed
    seed_list = [first_seed + i for i in range(seeds)]
    out(f"seeds {', '.join(map(str, seed_list))} (replay with --seed {first_seed} --seeds {seeds})")
    numbers = runner.resolve_labs(labs)
    todo = [m for lab in numbers for m in load(lab)]
    for mutant in todo:
        mutated_source(mutant)   # a stale mutant is an error before minutes of grading
    with tempfile.TemporaryDirectory(prefix="kernellab-mutants-") as tmp:
        manifests = runner.collect(numbers, runner.child_env("labs", None, first_seed), Path(tmp))
    verdicts: dict[str, list[Verdict]] = {lab: [] for lab in numbers}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for verdict in pool.map(lambda m: judge(m, manifests[m.lab], seed_list, timeout), todo):
            verdicts[verdict.mutant.lab].append(verdict)
    out(f"{'lab':<5} {'killed':>8} {'valid passed':>13}  not as expected")
    for lab, found in verdicts.items():
        bugs = [v for v in found if not v.mutant.valid]
        valid = [v for v in found if v.mutant.valid]
        killed = f"{sum(v.killed for v in bugs)}/{len(bugs)}"
        passed = f"{sum(v.passed for v in valid)}/{len(valid)}" if valid else "-"
        wrong = "; ".join(v.describe() for v in found if not v.as_expected) or "-"
        out(f"{lab:<5} {killed:>8} {passed:>13}  {wrong}")
    return verdicts
