"""The tour, bench and notebooks on a student's own work (`--target labs`): a finished starter runs,
whatever the solutions add beyond it (solution-side kernels are skipped, saying so), and an
unfinished one names each stub still to write, one line each, never a traceback."""

from __future__ import annotations

import dataclasses

import pytest

from kernellab import cli
from kernellab.course import protocol, settings, target, tour


@pytest.mark.parametrize("number", list(target.labs()))
def test_a_lab_declares_in_its_starter_all_but_its_solution_side_kernels(number):
    """What a declaration names is in the starter (given code, or a stub the student writes),
    except the kernels it marks solution side, which are in the solutions' SOLUTION_SIDE alone.
    Lab 05 declared its staged and vectorised softmax unmarked, so the tour of a finished
    starter refused it for two kernels the starter never asks for."""
    declared = protocol.declaration(number)
    starter, solution = target.load(number, "labs"), target.load(number, "solutions")
    for name in (*(k.name for k in declared.kernels), *declared.references):
        assert hasattr(solution, name), f"lab {number}: the solutions lack {name}"
    for kernel in declared.kernels:
        assert hasattr(starter, kernel.name) != kernel.solution_side, (
            f"lab {number}: {kernel.name} is {'' if kernel.solution_side else 'not '}declared "
            f"solution side, yet the starter {'defines' if hasattr(starter, kernel.name) else 'lacks'} it")
        assert kernel.solution_side == (kernel.name in getattr(solution, "SOLUTION_SIDE", ())), number


def declaration_alone(number: str) -> protocol.Lab:
    """The lab's declaration without its own checks and benchmarks: `protocol.validate` then
    checks only the names it declares (in well under a second, in the simulator)."""
    return dataclasses.replace(protocol.declaration(number), validate=lambda lab, seed: [],
                               benchmarks=lambda lab, torch: [])


def test_the_starter_validates_without_its_solution_side_kernels_and_says_so():
    declared = declaration_alone("05")
    solution_side = [k.name for k in declared.kernels if k.solution_side]
    assert solution_side == ["softmax_staged_kernel", "softmax_vector_kernel"]
    with settings.using(target="labs"):
        protocol.validate(declared)
        note = protocol.skipped_note(declared, declared.module())
    assert note.startswith("labs.lab05_reduction_fusion has no softmax_staged_kernel, "
                           "softmax_vector_kernel: solution side")
    with settings.using(target="solutions"):
        assert protocol.skipped_note(declared, declared.module()) is None


def test_the_solutions_must_define_their_solution_side_kernels():
    declared = declaration_alone("05")
    missing = protocol.Kernel("no_such_kernel", "one block per row", solution_side=True)
    declared = dataclasses.replace(declared, kernels=(*declared.kernels, missing))
    with settings.using(target="solutions"), pytest.raises(AssertionError, match=(
            "lab 05 declares no_such_kernel, which solutions.lab05_reduction_fusion does not define")):
        protocol.validate(declared)


def test_the_tour_of_an_unfinished_starter_names_each_stub_in_one_line(capsys, tmp_path):
    assert cli.main(["tour", "05", "--target", "labs", "--figures", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    stubs = target.stubs(target.load("05", "labs"))
    assert [stub.exercise for stub in stubs] == [
        "Lab 05.2: softmax_online_kernel", "Lab 05.1: softmax_fused_kernel",
        "Lab 05.3: layernorm_fused_kernel", "Lab 05.4: softmax_ledger", "Lab 05.4: layernorm_ledger"]
    for stub in stubs:
        assert (f"    {stub.exercise}: still a stub (labs/lab05_reduction_fusion.py, line {stub.line})"
                in captured.out.splitlines())
    assert ("05    todo" in captured.out
            and "unfinished: 5 stubs to write (Lab 05.1, 05.2, 05.3, 05.4) in "
                "labs/lab05_reduction_fusion.py" in captured.out)


def test_a_failure_that_is_not_a_stubs_keeps_its_traceback():
    """Only a stub still in the lab's file is work to do: any other failure (None here) is
    reported as an error with its traceback, showing where the lab broke."""
    with settings.using(target="labs"):
        assert tour.stopped_by_a_stub("05", ValueError("rows must be positive")) is None
        assert tour.stopped_by_a_stub("05", NotImplementedError("Lab 05.9: not in the file")) is None
        wrapped = AssertionError("lab 05 softmax: fused: NotImplementedError: Lab 05.1: softmax_fused_kernel")
        assert len(tour.stopped_by_a_stub("05", wrapped).unfinished) == 5
