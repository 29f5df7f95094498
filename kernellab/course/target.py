"""Which implementation is under test: the student's `labs/` or the instructor's `solutions/`.

Which one runs is a setting (kernellab.course.settings: `--target`, then
`KERNELLAB_TARGET=labs|solutions`, then `labs`); `load` imports a lab from it.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
import sys
import threading
import typing
from pathlib import Path

from kernellab.gpu import device
from kernellab.course import settings

PACKAGE_ROOT = Path(__file__).resolve().parents[2]   # kernellab/course/target.py -> the clone


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
_PARSING = threading.Lock()


def parse_source(source: str, filename: str = "<unknown>") -> ast.Module:
    """`ast.parse`, one thread at a time. CPython 3.11 keeps the AST builder's recursion depth in
    state the threads share: two grades parsing at once in a batch's pool can fail one of them
    with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905)."""
    with _PARSING:
        return ast.parse(source, filename=filename)
LAB_FILE = re.compile(r"^lab(\d\d)_([a-z0-9_]+)\.py$")


def current() -> str:
    """The target of code not handed one: the running command's choice, KERNELLAB_TARGET, labs."""
    return settings.target()


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
    """The one reader of lab numbers: '0', 0, '00', 'lab00', 'lab00_indexing', a lab's file
    ('labs/lab00_indexing.py', 'lab00.json'), its graded test file or a test's node id
    ('tests/labs/test_lab00_indexing.py::test_x') all mean lab '00'. Anything else, or a lab
    not present, is a ValueError that says so."""
    text = Path(str(lab).strip().lower().split("::")[0]).name
    text = text.removesuffix(".py").removeprefix("test_").removeprefix("lab")
    digits = re.match(r"^(\d{1,2})(_.*|\.\w+)?$", text)
    if not digits:
        raise ValueError(f"not a lab: {lab!r} (write a number such as 2 or 02, or lab02_...)")
    number = digits.group(1).zfill(2)
    if number not in labs():
        raise ValueError(f"no lab {number}: the labs present are {', '.join(labs()) or 'none'}")
    return number


# A stub as the starter writes it: `raise NotImplementedError("Lab NN.M: what to write")`.
STUB = re.compile(r"""raise NotImplementedError\(["'](Lab \d\d\.\d+: [^"']*)["']\)""")


class Stub(typing.NamedTuple):
    """One stub still in a lab's file: what it asks for (`Lab NN.M: name`), and where."""

    exercise: str
    file: Path
    line: int


def stubs(module) -> list[Stub]:
    """Every stub left in a lab module's file, in the file's order (none in the solutions): the
    exercises not written yet, read from the source, so one stub that stops a run names them all."""
    file = Path(getattr(module, "__file__", None) or "")
    text = file.read_text() if file.is_file() else ""
    return [Stub(found.group(1), file, text.count("\n", 0, found.start()) + 1)
            for found in STUB.finditer(text)]


def shown(file: Path) -> str:
    """A file as a person reads it: relative to the course where it is inside it."""
    return str(file.relative_to(ROOT)) if file.is_relative_to(ROOT) else str(file)


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
    if settings.grading() and name.startswith("labs."):
        forbid_solutions()
    labs_dir = settings.labs_dir()
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


# kernellab's own answers to a lab's stubs, off limits to that lab's graded code: the lab number,
# then each reference module and the names in it that would answer a stub (or a step of one).
# The data helpers beside them stay allowed (Lab 06's starter imports LIMITERS, UNLIMITED,
# architecture and shared_per_sm).
REFERENCE_IMPLEMENTATIONS = {
    "06": {"kernellab.occupancy": ("blocks_limited_by_warps", "blocks_limited_by_registers",
                                   "blocks_limited_by_shared_memory", "occupancy",
                                   "warps_per_block", "registers_per_warp", "shared_allocation",
                                   "max_potential_block_size")},
}


class ReferenceImplementationUsed(RuntimeError):
    """Graded code called one of kernellab's reference implementations of its own stubs."""


def pristine_starter(lab: str):
    """The course's own starter of `lab` (labs/ under the course, never a submission), imported
    under a private name: its given references are the ones a grade checks against."""
    number = lab_number(lab)
    spec = importlib.util.spec_from_file_location(f"kernellab_given_lab{number}",
                                                  ROOT / "labs" / f"{labs()[number]}.py")
    pristine = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pristine)
    return pristine


