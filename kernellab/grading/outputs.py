"""Where a command may write, checked before any grading, collecting or copying starts: a folder
this user can write, and outside the course unless under its git-ignored build/ (a release or a
Gradescope bundle copies the course's folders, so a gradebook left among them ships with the
next one, names and scores included)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kernellab.course import target
from kernellab.grading import release

# Inside the course, a single grade's report may go only where nothing ships: its top level (a
# student's `kernellab grade` writes results.json there, git-ignored), build/ and .kernellab/.
REPORT_FOLDERS = ("build", ".kernellab")


def writable(path: Path, what: str) -> Path:
    """`path` resolved, once this user is known to be able to create it or, if it exists, write
    it: a probe file is made and removed in the nearest folder that exists. A ValueError names
    the option and the folder otherwise."""
    path = Path(path).resolve()
    if path.is_file() and not os.access(path, os.W_OK):
        raise ValueError(f"{what} {path} is read-only: give a path you can write")
    folder = path if path.is_dir() else path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        raise ValueError(f"{what} {path} cannot be made: {folder} is a file")
    try:
        handle, probe = tempfile.mkstemp(dir=folder, prefix=".kernellab-probe-")
        os.close(handle)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"{what} {path} cannot be written ({exc.strerror} in {folder}): give a "
                         "folder you can write") from None
    return path


def output_folder(path: Path, what: str) -> Path:
    """A folder for a command's outputs: not a file, outside the course (or under build/), and
    writable (see `writable`)."""
    return writable(release.check_output(path, what, new=False), what)


def report_file(path: Path, what: str = "--results") -> Path:
    """A single grade's report: a file path (not a folder), writable, and inside the course only at
    its top level or under build/ or .kernellab/."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{what} {path} is a folder: give the path of a JSON file")
    resolved, root = path.resolve(), target.ROOT.resolve()
    allowed = [root, *(root / name for name in REPORT_FOLDERS)]
    inside = root in resolved.parents
    if inside and resolved.parent != root and not any(a in resolved.parents for a in allowed[1:]):
        raise ValueError(f"{what} {resolved} lies inside the course folder {root}, whose folders "
                         f"ship with a release: write it at the top level, under {root / 'build'}, "
                         "or outside the course")
    return writable(path, what)
