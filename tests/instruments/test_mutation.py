"""The mutation self-test's machinery, and every lab's mutants and alternatives still fit their solution.

The full run (every mutant graded on 3 seeds) is `make mutants` / `kernellab mutants`; it takes minutes.
"""

import pytest

from kernellab.grading import runner, mutants
from kernellab.course import target

pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


@pytest.mark.parametrize("lab", sorted(target.labs()))
def test_every_lab_has_mutants_that_apply_to_its_solution(lab):
    assert len(mutants.mutants(lab)) >= 6, f"lab {lab} needs planted bugs in tests/mutants/"
    solution = (target.ROOT / "solutions" / f"{target.labs()[lab]}.py").read_text()
    for mutant in mutants.load(lab):
        assert mutants.mutated_source(mutant) != solution


def test_a_bug_is_killed_on_every_seed_and_an_alternative_passes(tmp_path):
    env = runner.child_env("labs", None, 5)
    graded = runner.collect(["00"], env, tmp_path)["00"]
    bug = mutants.Mutant("00", "off-by-one in the guard", "if i < out.size:          # the guard",
                          "if i <= out.size - 2:    # the guard")
    harmless = mutants.Mutant("00", "a comment", "# the guard: the last block", "# the check: the last block",
                               valid=True)
    killed = mutants.judge(bug, graded, seeds=(5, 6))
    assert killed.killed and killed.as_expected and list(killed.lost) == [5, 6]
    assert all(why.startswith("[call] ") for why in killed.why.values()), killed.why   # the error, not the seed note
    passed = mutants.judge(harmless, graded, seeds=(5,))
    assert passed.passed and passed.as_expected


def test_a_bug_that_escapes_one_seed_is_not_killed():
    bug = mutants.Mutant("00", "caught on seed 1 only", "x", "y")
    verdict = mutants.Verdict(bug, {1: "test_axpb_matches_numpy", 2: ""})
    assert not verdict.killed and not verdict.as_expected
    assert verdict.describe() == "caught on seed 1 only (escapes seed 2)"
    alternative = mutants.Verdict(mutants.Mutant("00", "valid", "x", "y", valid=True),
                                   {1: "", 2: "test_axpb_matches_numpy"})
    assert not alternative.as_expected
    assert alternative.describe() == "valid (lost test_axpb_matches_numpy on seed 2)"
    said = mutants.Verdict(alternative.mutant, {1: "test_x"}, {1: "[call] AssertionError: out[3] = nan"})
    assert said.describe() == "valid (lost test_x on seed 1: [call] AssertionError: out[3] = nan)"


def test_a_mutant_whose_text_is_gone_is_a_clear_error():
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutants.mutated_source(mutants.Mutant("00", "stale", "no such text", "x"))
