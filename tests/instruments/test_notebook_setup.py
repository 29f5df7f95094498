"""Every notebook opens with the same setup cell and its own Colab badge (kernellab.course.notebooks)."""

import io
import json
import shutil
import subprocess
import sys
import types
from contextlib import redirect_stdout

import pytest

from kernellab.gpu import device
from kernellab.course import notebooks, target

PATHS = sorted(notebooks.NOTEBOOKS.glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(PATHS) >= 9


@pytest.mark.parametrize("path", PATHS, ids=[p.name for p in PATHS])
def test_each_notebook_carries_the_setup_cell_and_its_badge(path):
    cells = json.loads(path.read_text())["cells"]
    first_code = next(cell for cell in cells if cell["cell_type"] == "code")
    assert "".join(first_code["source"]) == notebooks.setup_cell_source(), \
        f"{path.name}: run python -m kernellab.course.notebooks --write-setup"
    assert notebooks.colab_badge(path.name) in "".join(cells[0]["source"]), f"{path.name}: no Colab badge"


def test_the_readme_has_a_colab_badge():
    assert notebooks.colab_badge(PATHS[0].name) in (target.ROOT / "README.md").read_text()


def test_writing_the_setup_again_changes_nothing(tmp_path):
    copy = tmp_path / PATHS[0].name
    shutil.copy(PATHS[0], copy)
    assert notebooks.write_setup(copy) is False and copy.read_bytes() == PATHS[0].read_bytes()


def run_setup_cell(monkeypatch, on_colab: bool, cloned: bool = False) -> tuple[str, list, list]:
    """Execute the setup cell with Colab, git, pip and the file system faked: (printed, commands, cwd)."""
    commands, moves = [], []
    if on_colab:
        monkeypatch.setitem(sys.modules, "google.colab", types.ModuleType("google.colab"))
    monkeypatch.setenv("KERNELLAB_REPO", "https://example.org/fork.git")
    monkeypatch.setattr(subprocess, "run", lambda args, **kw: commands.append((args, kw.get("cwd"))))
    monkeypatch.setattr("os.path.isdir", lambda path: cloned)
    monkeypatch.setattr("os.chdir", moves.append)
    monkeypatch.setattr(sys, "path", list(sys.path))
    printed = io.StringIO()
    with redirect_stdout(printed):
        exec(notebooks.setup_cell_source(), {})
    return printed.getvalue(), commands, moves


def test_on_colab_the_cell_clones_installs_cu12_with_the_constraints_and_moves_into_the_clone(monkeypatch):
    printed, commands, moves = run_setup_cell(monkeypatch, on_colab=True)
    (clone, _), (install, install_cwd) = commands
    assert clone == ["git", "clone", "--depth", "1", "https://example.org/fork.git", "/content/kernellab"]
    assert install[1:] == ["-m", "pip", "install", "-q", "-c", "constraints.txt", "-e", ".[cu12]"]
    assert install_cwd == "/content/kernellab" and moves == ["/content/kernellab/notebooks"]
    assert sys.path[0] == "/content/kernellab" and "(on Colab)" in printed


def test_on_colab_a_second_run_does_not_clone_again(monkeypatch):
    _, commands, moves = run_setup_cell(monkeypatch, on_colab=True, cloned=True)
    assert commands == [] and moves == ["/content/kernellab/notebooks"]


def test_elsewhere_the_cell_only_imports_kernellab_and_prints_the_mode(monkeypatch):
    printed, commands, moves = run_setup_cell(monkeypatch, on_colab=False)
    assert commands == [] and moves == []
    assert printed.strip() == f"kernellab mode: {device.mode()}"
