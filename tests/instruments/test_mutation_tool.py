"""The cosmic-ray driver (`make mutation`, kernellab.grading.mutation) counts only mutants inside
the stubs' bodies, and its report says which survivors are recorded as equivalent. cosmic-ray
itself is not installed by `make install`: these check the parts that do not run it."""

from kernellab.course import target
from kernellab.grading import mutation


def test_only_the_stub_bodies_are_mutated():
    solution, starter = (target.ROOT / part / "lab00_indexing.py" for part in ("solutions", "labs"))
    lines = solution.read_text().splitlines()
    inside = mutation.stub_lines(solution, starter)
    body = {i + 1 for i, line in enumerate(lines) if "return (n + block - 1) // block" in line}
    given = {i + 1 for i, line in enumerate(lines) if "def reference_axpb" in line or "grid = (blocks_for(cols" in line}
    assert body <= inside and not (given & inside)


def test_the_report_marks_survivors_recorded_as_equivalent(monkeypatch):
    monkeypatch.setattr(mutation, "equivalents", lambda lab: {("core/NumberReplacer", "x = 1"): "x is never read"})
    found = [{"line": 3, "operator": "core/NumberReplacer", "occurrence": 0, "text": "x = 1", "diff": "-x = 1\n+x = 2"},
             {"line": 9, "operator": "core/AddNot", "occurrence": 0, "text": "if a:", "diff": "-if a:\n+if not a:"}]
    text = mutation.report("00", 5, found, 12.0, 1)
    assert "5 mutants" in text and "2 survived, 1 of them recorded as equivalent" in text
    assert "line 3, core/NumberReplacer #0: equivalent: x is never read" in text
    assert "line 9, core/AddNot #0: **survives: no check kills it**" in text


def test_every_recorded_equivalent_names_a_lab_and_a_reason():
    for lab in target.labs():
        for (operator, line), why in mutation.equivalents(lab).items():
            assert operator in mutation.SLIPS and line and why, (lab, operator, line)
