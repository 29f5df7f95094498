"""Fixtures shared by the tests of kernellab itself (the graded tests use the plugin's)."""

import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest


@pytest.fixture
def grade_in_the_simulator(monkeypatch):
    """The grader's children run in the simulator even on a GPU machine: a hostile kernel that
    never ends must not hold a real GPU. The children inherit KERNELLAB_DEVICE, so this is
    what they see; the grader then runs every test in one simulator child (see
    kernellab.grading.runner.device_groups)."""
    monkeypatch.setenv("KERNELLAB_DEVICE", "sim")


@pytest.fixture
def world_readable_tmp():
    """A temporary folder every user may read: as root, the Gradescope test drops to an
    unprivileged user, who cannot enter pytest's own (0700) temporary folders."""
    with tempfile.TemporaryDirectory(prefix="kernellab-") as folder:
        os.chmod(folder, 0o755)
        yield Path(folder)


@pytest.fixture(scope="session")
def fresh_venv():
    """make(folder, python) -> the python of a new venv (no pip of its own) whose site-packages
    links to everything the test venv has installed except kernellab, so installing a
    kernellab into it takes seconds where a fresh `pip install numba-cuda[cu13]` takes a minute.
    Links, not a .pth file: cuda-pathfinder finds the CUDA libraries only in site-packages."""
    installed = [entry for entry in Path(sysconfig.get_paths()["purelib"]).iterdir()
                 if not entry.name.lower().startswith(("kernellab", "__editable__"))]

    def make(venv: Path, python: str = sys.executable) -> Path:
        """`python` must be this interpreter's version (the packages are built for it)."""
        subprocess.run([python, "-m", "venv", "--without-pip", str(venv)], check=True)
        site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; "
                                    "print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True).stdout.strip())
        for entry in installed:
            (site / entry.name).symlink_to(entry)
        return venv / "bin" / "python"

    return make
