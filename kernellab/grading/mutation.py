"""Automatic mutation testing of the graded stubs' solutions with cosmic-ray (`make mutation`).

Hand-written mutants (tests/mutants/, kernellab.grading.mutants) are the bugs someone described.
This finds the ones nobody did: cosmic-ray mutates each solution file one operator at a time
(a `<` for a `<=`, a `+ 1` dropped, a `return` of None...), and the lab's graded tests must fail
on every mutant. Only mutations inside a stub's body count: the given code around the stubs is
not the student's to write. Each lab runs in a copy of the course (cosmic-ray edits the file it
mutates in place), split into shards that run side by side.

A mutant the tests let through is either killed by a new check of the stub's contract, or recorded
in tests/mutants/equivalent.py with why no test can tell it from the solution. The report per
lab (docs/mutation/labNN.md) lists every survivor, and which are recorded as equivalent.

    python -m kernellab.grading.mutation [LAB ...] [--shards 2] [--jobs 2] [--seed 1] [--limit N]

It takes hours on two cores (each mutant is a pytest run in the simulator), so it sits outside
`make test`; cosmic-ray is installed by `make mutation`, not by `make install`.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernellab.course import target
from kernellab.grading import contract

COPIED = ("labs", "solutions", "tests", "experiments", "pyproject.toml")
COSMIC_RAY = [sys.executable, "-c", "import sys; from cosmic_ray.cli import main; sys.exit(main())"]
"""cosmic-ray's command line, run by this Python (a `pip install --target` puts no script on PATH)."""
TIMEOUT_S = 300
# The operators that model a student's slip: a neighbouring operator or bound (+ for -, < for <=,
# / for //), a changed constant, a negated or emptied condition or loop. cosmic-ray also swaps each
# arithmetic operator for every other one (a * for a <<, a ^ for a +): those crash at the first
# test, cost a pytest run each, and teach nothing, so they are left out.
SLIPS = {f"core/{name}" for name in (
    "NumberReplacer", "AddNot", "ZeroIterationForLoop", "ReplaceOrWithAnd", "ReplaceAndWithOr",
    "ReplaceTrueWithFalse", "ReplaceFalseWithTrue", "ReplaceBreakWithContinue", "ReplaceContinueWithBreak",
    "ReplaceUnaryOperator_USub_UAdd", "ReplaceBinaryOperator_Add_Sub", "ReplaceBinaryOperator_Sub_Add",
    "ReplaceBinaryOperator_Add_Mul", "ReplaceBinaryOperator_Mul_Add", "ReplaceBinaryOperator_Mul_Div",
    "ReplaceBinaryOperator_Div_Mul", "ReplaceBinaryOperator_Div_FloorDiv", "ReplaceBinaryOperator_FloorDiv_Div",
    "ReplaceBinaryOperator_Mod_FloorDiv", "ReplaceBinaryOperator_FloorDiv_Mod", "ReplaceBinaryOperator_Pow_Mul",
    "ReplaceComparisonOperator_Lt_LtE", "ReplaceComparisonOperator_LtE_Lt", "ReplaceComparisonOperator_Gt_GtE",
    "ReplaceComparisonOperator_GtE_Gt", "ReplaceComparisonOperator_Lt_Gt", "ReplaceComparisonOperator_Gt_Lt",
    "ReplaceComparisonOperator_LtE_GtE", "ReplaceComparisonOperator_GtE_LtE", "ReplaceComparisonOperator_Eq_NotEq",
    "ReplaceComparisonOperator_NotEq_Eq", "ReplaceComparisonOperator_Is_IsNot", "ReplaceComparisonOperator_IsNot_Is")}


