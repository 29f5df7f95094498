"""Labs 07 and 08 report a bad measurement instead of hiding it (pure functions, no GPU needed)."""

import pytest

import kernellab  # noqa: F401
from kernellab import tour

LAB07, LAB08 = tour.experiment("07"), tour.experiment("08")


def test_a_hidden_share_outside_0_1_is_a_problem():
    assert LAB07.fraction_problems([0.7, 1.0, 0.0]) == []
    assert LAB07.fraction_problems([0.9, 1.48, -0.34]) == [
        "run 2: hidden share 1.480 is outside [0, 1]", "run 3: hidden share -0.340 is outside [0, 1]"]


def test_target_lines_skip_what_is_not_a_target():
    """A live record carries "live": True beside the targets (notebook 07 once crashed on it)."""
    records = {"targets": {"provenance": {}, "live": True, "hidden_fraction": {
        "value": 1.2, "target": 0.8, "met": False, "method": "m", "problems": ["run 1: x"]}}}
    lines = LAB07.target_lines(records)
    assert lines[0].startswith("hidden_fraction      1.2 (target 0.8) MISSED")
    assert lines[-1] == "    MEASUREMENT PROBLEM: run 1: x"


def test_gaps_are_signed_and_a_negative_one_is_a_problem():
    assert LAB08.signed_gap(2.1, 0.02) == pytest.approx(0.05)
    row = {"kernel_ms": 0.02, "eager_ms": 2.5, "graph_ms": 1.9,
           "eager_gap": LAB08.signed_gap(2.5, 0.02), "graph_gap": LAB08.signed_gap(1.9, 0.02)}
    assert row["graph_gap"] == pytest.approx(-0.05)
    problems = LAB08.gap_problems(row)
    assert len(problems) == 1 and problems[0].startswith("graph: the total (1.9000 ms) is 5.0% below")


def test_provenance_records_the_settings_that_change_results(monkeypatch):
    from kernellab import reference
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    settings = reference.provenance()["settings"]
    assert settings["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"
    assert settings["clocks"]        # read through nvidia-smi on a GPU; says why not otherwise
