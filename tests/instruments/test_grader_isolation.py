"""The hostile-submission suite: student code that hangs, exits or crashes costs only itself.

Each case plants misbehaviour into a copy of the Lab 00 solution and grades it with
`kernellab.grading.runner`; the report must stay complete and only the affected tests may lose points.
"""

import json
from pathlib import Path

import pytest

from kernellab.grading import runner
from kernellab.course import target

SOLUTION = (target.ROOT / "solutions" / "lab00_indexing.py").read_text()


pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


def submission(tmp_path: Path, *edits: tuple[str, str], prepend: str = "") -> Path:
    source = SOLUTION
    for old, new in edits:
        assert old in source, f"the plant site {old!r} is gone from the solution"
        source = source.replace(old, new, 1)
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "lab00_indexing.py").write_text(prepend + source)
    return tmp_path


def grade(root: Path, timeout: float = 4.0, console: list | None = None,
          import_policy: bool = True) -> dict[str, dict]:
    """Lab 00 of the submission at `root`, graded; `import_policy=False` tests the layers behind
    the import rule (a file that imports os would otherwise be refused before it runs)."""
    results = root / "results.json"
    runner.grade(["00"], root=root, results=results, seed=1234, timeout=timeout,
                 out=(console if console is not None else []).append, import_policy=import_policy)
    document = json.loads(results.read_text())
    assert document["tests"], "the report must list every graded test"
    assert document["max_score"] == sum(t["max_score"] for t in document["tests"])
    return {t["number"].split("::")[1]: t for t in document["tests"]}


def lost(tests: dict) -> set[str]:
    return {name for name, t in tests.items() if t["score"] < t["max_score"]}


BLOCKS_FOR = "    if n < 0 or block <= 0:"
GRID_STRIDE = "    start = cuda.grid(1)\n"
BIAS_KERNEL = "    col, row = cuda.grid(2)"
AXPB_LAUNCH = "    grid = blocks_for(x.size, block)"


def test_hang_exit_crash_and_flood_cost_only_their_tests(tmp_path):
    root = submission(
        tmp_path,
        (BLOCKS_FOR, "    import os\n    if n == 0:\n        os._exit(0)\n" + BLOCKS_FOR),
        (GRID_STRIDE, GRID_STRIDE + "    while True:\n        pass\n"),
        (BIAS_KERNEL, "    import sys\n    sys.exit(3)\n" + BIAS_KERNEL),
        (AXPB_LAUNCH, "    if block == 64:\n        import ctypes\n        ctypes.string_at(0)\n"
                      "    print('x' * 100_000)\n" + AXPB_LAUNCH),
    )
    console = []
    # 15 s a test: the flooded test draws 9 cases, each printing 100,000 characters, on a loaded
    # 2-core machine; the hung kernel costs one timeout
    tests = grade(root, timeout=15.0, console=console, import_policy=False)
    assert "died" in tests["test_blocks_for_rounds_up"]["output"]          # os._exit
    assert "died" in tests["test_axpb_allocates_and_chooses_the_grid"]["output"]  # segfault
    hung = "axpb_grid_stride_kernel"
    assert f"timed out: kernel {hung} was still running" in tests[
        "test_grid_stride_covers_any_grid[3]"]["output"]
    for spared in ("test_grid_stride_covers_any_grid[40]", "test_grid_stride_memory_budget"):
        assert f"kernel {hung} hung in test_grid_stride_covers_any_grid[3]" in tests[spared]["output"]
    # sys.exit in a simulated thread ends that thread: its elements stay unwritten
    assert "never written" in tests["test_add_row_bias_2d"]["output"]
    assert lost(tests) == {"test_blocks_for_rounds_up", "test_axpb_allocates_and_chooses_the_grid",
                           "test_add_row_bias_2d", "test_add_row_bias_memory_budget",
                           "test_grid_stride_covers_any_grid[3]",
                           "test_grid_stride_covers_any_grid[40]", "test_grid_stride_memory_budget"}
    listed = [line for line in console if line.startswith("  - Lab 00 ")]
    assert len(listed) == len(lost(tests)) and any(f"kernel {hung}" in line for line in listed)
    flooded = tests["test_axpb_matches_numpy"]
    assert flooded["score"] == flooded["max_score"]
    assert len(flooded["output"]) < 10_000 and "characters cut" in flooded["output"]


