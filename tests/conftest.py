"""Fixtures shared by the tests of kernellab itself (the graded tests use the plugin's)."""

import pytest


@pytest.fixture
def grade_in_the_simulator(monkeypatch):
    """The grader's children run in the simulator even on a GPU machine: a hostile kernel that
    never ends must not hold a real GPU. The children inherit KERNELLAB_DEVICE, so this is
    what they see; the grader then runs every test in one simulator child (see
    kernellab.grader.device_groups)."""
    monkeypatch.setenv("KERNELLAB_DEVICE", "sim")
