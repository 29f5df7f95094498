"""What a lab file may import and reach, checked on its text before any of it runs.

A graded lab file may import kernellab.lab (the names it exports), numba and numba.cuda, numpy and
math, and whatever the course's own starter of that lab imports. It may not reach around imports:
no `importlib`, `__import__`, `exec`, `eval`, `compile`, `open`, `globals`, `vars`, no dunder or
private attribute (the few the course's own files use excepted), no attribute named after a module
that leads out of the lab's API (`sys`, `os`, `modules`, numpy's `lib`, numba's `cudadrv`, ...) or
after a file operation (`tofile`, `save`, `load`, ...), no `getattr`/`setattr` with a computed
name, and no assignment to an imported module's attribute (patching numpy, numba or kernellab).
A lab that breaks the rule scores 0, with one line naming the construct and its line; the parent
checks this, before the lab's child starts.
"""

from __future__ import annotations

import ast
import functools
import pkgutil
from pathlib import Path

from kernellab.course import target

BASE_MODULES = ("numpy", "numba", "numba.cuda", "math")
STUDENT_API = "kernellab.lab"
# The previous release's paths, which still import for one release (kernellab.lab.MOVED): `import
# kernellab`, then `kernellab.device.facts()`; `from kernellab.traffic import Ledger`.
PREVIOUS_RELEASE_MODULES = ("kernellab.traffic", "kernellab.resources", "kernellab.graphs")
PACKAGE = "kernellab"
PACKAGE_ATTRIBUTES = {"lab", "device", "traffic", "resources", "graphs"}
DEVICE_ATTRIBUTES = {"facts", "is_simulator", "mode", "cuda"}
FORBIDDEN_CALLS = {"__import__", "exec", "eval", "compile", "open", "globals", "locals", "vars",
                   "breakpoint", "input", "help", "exit", "quit"}
NAMED_ATTRIBUTE_CALLS = {"getattr", "setattr", "delattr", "hasattr"}
# Attributes that lead to the interpreter, the file system or the grader, whatever object they
# are read from (a module's own imports are attributes of it: `scheduler.dataclasses.sys`).
FORBIDDEN_ATTRIBUTES = {
    "sys", "os", "posix", "nt", "modules", "builtins", "importlib", "subprocess", "shutil",
    "pathlib", "io", "ctypes", "ctypeslib", "gc", "inspect", "pickle", "marshal", "socket",
    "threading", "multiprocessing", "runpy", "pty", "tempfile", "glob", "fcntl", "mmap", "signal",
    "atexit", "traceback", "linecache", "pkgutil", "zipimport", "site", "sysconfig", "platform",
    "unittest", "doctest", "pdb", "trace", "faulthandler", "warnings", "weakref", "contextlib",
    "lib", "testing", "f2py", "distutils", "core", "cudadrv", "simulator", "bindings",
    "tofile", "tobytes_to", "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt",
    "genfromtxt", "fromfile", "fromregex", "memmap", "open_memmap", "DataSource", "dump", "dumps",
    "system", "popen", "environ", "getenv", "putenv", "execv", "spawn",
    "f_globals", "f_locals", "f_back", "f_builtins", "f_code", "gi_frame", "gi_code", "cr_frame",
    "ag_frame", "tb_frame", "tb_next", "co_code", "mro", "func_globals",
}
ALLOWED_SUBMODULES = {"cuda", "random", "linalg", "fft", "types", "math"}
# Standard-library module names that are also everyday attribute names and lead nowhere.
HARMLESS_STDLIB = {"array", "copy", "string", "numbers", "operator", "enum", "functools",
                   "itertools", "collections", "typing", "struct", "abc", "heapq", "bisect",
                   "statistics", "cmath", "decimal", "fractions", "time", "calendar", "queue",
                   "token", "keyword", "colorsys", "select", "stat", "code"}


class Violation(ValueError):
    """A lab file that breaks the import rule: its line and what it did, in one line."""


@functools.lru_cache(maxsize=1)
def _package_submodules() -> frozenset[str]:
    """Submodule names of numpy, numba, numba.cuda and kernellab, and the standard library's module
    names: attributes that lead out of a lab's API wherever they are read (a module's own
    imports are attributes of it); found from the installed files, nothing imported."""
    import importlib.util
    names: set[str] = set()
    for package in ("numpy", "numba", "numba.cuda"):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            names.update(m.name for m in pkgutil.iter_modules(spec.submodule_search_locations))
    kernellab = Path(__file__).resolve().parents[1]       # every module and room of kernellab's
    names.update(p.stem for p in kernellab.rglob("*.py") if p.stem != "__init__")
    names.update(p.name for p in kernellab.rglob("*") if p.is_dir() and not p.name.startswith("_"))
    import sys
    names.update(sys.stdlib_module_names)
    return frozenset(names - ALLOWED_SUBMODULES - HARMLESS_STDLIB)


@functools.lru_cache(maxsize=None)
def course_usage(root: Path) -> tuple[frozenset, dict]:
    """What the course's own files use: attribute names (any lab's starter or solution), and per
    lab the imports of its starter, as (module, name or None) pairs."""
    attributes: set[str] = set()
    imports: dict[str, frozenset] = {}
    for folder in ("labs", "solutions"):
        for path in sorted((root / folder).glob("lab[0-9][0-9]_*.py")):
            tree = target.parse_source(path.read_text(), str(path))
            attributes.update(_attributes_read(tree))
            if folder == "labs":
                imports[path.name[3:5]] = frozenset(_imports(tree))
    return frozenset(attributes), imports


