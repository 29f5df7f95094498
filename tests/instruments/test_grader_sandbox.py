"""Student code runs on a private copy (kernellab.grading.sandbox): hostile submissions that
delete or rewrite files in their own folder, their parent, their siblings and the course change
nothing outside their copy, and every other submission keeps its score.

The batch is graded by `kernellab grade --batch` in a child started in a sacrificial copy of the
course, so that a protection that failed would damage that copy, never this checkout.
"""

import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kernellab.course import target
from kernellab.grading import sandbox

SOLUTION = (target.ROOT / "solutions" / "lab00_indexing.py").read_text()
LAB01 = (target.ROOT / "solutions" / "lab01_launch_overhead.py").read_text()

# At import (so in the probe, in every test child and in the compile child): delete and rewrite
# whatever `PATTERNS` reach beside the lab file and beside the working directory, and, where
# `ABSOLUTE` names them, the neighbours' and the course's files by absolute path.
HOSTILE = '''
import glob as _glob, os as _os, shutil as _shutil
from pathlib import Path as _Path
_here = _Path(__file__).resolve().parent
_reached = []
for _pattern in PATTERNS:
    _reached += _glob.glob(str(_here / _pattern)) + _glob.glob(_pattern)
for _folder in ABSOLUTE:
    _reached += _glob.glob(_folder + "/**", recursive=True)
for _path in sorted(set(_reached), key=len, reverse=True):
    if _os.path.abspath(_path) == _os.path.abspath(__file__):
        continue                                  # stay importable, so every test runs this
    try:
        if _os.path.isfile(_path):
            open(_path, "w").write("rewritten by a hostile submission")
            _os.remove(_path)
        elif _os.path.isdir(_path) and not _os.path.islink(_path):
            _shutil.rmtree(_path)
    except OSError:
        pass
'''

COURSE_PARTS = ("kernellab", "labs", "tests/labs", "experiments", "data")
# Own folder, parent, siblings: what a submission reaches by climbing one folder, which the copy
# alone confines (it lies one folder deep in its workspace).
NEAR = ("*", "../*", "../*/*", "../*/labs/*")
# Climbing further reaches the machine's temporary folder and beyond: only a protection that
# makes the file system unwritable confines that, so these run only under one (never under the
# copy alone, where they would delete what this machine keeps in /tmp).
FAR = ("../../*/labs/*", "../../*/*/*")


def checksums(*folders: Path) -> dict[str, str]:
    return {str(path): hashlib.sha256(path.read_bytes()).hexdigest()
            for folder in folders for path in sorted(folder.rglob("*"))
            if path.is_file() and "__pycache__" not in path.parts}


def sacrificial_course(folder: Path) -> Path:
    for part in COURSE_PARTS:
        shutil.copytree(target.ROOT / part, folder / part,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(target.ROOT / "pyproject.toml", folder / "pyproject.toml")
    return folder


def submission(batch: Path, name: str, lab00: str) -> None:
    (batch / name / "labs").mkdir(parents=True)
    (batch / name / "labs" / "lab00_indexing.py").write_text(lab00)
    (batch / name / "labs" / "lab01_launch_overhead.py").write_text(LAB01)
    (batch / name / "notes.md").write_text(f"{name}'s notes\n")


def test_hostile_submissions_change_nothing_outside_their_copy(tmp_path):
    protection = sandbox.protection()
    course, batch = sacrificial_course(tmp_path / "course"), tmp_path / "batch"
    # Climbing far and absolute paths are confined only by a protection stronger than the copy.
    confined = protection.kind != "copy"
    absolute, patterns = ([str(course), str(batch)], NEAR + FAR) if confined else ([], NEAR)
    hostile = f"ABSOLUTE = {absolute!r}\nPATTERNS = {patterns!r}\n" + HOSTILE + SOLUTION
    for name, lab00 in (("alice", SOLUTION), ("mallory", hostile)):   # graded side by side (-j 2)
        submission(batch, name, lab00)
    before = checksums(course, batch)
    env = {key: value for key, value in os.environ.items() if not key.startswith("KERNELLAB_")}
    # the grade's workspaces in a temp folder of its own, beside the system's and as far from the
    # course: another pytest-xdist worker's grade has its workspaces in the system's meanwhile
    workspaces = Path(tempfile.mkdtemp(prefix="kernellab-test-workspaces-"))
    workspaces.chmod(0o1777)     # as /tmp is: a workspace's own uid (protection "user") reaches into it
    try:
        done = subprocess.run([sys.executable, "-m", "kernellab.cli", "grade", "00", "--batch",
                               str(batch), "--out", str(tmp_path / "reports"), "--seed", "11"],
                              cwd=course, env={**env, "KERNELLAB_DEVICE": "sim", "TMPDIR": str(workspaces)},
                              capture_output=True, text=True, timeout=600)
        outlived = list(workspaces.glob("kernellab-workspace-*/submission"))
    finally:
        shutil.rmtree(workspaces, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert checksums(course, batch) == before, f"protection: {protection.describe()}"
    rows = {row["submission"]: row for row in csv.DictReader(open(tmp_path / "reports" / "gradebook.csv"))}
    for neighbour in ("alice",):
        report = json.loads((tmp_path / "reports" / f"{neighbour}.results.json").read_text())
        assert float(rows[neighbour]["score"]) == float(rows[neighbour]["max_score"]) == 14, report
        assert f"protection: {protection.kind}" in report["output"]
    assert not outlived, "a workspace outlived its grade"


def test_the_workspace_holds_copies_only_and_is_deleted(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "lab00_indexing.py").write_text(SOLUTION)
    (tmp_path / "sub" / "notes.md").write_text("not a lab file")
    with sandbox.Workspace(tmp_path / "sub") as space:
        assert sorted(p.name for p in space.labs_dir.iterdir()) == ["lab00_indexing.py"]
        assert (space.course / "tests" / "labs").is_dir() and not (space.course / "solutions").exists()
        shown = space.run([sys.executable, "-c", "import os, kernellab; print(os.getcwd()); "
                           "print(kernellab.__file__); print(os.environ['HOME'])"], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)
        cwd, package, home = shown.stdout.split()
        assert Path(cwd) == space.course and Path(package).is_relative_to(space.course)
        assert Path(home) == space.scratch
        if space.protection.kind != "copy":    # the copy itself is out of the children's reach
            refused = space.run([sys.executable, "-c", f"open({str(space.labs_dir / 'x')!r}, 'w')"],
                                env=dict(os.environ), capture_output=True, text=True)
            assert refused.returncode != 0 and ("Permission denied" in refused.stderr
                                                or "Read-only file system" in refused.stderr)
    assert not space.root.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid protection needs a grader running as root")
def test_as_root_the_children_run_as_a_uid_of_their_own():
    if sandbox.protection().kind != "user":
        pytest.skip(f"this machine gives {sandbox.protection().describe()}")
    with sandbox.Workspace() as first, sandbox.Workspace() as second:
        ids = [int(space.run([sys.executable, "-c", "import os; print(os.getuid())"], env=dict(os.environ),
                             capture_output=True, text=True).stdout) for space in (first, second)]
        assert ids[0] != ids[1] and 0 not in ids
