"""A stub's contract as data: each clause its docstring states, with the graded checks that exercise it.

A lab's test module declares `CONTRACT`, a list of `Clause`s: the stub, the words of its docstring
(or, for a kernel, of its comment) as the student reads them in labs/, and the graded tests that
check exactly that. `audit` holds a lab to it both ways:
- every sentence a stub states is covered by a clause, and every clause has a graded check, so no
  clause the student was given goes unchecked;
- every graded test is named by a clause, so nothing the stubs do not state is checked, and every
  valid alternative can get full marks.
Sentences that only point elsewhere ("Hint 00.3 in the notebook.") state nothing to check.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from kernellab.course import target

STUB_CALL = "NotImplementedError"
EXERCISE = re.compile(r"^\d\d\.\d+:")                       # "06.5: a configuration ..."
POINTERS = re.compile(r"^(Hint|Hints|See)\b|^\w+:$")      # "Hint 00.3 in the notebook.", "Budget:"


@dataclass(frozen=True)
class Clause:
    stub: str                   # the stub's name in labs/labNN_*.py
    says: str                   # words of the stub's docstring or comment, as written there
    checks: tuple[str, ...]     # the graded tests that exercise this clause


def clause(stub: str, says: str, *checks: str) -> Clause:
    return Clause(stub, says, tuple(checks))


def flat(text: str) -> str:
    """Text with comment marks dropped and runs of white space made one space."""
    return " ".join(line.strip().removeprefix("#").strip() for line in text.splitlines()).strip()


def raises_stub(function: ast.FunctionDef, own_body_only: bool = False) -> bool:
    """Whether `function` raises NotImplementedError: anywhere in it, or with `own_body_only`, not
    inside a function nested in it (Lab 05's fused_kernels is given code that holds a stub kernel)."""
    pending = list(function.body)
    while pending:
        node = pending.pop()
        if own_body_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Raise) and node.exc is not None and STUB_CALL in ast.unparse(node.exc):
            return True
        pending.extend(ast.iter_child_nodes(node))
    return False


def stubs(starter: Path) -> dict[str, str]:
    """Each stub of a starter file (a function whose body raises NotImplementedError), with what it
    states: its docstring and the comments inside it, flattened."""
    source = starter.read_text()
    lines = source.splitlines()
    found = {}
    for node in ast.walk(target.parse_source(source)):
        if not isinstance(node, ast.FunctionDef) or not raises_stub(node):
            continue
        body = lines[node.lineno: node.end_lineno]          # after the def line: comments are no nodes
        comments = [line.split("#", 1)[1] for line in body if line.strip().startswith("#")]
        found[node.name] = flat((ast.get_docstring(node) or "") + "\n" + "\n".join(comments))
    found.update(stub_constants(source))
    return found


def stub_constants(source: str) -> dict[str, str]:
    """Exercises that are a value, not a function (`TUNED = AS_WRITTEN` under a comment that opens
    with its number, "# 06.5: ..."): each with what its comment states, flattened."""
    lines = source.splitlines()
    found = {}
    for node in target.parse_source(source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        above = node.lineno - 1
        while above > 0 and lines[above - 1].strip().startswith("#"):
            above -= 1
        comments = [line.strip()[1:] for line in lines[above: node.lineno - 1]]
        if comments and EXERCISE.match(comments[0].strip()):
            found[node.targets[0].id] = flat("\n".join(comments))
    return found


def sentences(text: str) -> list[str]:
    """A stub's statement cut into sentences (at '.', ';' or ':' before a space), pointers and
    labels ("Contract:") left out."""
    parts = [p.strip() for p in re.split(r"(?<=[.;:])\s+", text) if p.strip()]
    return [p for p in parts if not POINTERS.match(p)]


def audit(starter: Path, contract: list[Clause], graded: set[str]) -> list[str]:
    """What is wrong with `contract` as the contract of the starter's stubs, given the names of the
    graded tests in its module: one line each, none when it holds."""
    stated = stubs(starter)
    problems = []
    for c in contract:
        if c.stub not in stated:
            problems.append(f"{c.stub}: no such stub in {starter.name}")
        elif flat(c.says) not in stated[c.stub]:
            problems.append(f"{c.stub}: says {c.says!r}, which its docstring does not state")
        if not c.checks:
            problems.append(f"{c.stub}: {c.says!r} has no check")
        problems += [f"{c.stub}: {c.says!r} names {check}, not a graded test" for check in c.checks
                     if check not in graded]
    for stub, text in stated.items():
        mine = [flat(c.says) for c in contract if c.stub == stub]
        if not mine:
            problems.append(f"{stub}: no contract")
            continue
        problems += [f"{stub}: states {sentence!r}, which no clause checks" for sentence in sentences(text)
                     if not any(says in sentence or sentence in says for says in mine)]
    named = {check for c in contract for check in c.checks}
    problems += [f"{test}: checks what no clause states" for test in sorted(graded - named)]
    return problems