def _attributes_read(tree) -> set[str]:
    """Attribute names read as `x.name` or `getattr(x, "name")`."""
    names = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    names.update(node.args[1].value for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                 and node.func.id in NAMED_ATTRIBUTE_CALLS and len(node.args) > 1
                 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str))
    return names


def _imports(tree) -> list[tuple[str, str | None]]:
    found = []
    in_reading_order = sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")),
                              key=lambda n: (n.lineno, n.end_lineno or n.lineno, n.end_col_offset or 0))
    for node in in_reading_order:       # the first construct a reader meets is the one named
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found += [(node.module, alias.name) for alias in node.names]
    return found


def student_api_names() -> frozenset[str]:
    from kernellab import lab
    return frozenset(lab.__all__)


def check_source(source: str, filename: str, lab: str, root: Path) -> None:
    """Raise Violation (one line: the file, the line, the construct) if the lab file breaks the
    rule; return None if it keeps it."""
    try:
        tree = target.parse_source(source, filename)
    except SyntaxError:
        return          # the import probe reports a syntax error, with its line
    used_attributes, starter_imports = course_usage(Path(root))
    allowed_imports = starter_imports.get(lab, frozenset())
    forbidden_attributes = (FORBIDDEN_ATTRIBUTES | _package_submodules()) - used_attributes
    imported: set[str] = set()
    name = Path(filename).name

    def refuse(node, what: str):
        raise Violation(f"{name}, line {node.lineno}: {what} (a lab file may import only "
                        f"kernellab.lab, numba, numpy, math and what its starter imports, and "
                        f"may not reach around imports)")

    def package_chain(node) -> bool:
        """`kernellab.X` or `kernellab.X.Y`: judged here against the public API (True), not by
        the general rule."""
        base = node.value
        if isinstance(base, ast.Name) and base.id == PACKAGE and PACKAGE in imported:
            if node.attr not in PACKAGE_ATTRIBUTES:
                refuse(node, f"reads kernellab.{node.attr}, outside the student API")
            return True
        if isinstance(base, ast.Attribute) and isinstance(base.value, ast.Name) \
                and base.value.id == PACKAGE and PACKAGE in imported:
            allowed = {"lab": student_api_names(), "device": DEVICE_ATTRIBUTES}.get(base.attr)
            if allowed is None or node.attr not in allowed:
                refuse(node, f"reads kernellab.{base.attr}.{node.attr}, outside the student API")
            return True
        return False

    def check_attribute(node, attr: str):
        if attr.startswith("__") and attr not in used_attributes:
            refuse(node, f"reads the dunder attribute {attr}")
        if attr.startswith("_") and attr not in used_attributes:
            refuse(node, f"reads the private attribute {attr}")
        if attr in forbidden_attributes:
            refuse(node, f"reads .{attr}, which leads out of the lab's API")

    in_reading_order = sorted((n for n in ast.walk(tree) if hasattr(n, "lineno")),
                              key=lambda n: (n.lineno, n.end_lineno or n.lineno, n.end_col_offset or 0))
    for node in in_reading_order:       # the first construct a reader meets is the one named
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name
                if top not in BASE_MODULES + (PACKAGE, STUDENT_API) and (top, None) not in allowed_imports:
                    refuse(node, f"imports {top}")
                if alias.asname and top in (PACKAGE, STUDENT_API):
                    refuse(node, f"imports {top} under another name")
                imported.add((alias.asname or top).split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                refuse(node, "uses a relative import")
            for alias in node.names:
                if (module, alias.name) in allowed_imports:
                    pass
                elif module == STUDENT_API:
                    if alias.name not in student_api_names():
                        refuse(node, f"imports {alias.name} from kernellab.lab, which does not "
                                     f"export it")
                elif module in BASE_MODULES or module in PREVIOUS_RELEASE_MODULES:
                    if alias.name == "*" or alias.name.startswith("_") or \
                            alias.name in forbidden_attributes:
                        refuse(node, f"imports {alias.name} from {module}")
                else:
                    refuse(node, f"imports {alias.name} from {module}")
                imported.add(alias.asname or alias.name)
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_CALLS or node.id.startswith("__") and node.id != "__name__":
                refuse(node, f"uses {node.id}")
        elif isinstance(node, ast.Attribute):
            if not package_chain(node):
                check_attribute(node, node.attr)
            if isinstance(node.ctx, (ast.Store, ast.Del)) and _root_name(node) in imported:
                refuse(node, f"assigns to {_root_name(node)}.{node.attr}, patching an imported "
                             f"module")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in NAMED_ATTRIBUTE_CALLS:
            if len(node.args) < 2 or not (isinstance(node.args[1], ast.Constant)
                                          and isinstance(node.args[1].value, str)):
                refuse(node, f"calls {node.func.id} with a computed attribute name")
            check_attribute(node, node.args[1].value)
            if node.func.id in ("setattr", "delattr") and isinstance(node.args[0], ast.Name) \
                    and node.args[0].id in imported:
                refuse(node, f"calls {node.func.id} on {node.args[0].id}, patching an imported "
                             f"module")


def _root_name(node) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def check_file(path: Path, lab: str, root: Path) -> str | None:
    """One line if the lab file at `path` breaks the rule, else None."""
    try:
        check_source(Path(path).read_text(errors="replace"), str(path), lab, root)
    except Violation as why:
        return str(why)
    return None
