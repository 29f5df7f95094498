"""Which implementation is under test: the student's `labs/` or the instructor's `solutions/`.

One resolver for tests, notebooks, the tour and the grader: `KERNELLAB_TARGET=labs|solutions`
(default `labs`), or `pytest --target ...`, which sets the same variable.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from pathlib import Path

from . import device

TARGETS = ("labs", "solutions")
PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def is_course(folder: Path) -> bool:
    return (folder / "labs").is_dir() and (folder / "tests").is_dir()


def find_root(start: Path | None = None) -> Path:
    """The course folder: the working directory or the nearest folder above it that holds labs/
    and tests/, else the folder the package sits in (a clone installed with `pip install -e`).

    Found from the working directory so that a plain `pip install` of kernellab grades the
    course it is run in (a student release, a Colab clone)."""
    start = (start or Path.cwd()).resolve()
    return next((folder for folder in (start, *start.parents) if is_course(folder)), PACKAGE_ROOT)


ROOT = find_root()
LAB_FILE = re.compile(r"^lab(\d\d)_([a-z0-9_]+)\.py$")


def current() -> str:
    value = os.environ.get("KERNELLAB_TARGET", "labs").strip().lower() or "labs"
    if value not in TARGETS:
        raise ValueError(f"KERNELLAB_TARGET must be one of {'|'.join(TARGETS)}, not {value!r}")
    return value


def labs(root: Path = ROOT) -> dict[str, str]:
    """Every lab present, as {'00': 'lab00_indexing', ...}, from the starter files."""
    found = {}
    for path in sorted((root / "labs").glob("lab*.py")):
        match = LAB_FILE.match(path.name)
        if match:
            found[match.group(1)] = path.stem
    return found


def has_solutions(root: Path = ROOT) -> bool:
    """False in a student release (`kernellab release`), which ships no solutions/."""
    return (root / "solutions").is_dir()


def require_solutions() -> None:
    """Instructor commands (check, mutants, bench, release) stop here in a student release."""
    if not has_solutions():
        raise ValueError(f"this needs solutions/, which {ROOT} does not have (a student release?)")


def lab_number(lab: str | int) -> str:
    """'0', 0, '00', 'lab00' and 'lab00_indexing' all mean lab '00'."""
    text = str(lab).strip().lower()
    text = text.removeprefix("labs/").removesuffix(".py").removeprefix("lab")
    digits = re.match(r"^(\d{1,2})(_.*)?$", text)
    if not digits:
        raise ValueError(f"not a lab: {lab!r} (write a number such as 2 or 02, or lab02_...)")
    number = digits.group(1).zfill(2)
    if number not in labs():
        raise ValueError(f"no lab {number}: the labs present are {', '.join(labs()) or 'none'}")
    return number


def module_name(lab: str | int, target: str | None = None) -> str:
    return f"{target or current()}.{labs()[lab_number(lab)]}"


def load(lab: str | int, target: str | None = None):
    """Import lab `lab` from the chosen target (numba.cuda then runs in the chosen device mode).

    With KERNELLAB_LABS_DIR set (the grader, on a submission), the starter target is read from
    that folder instead of labs/.
    """
    device.setup()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    name = module_name(lab, target)
    if os.environ.get("KERNELLAB_GRADING") and name.startswith("labs."):
        forbid_solutions()
    labs_dir = os.environ.get("KERNELLAB_LABS_DIR")
    if name.startswith("labs.") and labs_dir and name not in sys.modules:
        importlib.import_module("labs")
        file = Path(labs_dir) / f"{name.split('.', 1)[1]}.py"
        if not file.exists():
            raise FileNotFoundError(f"the submission has no {file.name} (looked in {labs_dir})")
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return module
    return importlib.import_module(name)


class _SolutionsBlocker:
    """While grading the starter, `import solutions...` fails: the answers are off limits."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "solutions" or fullname.startswith("solutions."):
            raise ImportError(f"labs/ may not import {fullname}: graded code must stand alone")
        return None


def forbid_solutions():
    if not any(isinstance(finder, _SolutionsBlocker) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SolutionsBlocker())
    for name in [n for n in sys.modules if n == "solutions" or n.startswith("solutions.")]:
        del sys.modules[name]