def given_references(module, lab: str):
    """A submission graded from KERNELLAB_LABS_DIR runs with the course's own float64 NumPy
    references (the given functions whose names hold "reference", in the pristine starter under
    labs/): the tests check against those, so a student who edits one in their file to match a
    broken kernel changes nothing. Returns the module."""
    if not settings.labs_dir():
        return module
    for name, value in vars(pristine_starter(lab)).items():
        if "reference" in name and callable(value) and not name.startswith("_"):
            setattr(module, name, value)
    return module


def forbid_references(module, lab: str):
    """Make each function of a graded lab that uses a reference implementation fail when called,
    saying where (found in the lab's source, and by identity among its globals); a use at module
    level fails the whole lab. Returns the module."""
    uses = reference_uses(module, lab)
    at_module_level = [use for use in uses
                       if not callable(getattr(module, use.definition or "", None))]
    if at_module_level:
        raise ReferenceImplementationUsed(at_module_level[0].message())
    for use in uses:
        setattr(module, use.definition, _refusing(getattr(module, use.definition), use))
    return module


class ReferenceUse(typing.NamedTuple):
    file: str
    line: int | None
    definition: str | None     # the lab's top-level name that uses it; None: module level
    reference: str             # module.name
    verb: str = "uses"         # "is": the lab's name is bound to the reference itself

    def message(self) -> str:
        where = f"{Path(self.file).name}" + (f", line {self.line}" if self.line else "")
        who = f"{self.definition} {self.verb}" if self.definition else "the module uses"
        return (f"{where}: {who} {self.reference}, kernellab's reference answer (graded code "
                "must compute it itself)")


def reference_uses(module, lab: str) -> list[ReferenceUse]:
    """Every use of an off-limits name in the lab's source, and every global bound to one."""
    off_limits = REFERENCE_IMPLEMENTATIONS.get(lab_number(lab), {})
    file = getattr(module, "__file__", None) or ""
    tree = parse_source(Path(file).read_text(), file) if Path(file).is_file() else ast.Module(body=[])
    found: dict[str, ReferenceUse] = {}
    for module_name, names in off_limits.items():
        reference = importlib.import_module(module_name)
        modules, functions = _aliases(tree, module_name, names)
        rebound = {_defines(statement) for statement in tree.body}   # the lab's own, after all
        functions = {alias: name for alias, name in functions.items() if alias not in rebound}
        for statement in tree.body:
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                continue
            definition = _defines(statement)
            for node in ast.walk(statement):
                name = (node.attr if isinstance(node, ast.Attribute)
                        and _dotted(node.value) in modules else
                        functions.get(node.id) if isinstance(node, ast.Name)
                        and isinstance(node.ctx, ast.Load) else None)
                if name in names:
                    key = definition or f"<module>:{node.lineno}"
                    found.setdefault(key, ReferenceUse(file, node.lineno, definition,
                                                      f"{module_name}.{name}"))
        for global_name, value in vars(module).items():
            for name in names:
                if value is getattr(reference, name, None) and global_name not in found:
                    line = next((n.lineno for n in ast.walk(tree)
                                 if isinstance(n, ast.ImportFrom) and any(
                                     (a.asname or a.name) == global_name for a in n.names)), None)
                    found[global_name] = ReferenceUse(file, line, global_name,
                                                      f"{module_name}.{name}", "is")
    return list(found.values())


def _defines(statement) -> str | None:
    """The one top-level name a statement binds (a def, a class, `name = ...`), else None."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return statement.name
    if (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)):
        return statement.targets[0].id
    return None


def _aliases(tree, module_name: str, names) -> tuple[set[str], dict[str, str]]:
    """The lab's names for the reference module, and its names for the off-limits functions."""
    parent, _, leaf = module_name.rpartition(".")
    modules, functions = {module_name}, {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.asname for a in node.names if a.name == module_name and a.asname)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if node.module == module_name and alias.name in names:
                    functions[alias.asname or alias.name] = alias.name
                elif node.module == parent and alias.name == leaf:
                    modules.add(alias.asname or alias.name)
    return modules, functions


def _dotted(node) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _refusing(original, use: ReferenceUse):
    @functools.wraps(original)
    def refuse(*args, **kwargs):
        raise ReferenceImplementationUsed(use.message())
    return refuse