def stub_lines(solution: Path, starter: Path) -> set[int]:
    """The lines of the solution file inside the bodies of the starter's stubs (their def lines and
    docstrings left out)."""
    import ast
    starter_tree = target.parse_source(starter.read_text(), str(starter))
    stated = contract.stubs(starter)
    names = {node.name for node in ast.walk(starter_tree) if isinstance(node, ast.FunctionDef)
             and node.name in stated and contract.raises_stub(node, own_body_only=True)}
    lines = set()
    for node in ast.walk(target.parse_source(solution.read_text(), str(solution))):
        if isinstance(node, ast.FunctionDef) and node.name in names:
            body = node.body[1:] if ast.get_docstring(node) else node.body
            for statement in body:
                lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return lines


def equivalents(lab: str) -> dict[tuple[str, str], str]:
    """The survivors recorded as equivalent for `lab`: (operator, the mutated line's text, stripped)
    -> why no test can tell it from the solution."""
    path = target.ROOT / "tests" / "mutants" / "equivalent.py"
    spec = importlib.util.spec_from_file_location("kernellab_equivalent_mutants", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {(operator, line): why for operator, line, why in module.EQUIVALENT.get(lab, ())}


def config_text(module: str, command: str) -> str:
    """cosmic-ray's configuration. The strings are written as JSON writes them, which TOML reads as
    basic strings: the GPU's test command holds quotes."""
    return (f'[cosmic-ray]\nmodule-path = {json.dumps(module)}\ntimeout = {TIMEOUT_S}\nexcluded-modules = []\n'
            f'test-command = {json.dumps(command)}\n\n[cosmic-ray.distributor]\nname = "local"\n')


def test_command(tests: Path, seed: int, device: str) -> str:
    """The lab's graded tests, run as `kernellab grade` runs them. On a GPU the tests marked
    `simulator` (the traffic meter, bounds checks) are skipped, and grade runs them in a simulator
    child: so does this, after the GPU's own (pytest's exit 5, no test marked so, passes)."""
    pytest = f"{sys.executable} -m pytest {tests} --target solutions -x -q -p no:cacheprovider --seed {seed}"
    if device == "sim":
        return f"{pytest} -m points"
    return (f"sh -c '{pytest} -m points && {{ KERNELLAB_DEVICE=sim {pytest} -m \"points and simulator\"; "
            f"code=$?; [ $code = 0 ] || [ $code = 5 ]; }}'")


class MutationSetupError(RuntimeError):
    """cosmic-ray could not set a lab up: one line, with what it said."""


def prepare(lab: str, shards: int, seed: int, limit: int | None, scratch: Path, device: str = "sim") -> list[Path]:
    """One copy of the course per shard, each holding cosmic-ray's work database for the lab (made
    once, then copied) with the other shards' mutants and those outside the stubs marked skipped."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult
    name = target.labs()[lab]
    first = scratch / f"lab{lab}-0"
    for part in COPIED:
        source = target.ROOT / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, first / part)
    tests = next((first / "tests" / "labs").glob(f"test_lab{lab}_*.py")).relative_to(first)
    (first / "cosmic-ray.toml").write_text(config_text(f"solutions/{name}.py", test_command(tests, seed, device)))
    init = subprocess.run([*COSMIC_RAY, "init", "cosmic-ray.toml", "mutants.sqlite"], cwd=first,
                          capture_output=True, text=True)
    if init.returncode != 0:
        said = (init.stderr.strip() or init.stdout.strip() or "no output").splitlines()[-1]
        raise MutationSetupError(f"cosmic-ray init failed for lab {lab} (exit {init.returncode}): {said}")
    copies = [first] + [shutil.copytree(first, scratch / f"lab{lab}-{shard}") for shard in range(1, shards)]
    inside = stub_lines(first / "solutions" / f"{name}.py", first / "labs" / f"{name}.py")
    with use_db(str(first / "mutants.sqlite"), WorkDB.Mode.open) as db:   # the copies hold the same items
        items = list(db.pending_work_items)
    dealt = shard_of(items, inside, shards, limit)
    for shard, copy in enumerate(copies):
        mine = set(dealt[shard])
        with use_db(str(copy / "mutants.sqlite"), WorkDB.Mode.open) as db:
            for item in items:
                if item.job_id not in mine:
                    db.set_result(item.job_id, WorkResult(
                        worker_outcome=WorkerOutcome.SKIPPED,
                        output="not this shard's, or outside the stub bodies, or not a slip"))
    return copies


def shard_of(items: list, inside: set[int], shards: int, limit: int | None = None) -> list[list[str]]:
    """The job ids each shard grades: the slips on the stub lines, in the module's order (operator,
    occurrence), dealt round-robin, at most `limit` each. The whole list is read before any result
    is written: setting results while cosmic-ray's pending query is being read skips some items and
    repeats others (the reports of 2026-12-06 graded about 3 in 4 mutants, some of them twice)."""
    counted = sorted((item for item in items if item.mutations[0].start_pos[0] in inside
                      and item.mutations[0].operator_name in SLIPS),
                     key=lambda item: (item.mutations[0].operator_name, item.mutations[0].occurrence))
    dealt = [[item.job_id for item in counted[shard::shards]] for shard in range(shards)]
    return [ids[:limit] if limit is not None else ids for ids in dealt]


def run_shard(copy: Path, device: str = "sim") -> Path:
    subprocess.run([*COSMIC_RAY, "exec", "cosmic-ray.toml", "mutants.sqlite"], cwd=copy,
                   capture_output=True, env={**os.environ, "KERNELLAB_DEVICE": device})
    return copy


def survivors(copies: list[Path], lab: str, inside: set[int] | None = None) -> tuple[int, list[dict]]:
    """The mutants graded in the lab's shards, and those the tests let through; with `inside`, only
    those on these lines of the solution."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome
    graded, found = 0, []
    for copy in copies:
        with use_db(str(copy / "mutants.sqlite"), WorkDB.Mode.open) as db:
            for item, result in db.completed_work_items:
                if result.worker_outcome == WorkerOutcome.SKIPPED or (
                        inside is not None and item.mutations[0].start_pos[0] not in inside):
                    continue
                graded += 1
                if result.test_outcome == TestOutcome.SURVIVED:
                    spec = item.mutations[0]
                    found.append({"line": spec.start_pos[0], "operator": spec.operator_name,
                                  "occurrence": spec.occurrence, "text": original_line(result.diff or ""),
                                  "diff": result.diff or ""})
    return graded, sorted(found, key=lambda s: (s["line"], s["operator"]))


