"""The mutation self-test: planted bugs in copies of the solutions, which the graded tests must catch.

Each lab's mutants live in `tests/mutants/labNN_topic.py` as `MUTANTS`, a list of
`(what the bug is, text in the solution, its replacement)`; the text must occur exactly once.
A mutant is killed when grading it loses at least one point. The kill rate per lab is the
share of mutants killed; the target is 100%.

    kernellab mutants [LAB ...] [-j N]
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import importlib.util
import tempfile
from pathlib import Path

from . import grader, target

MUTANTS = target.ROOT / "tests" / "mutants"


@dataclasses.dataclass(frozen=True)
class Mutant:
    lab: str
    what: str
    old: str
    new: str


@dataclasses.dataclass(frozen=True)
class Verdict:
    mutant: Mutant
    killed: bool
    by: str          # the first test that failed, or "" when the mutant survived


def mutants(lab: str) -> list[Mutant]:
    """The planted bugs for a lab (none when it has no mutants file)."""
    stem = target.labs()[lab]
    path = MUTANTS / f"{stem}.py"
    if not path.exists():
        return []
    spec = importlib.util.spec_from_file_location(f"kernellab_mutants_{lab}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [Mutant(lab, *entry) for entry in module.MUTANTS]


def mutated_source(mutant: Mutant) -> str:
    source = (target.ROOT / "solutions" / f"{target.labs()[mutant.lab]}.py").read_text()
    count = source.count(mutant.old)
    if count != 1:
        raise ValueError(f"lab {mutant.lab} mutant {mutant.what!r}: its text occurs {count} times "
                         f"in the solution (it must occur exactly once): {mutant.old!r}")
    return source.replace(mutant.old, mutant.new)


def judge(mutant: Mutant, graded: dict, seed: int, timeout: float) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="kernellab-mutant-") as tmp:
        labs_dir = Path(tmp) / "labs"
        labs_dir.mkdir()
        (labs_dir / f"{target.labs()[mutant.lab]}.py").write_text(mutated_source(mutant))
        env = grader.child_env("labs", labs_dir, seed)
        run = grader.run_lab(mutant.lab, env, Path(tmp), timeout, 2000, graded=graded,
                             first_failure=True, compile_check=False, probe=False)
    failed = [n for n, o in run.outcomes.items() if o["outcome"] != "passed"]
    return Verdict(mutant, bool(failed), failed[0].split("::")[-1] if failed else "")


def run(labs=None, jobs: int = 2, seed: int = 20261129, timeout: float = 60.0,
        out=print) -> dict[str, list[Verdict]]:
    """Judge every mutant of the given labs; print the kill rate per lab."""
    numbers = grader.resolve_labs(labs)
    todo = [(lab, m) for lab in numbers for m in mutants(lab)]
    manifests = {}
    with tempfile.TemporaryDirectory(prefix="kernellab-mutants-") as tmp:
        for lab in numbers:
            manifests[lab] = grader.collect(lab, grader.child_env("labs", None, seed), Path(tmp))
    verdicts: dict[str, list[Verdict]] = {lab: [] for lab in numbers}
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for verdict in pool.map(lambda lm: judge(lm[1], manifests[lm[0]], seed, timeout), todo):
            verdicts[verdict.mutant.lab].append(verdict)
    out(f"{'lab':<5} {'killed':>10}  survivors")
    for lab, found in verdicts.items():
        killed = sum(v.killed for v in found)
        rate = f"{killed}/{len(found)}" if found else "no mutants"
        survivors = "; ".join(v.mutant.what for v in found if not v.killed) or "-"
        out(f"{lab:<5} {rate:>10}  {survivors}")
    return verdicts
