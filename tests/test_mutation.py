"""The mutation self-test's machinery, and every lab's mutants still fit their solution.

The full run (every mutant graded) is `make mutants` / `kernellab mutants`; it takes minutes.
"""

import pytest

from kernellab import grader, mutation, target

pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


@pytest.mark.parametrize("lab", sorted(target.labs()))
def test_every_lab_has_mutants_that_apply_to_its_solution(lab):
    found = mutation.mutants(lab)
    assert len(found) >= 6, f"lab {lab} needs planted bugs in tests/mutants/"
    for mutant in found:
        assert mutation.mutated_source(mutant) != \
            (target.ROOT / "solutions" / f"{target.labs()[lab]}.py").read_text()


def test_a_planted_bug_is_killed_and_a_harmless_edit_survives(tmp_path):
    env = grader.child_env("labs", None, 5)
    graded = grader.collect("00", env, tmp_path)
    bug = mutation.Mutant("00", "off-by-one in the guard", "if i < out.size:          # the guard",
                          "if i <= out.size - 2:    # the guard")
    harmless = mutation.Mutant("00", "a comment", "# the guard: the last block", "# the check: the last block")
    assert mutation.judge(bug, graded, seed=5, timeout=60).killed
    assert not mutation.judge(harmless, graded, seed=5, timeout=60).killed


def test_a_mutant_whose_text_is_gone_is_a_clear_error():
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutation.mutated_source(mutation.Mutant("00", "stale", "no such text", "x"))