def original_line(diff: str) -> str:
    """The mutated line as the solution has it, stripped: the diff's removed line (the copy's file
    is mutated in place while its shard runs, so it is not read)."""
    return next((line[1:].strip() for line in diff.splitlines()
                 if line.startswith("-") and not line.startswith("---")), "")


WHERE = {"sim": "in the simulator", "gpu": "on the GPU"}


def report(lab: str, graded: int, found: list[dict], seconds: float, seed: int, device: str = "sim") -> str:
    recorded = equivalents(lab)
    lines = [f"# Lab {lab}: mutation testing of the stubs' solutions (cosmic-ray)", "",
             f"Graded {graded} mutants inside the stub bodies of solutions/{target.labs()[lab]}.py on seed "
             f"{seed} (done {seconds:.0f} s into the run); {len(found)} survived, "
             f"{sum((s['operator'], s['text']) in recorded for s in found)} of them recorded as equivalent.", "",
             f"Each mutant was judged by the lab's graded tests {WHERE[device]} (`pytest -m points -x "
             f"--seed {seed}`): it is killed when one of them fails.", ""]
    for s in found:
        why = recorded.get((s["operator"], s["text"]))
        lines += [f"- line {s['line']}, {s['operator']} #{s['occurrence']}: "
                  + (f"equivalent: {why}" if why else "**survives: no check kills it**"),
                  "", "```diff", s["diff"].strip(), "```", ""]
    return "\n".join(lines)


