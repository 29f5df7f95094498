"""kernellab's rooms import downwards only, and no module imports itself round a loop (ARCHITECTURE.md).

Every module is parsed, not imported, so imports inside functions count as much as those at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import kernellab

PACKAGE = Path(kernellab.__file__).parent
ROOMS = ("show", "gpu", "models", "kernels", "lab", "course", "grading", "cli")
"""Lowest first: a module may import its own room and the rooms before it."""
MODELS = {"kernellab.occupancy", "kernellab.scheduler"}
CLI = {"kernellab.cli", "kernellab.occupancy_cli"}
LAB = {"kernellab.lab", "kernellab.traffic", "kernellab.resources", "kernellab.graphs"}
"""The student API and the previous release's paths it replaces (deprecated, one release)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def room(module: str) -> str:
    if module == "kernellab":          # the package root chooses the device mode: gpu.device only
        return "gpu"
    if module in MODELS:
        return "models"
    if module in CLI:
        return "cli"
    if module in LAB:
        return "lab"
    return module.split(".")[1]


def imported_modules(module: str, tree: ast.AST, modules: set[str]) -> set[str]:
    """The kernellab modules `tree` imports anywhere: `from P import name` is module P.name
    where that is a module, else P."""
    package = module if (PACKAGE.parent / module.replace(".", "/") / "__init__.py").exists() \
        else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                     for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {module: imported_modules(module, ast.parse(path.read_text(), str(path)), set(paths))
            for module, path in paths.items()}


def arrows_against_the_order(graph: dict[str, set[str]]) -> list[str]:
    return [f"{a} ({room(a)}) imports {b} ({room(b)})" for a, targets in sorted(graph.items())
            for b in sorted(targets) if ROOMS.index(room(b)) > ROOMS.index(room(a))]


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """The loops a depth-first walk meets (at least one wherever there is any), as 'a -> b -> a'."""
    found, done = [], set()

    def visit(module: str, path: list[str]):
        if module in path:
            loop = path[path.index(module):] + [module]
            found.append(" -> ".join(loop))
            return
        if module in done:
            return
        for target in sorted(graph.get(module, ())):
            visit(target, path + [module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    return found


GRAPH = import_graph()


def test_the_checks_see_a_wrong_arrow_and_a_loop():
    assert arrows_against_the_order({"kernellab.gpu.timing": {"kernellab.course.bench"}}) == [
        "kernellab.gpu.timing (gpu) imports kernellab.course.bench (course)"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a -> b -> c -> a"]
    tree = ast.parse("def f():\n    from kernellab.kernels import jit\n    from . import ptxas\n")
    assert imported_modules("kernellab.kernels.resources", tree, set(GRAPH)) == {
        "kernellab.kernels.jit", "kernellab.kernels.ptxas"}


def test_every_module_is_in_a_room():
    assert {room(module) for module in GRAPH} <= set(ROOMS), sorted(GRAPH)


def test_imports_follow_the_order_of_the_rooms():
    assert arrows_against_the_order(GRAPH) == []


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_kernellab_imports_no_course_content_by_name():
    """labs/, solutions/ and experiments/ are loaded through course.target and course.protocol."""
    content = ("labs", "solutions", "experiments", "tests")
    found = [f"{path.relative_to(PACKAGE.parent)}: {name}" for path in sorted(PACKAGE.rglob("*.py"))
             for name in top_level_imports(ast.parse(path.read_text())) if name.split(".")[0] in content]
    assert found == []


def top_level_imports(tree: ast.AST) -> set[str]:
    """Every absolute module name `tree` imports, anywhere in it."""
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    return names | {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module and not node.level}


def test_the_occupancy_model_is_pure():
    """The published calculator imports nothing from kernellab and no Numba: it runs anywhere."""
    imported = top_level_imports(ast.parse((PACKAGE / "occupancy.py").read_text()))
    assert not {name for name in imported if name.split(".")[0] in ("kernellab", "numba")}


LAB07_EXPERIMENT_LINES = 1000
"""Issue 54: Lab 07's experiments stay readable in one sitting; generic code belongs in its room."""


def test_lab07s_experiments_stay_within_their_line_budget():
    files = sorted((PACKAGE.parent / "experiments").glob("lab07_*.py"))
    lines = sum(len(path.read_text().splitlines()) for path in files)
    assert files and lines <= LAB07_EXPERIMENT_LINES, (
        f"experiments/lab07_*.py: {lines} lines in all, over the budget of {LAB07_EXPERIMENT_LINES} (issue 54): "
        "move generic code to its kernellab room, fold near-copies")



def test_kernellab_parses_python_one_thread_at_a_time():
    """A batch grades submissions in a thread pool, and CPython 3.11's AST builder shares its
    recursion depth between threads (gh-106905): every parse goes through target.parse_source."""
    parsers = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, (ast.FunctionDef, ast.Module)):
                body = function.body if isinstance(function, ast.FunctionDef) else [
                    s for s in function.body if not isinstance(s, (ast.FunctionDef, ast.ClassDef))]
                calls = [node for statement in body for node in ast.walk(statement)
                         if isinstance(node, ast.Call) and ast.unparse(node.func) == "ast.parse"]
                if calls:
                    parsers.append(f"{path.relative_to(PACKAGE.parent)}:{getattr(function, 'name', '')}")
    assert parsers == ["kernellab/course/target.py:parse_source"]
