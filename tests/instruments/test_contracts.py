"""Every stub's contract is data beside its test (`CONTRACT` in tests/labs/test_labNN_*.py), and it
holds both ways: each clause a stub states has a graded check, and each graded check exercises a
clause a stub states (kernellab.grading.contract)."""

import importlib.util

import pytest

from kernellab.course import target
from kernellab.grading import contract

TESTS = target.ROOT / "tests" / "labs"


def graded_tests(module) -> set[str]:
    return {name for name, test in vars(module).items() if name.startswith("test_")
            and any(mark.name == "points" for mark in getattr(test, "pytestmark", ()))}


def lab_tests(lab: str):
    path = next(TESTS.glob(f"test_lab{lab}_*.py"))
    spec = importlib.util.spec_from_file_location(f"contract_of_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lab", sorted(target.labs()))
def test_every_stub_has_a_contract_that_its_tests_check(lab):
    module = lab_tests(lab)
    assert hasattr(module, "CONTRACT"), f"tests/labs for lab {lab} declare no CONTRACT"
    starter = target.ROOT / "labs" / f"{target.labs()[lab]}.py"
    problems = contract.audit(starter, module.CONTRACT, graded_tests(module))
    assert not problems, f"lab {lab}:\n" + "\n".join(problems)


def test_the_audit_finds_an_unchecked_clause_and_an_unstated_check(tmp_path):
    starter = tmp_path / "lab99_demo.py"
    starter.write_text('def scale(x, out=None):\n    """out = 2 * x. Contract: returns out; ValueError for an '
                       'empty x. Hint 99.1 in the notebook."""\n    raise NotImplementedError("Lab 99.1: scale")\n')
    rows = [contract.clause("scale", "out = 2 * x.", "test_scale"),
            contract.clause("scale", "returns out", "test_scale"),
            contract.clause("scale", "returns a copy", "test_copy")]
    problems = contract.audit(starter, rows, {"test_scale", "test_extra"})
    assert problems == [
        "scale: says 'returns a copy', which its docstring does not state",
        "scale: 'returns a copy' names test_copy, not a graded test",
        "scale: states 'ValueError for an empty x.', which no clause checks",
        "test_extra: checks what no clause states"]


def test_an_exercise_that_is_a_value_is_a_stub_with_its_comment():
    source = ('GIVEN = 1\n\n# a note, not an exercise\nPLAIN = 2\n\n# 99.2: a block size that fills the SM;\n'
              '# it must divide 1024. Hint 99.2 in the notebook.\nTUNED = GIVEN\n')
    assert contract.stub_constants(source) == {
        "TUNED": "99.2: a block size that fills the SM; it must divide 1024. Hint 99.2 in the notebook."}