def verdicts(text: str) -> tuple[int, collections.Counter]:
    """A report's count of graded mutants and its survivors, counted by (line, operator, occurrence)
    (one occurrence can hold two mutants: a number's +1 and -1): with the same solution and seed,
    two reports that agree on both agree on every mutant's verdict."""
    graded = int(re.search(r"^Graded (\d+) mutants", text, re.M).group(1))
    return graded, collections.Counter((int(line), operator, int(occurrence)) for line, operator, occurrence
                                       in re.findall(r"^- line (\d+), (\S+) #(\d+):", text, re.M))


def differences(lab: str, text: str, reference: Path) -> str:
    """'' when the report `text` gives every mutant the verdict of the committed report in
    `reference`, else one line saying which mutants differ."""
    path = reference / f"lab{lab}.md"
    if not path.exists():
        return f"lab {lab}: no report in {reference} to compare with"
    (graded, survived), (graded_ref, survived_ref) = verdicts(text), verdicts(path.read_text())
    if graded != graded_ref:
        return f"lab {lab}: {graded} mutants graded against {graded_ref} in {path}"
    odd = sorted(((survived - survived_ref) + (survived_ref - survived)).elements())
    return (f"lab {lab}: the verdict differs from {path} for " + ", ".join(
        f"line {line} {operator} #{occurrence} ({'survives here' if survived[line, operator, occurrence] > survived_ref[line, operator, occurrence] else 'killed here'})"
        for line, operator, occurrence in odd)) if odd else ""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernellab.grading.mutation", description=__doc__.split("\n\n")[0])
    parser.add_argument("labs", nargs="*")
    parser.add_argument("--shards", type=int, default=2, help="shards per lab, run side by side")
    parser.add_argument("--jobs", type=int, default=2, help="shards running at once, over all labs")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=int, default=None, help="at most this many mutants per shard")
    parser.add_argument("--out", type=Path, default=target.ROOT / "docs" / "mutation")
    parser.add_argument("--device", choices=sorted(WHERE), default="sim", help="where the graded tests run")
    parser.add_argument("--compare", type=Path, default=None, metavar="DIR",
                        help="reports (docs/mutation) whose per-mutant verdicts these must match; exit 1 where not")
    args = parser.parse_args(argv)
    if importlib.util.find_spec("cosmic_ray") is None:
        print("kernellab mutation: cosmic-ray is not installed (`make mutation` installs it)", file=sys.stderr)
        return 2
    unknown = [lab for lab in args.labs if lab not in target.labs()]
    if unknown or args.shards < 1 or args.jobs < 1:
        print(f"kernellab mutation: labs are {', '.join(target.labs())}; --shards and --jobs at least 1"
              + (f" (got {', '.join(unknown)})" if unknown else ""), file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    labs = args.labs or sorted(target.labs())
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kernellab-mutation-") as tmp:
        try:
            copies = {lab: prepare(lab, args.shards, args.seed, args.limit, Path(tmp), args.device) for lab in labs}
        except MutationSetupError as error:
            print(f"kernellab mutation: {error}", file=sys.stderr)
            return 2
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:   # every lab's shards in one pool
            running = {lab: [pool.submit(run_shard, copy, args.device) for copy in shards]
                       for lab, shards in copies.items()}
            differ = []
            for lab in labs:       # each lab's report as soon as its shards are done
                concurrent.futures.wait(running[lab])
                graded, found = survivors(copies[lab], lab)
                text = report(lab, graded, found, time.monotonic() - started, args.seed, args.device)
                (args.out / f"lab{lab}.md").write_text(text)
                print(text.splitlines()[2], flush=True)
                if args.compare is not None:
                    differ.append(differences(lab, text, args.compare))
                    print(differ[-1] or f"lab {lab}: every verdict as in {args.compare}", flush=True)
    return 1 if any(differ) else 0

if __name__ == "__main__":
    sys.exit(main())