@pytest.mark.parametrize("plant, reason", [
    ("def broken(:\n", "SyntaxError"),
    ("raise RuntimeError('student module explodes at import')\n", "explodes at import"),
    ("import os\nos._exit(0)\n", "could not be imported"),
])
def test_unimportable_lab_fails_every_test_with_the_reason(tmp_path, plant, reason):
    tests = grade(submission(tmp_path, prepend=plant), import_policy=False)
    assert all(t["score"] == 0 for t in tests.values())
    assert all(reason in t["output"] for t in tests.values()), next(iter(tests.values()))["output"]


def test_import_that_hangs_is_reported_once(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "IMPORT_TIMEOUT", 3.0)
    tests = grade(submission(tmp_path, prepend="while True:\n    pass\n"))
    assert all(t["score"] == 0 and "did not finish" in t["output"] for t in tests.values())


def test_one_probe_reports_each_lab_and_goes_on_after_a_hang_or_a_crash(tmp_path):
    """The labs' imports are probed in one child; the lab that hangs, raises or ends the
    interpreter is named, and the labs after it are still probed."""
    labs = tmp_path / "labs"
    labs.mkdir()
    plants = {"00": "", "01": "while True:\n    pass\n", "02": "raise RuntimeError('lab 02 explodes')\n",
              "03": "import os\nos._exit(7)\n", "04": ""}
    for number, plant in plants.items():
        solution = next((target.ROOT / "solutions").glob(f"lab{number}_*.py"))
        (labs / solution.name).write_text(plant + solution.read_text())
    found = runner.probe_imports(list(plants), runner.child_env("labs", labs, 1), timeout=5.0)
    assert found["00"] is None and found["04"] is None, found
    assert "did not finish within 5 s" in found["01"]
    assert "lab 02 explodes" in found["02"] and "lab02_vertical_fusion.py, line 1" in found["02"]
    assert "exited with code 7" in found["03"]


def test_kernel_the_gpu_cannot_compile_fails_its_tests(tmp_path):
    """The simulator runs a list inside a kernel; a GPU compile does not, and the grader says so."""
    root = submission(tmp_path, ("        out[i] = a * x[i] + b  # 1 read",
                                 "        coefficients = [a, b]\n"
                                 "        out[i] = coefficients[0] * x[i] + coefficients[1]  # 1 read"))
    tests = grade(root, timeout=30)
    uses_axpb = {name for name in tests if "axpb" in name and "grid_stride" not in name}
    assert lost(tests) == uses_axpb, {name: tests[name]["output"][-400:] for name in uses_axpb}
    message = tests["test_axpb_matches_numpy"]["output"]
    assert "fails the compile check for a real GPU" in message and "axpb_kernel" in message
    assert "lab00_indexing.py, line" in message


def test_labs_may_not_import_solutions(tmp_path):
    root = submission(tmp_path, prepend="from solutions.lab00_indexing import *  # noqa\n")
    tests = grade(root, import_policy=False)     # the rule refuses it first; this is the layer behind
    assert all(t["score"] == 0 and "may not import solutions" in t["output"] for t in tests.values())


def test_an_edited_reference_changes_nothing(tmp_path):
    """A submission's copy of a given reference is replaced by the course's own: a kernel that
    computes a + x + b, with the reference edited to match it, still loses the axpb tests."""
    root = submission(tmp_path,
                      ("    return a * np.asarray(x, dtype=np.float64) + b",
                       "    return a + np.asarray(x, dtype=np.float64) + b"),
                      ("        out[i] = a * x[i] + b  # 1 read", "        out[i] = a + x[i] + b  # 1 read"))
    tests = grade(root, timeout=30)
    assert {"test_axpb_matches_numpy", "test_axpb_allocates_and_chooses_the_grid"} <= lost(tests)


def test_a_gpu_failure_behind_a_stub_names_the_stub():
    """On a GPU the starter's matmul_tiled_kernel fails to compile (its tiled_dot only raises)
    and fused_chain_kernel's raise is dropped; the plugin names the stub instead."""
    from kernellab.grading import plugin
    starter, solved = target.load("04", "labs"), target.load("04", "solutions")
    why = plugin.stub_behind(starter.matmul_tiled_kernel)
    assert why.startswith("Lab 04.1: tiled_dot (matmul_tiled_kernel calls tiled_dot, still a stub")
    assert plugin.stub_behind(target.load("02", "labs").fused_chain_kernel).startswith(
        "Lab 02.2: fused_chain_kernel (fused_chain_kernel is still a stub")
    source = Path(starter.__file__).read_text().splitlines()
    line = next(k for k, text in enumerate(source, 1) if 'NotImplementedError("Lab 04.1' in text)
    assert why.endswith(f"; lab04_gemm_epilogue.py:{line})")   # the stub's raise, in the student's file
    assert plugin.stub_behind(solved.matmul_tiled_kernel) is None and plugin.stub_behind(len) is None
