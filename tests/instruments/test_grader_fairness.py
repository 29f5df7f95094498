"""The same score on any machine, feedback that points at the bug, and answers kept out of reach.

Graded on Lab 00 (the quickest lab) and Lab 06 (whose stubs have namesakes in kernellab).
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kernellab import cli
from kernellab.gpu import device
from kernellab.grading import runner, plugin
from kernellab.course import settings, target

SOLUTIONS = target.ROOT / "solutions"
STARTER = target.ROOT / "labs"


def submission(tmp_path: Path, lab_file: str, source: str) -> Path:
    (tmp_path / "labs").mkdir(exist_ok=True)
    (tmp_path / "labs" / lab_file).write_text(source)
    return tmp_path


def record_children(monkeypatch) -> list[tuple[str, list[str], list[str]]]:
    """Each child the grader starts, as (its KERNELLAB_DEVICE, its tests, its extra options)."""
    children, real = [], runner.run_child

    def run_child(nodeids, env, progress, log, timeout, output_cap, run, first_failure, extra,
                  *where):
        children.append((env.get("KERNELLAB_DEVICE", "auto"), list(nodeids), list(extra)))
        args = (progress, log, timeout, output_cap, run, first_failure, extra, *where)
        return real(nodeids, env, *args)
    monkeypatch.setattr(runner, "run_child", run_child)
    return children


def test_on_a_gpu_the_simulator_tests_run_in_a_simulator_child(tmp_path, monkeypatch):
    """The parent asks its device mode once; on a GPU the budget tests go to a simulator child,
    the rest stay on the device, and the merged score is full."""
    monkeypatch.setattr(device, "is_simulator", lambda: False)   # the parent is on a GPU
    monkeypatch.delenv("KERNELLAB_DEVICE", raising=False)        # its children would be too
    children = record_children(monkeypatch)
    root = submission(tmp_path, "lab00_indexing.py", (SOLUTIONS / "lab00_indexing.py").read_text())
    document = runner.grade(["00"], root=root, results=tmp_path / "r.json", seed=5, out=None)
    manifest = runner.collect(["00"], runner.child_env("labs", None, 5), tmp_path)["00"]
    simulated = {n for n, info in manifest.items() if info["simulator"]}
    assert simulated and len(simulated) < len(manifest)
    assert {(d, n) for d, nodeids, _ in children for n in nodeids} == (
        {("sim", n) for n in simulated} | {("auto", n) for n in manifest if n not in simulated})
    assert document["score"] == document["max_score"] > 0, plugin.lost_points(document)


def test_in_the_simulator_one_child_runs_everything(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELLAB_DEVICE", "sim")
    graded = {"a": {"simulator": True}, "b": {"simulator": False}}
    assert runner.device_groups(graded, dict(os.environ)) == [(dict(os.environ), ["a", "b"])]


def test_only_a_kernel_known_to_be_running_is_blamed_for_a_timeout():
    simulated = runner.timed_out("t::a", "loop_kernel", on_gpu=False, timeout=60)
    assert simulated.kernel == "loop_kernel" and "kernel loop_kernel was still running" in simulated.reason
    queued = runner.timed_out("t::a", "loop_kernel", on_gpu=True, timeout=60)
    assert queued.kernel is None and "the last kernel it launched was loop_kernel" in queued.reason
    assert runner.timed_out("t::a", None, on_gpu=False, timeout=60).kernel is None


def test_a_compile_check_that_cannot_compile_anything_costs_nothing(monkeypatch):
    """Where no kernel compiles (say, no linker that works without a CUDA context), the canary
    fails too: the check says it is unavailable, and no student kernel is blamed."""
    from kernellab.kernels import ptxas
    monkeypatch.setattr(ptxas, "run_child", lambda requests: [
        {"kind": "compile", "error": "LinkerError: CUDA_ERROR_INVALID_CONTEXT"}] * len(requests))
    run = runner.LabRun("00", {"t": {}}, {"t": {"outcome": "passed", "output": ""}},
                        {"t": [{"name": "axpb_kernel"}]})
    runner.check_compiles([run])
    assert run.outcomes["t"]["outcome"] == "passed"
    assert "compile check unavailable: a kernel known to compile did not" in run.outcomes["t"]["output"]


def write_test_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "test_lab00_probe.py"
    path.write_text("import pytest\n\n" + body)
    return path


def test_a_gpu_test_with_points_is_refused(tmp_path):
    path = write_test_file(tmp_path, "@pytest.mark.gpu\n@pytest.mark.points(1)\n"
                                     "def test_fast():\n    pass\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "--collect-only", str(path),
                           "-p", "no:cacheprovider"], capture_output=True, text=True,
                          cwd=tmp_path, env={**os.environ, "KERNELLAB_DEVICE": "sim"})
    assert proc.returncode != 0
    assert "a test marked gpu may not carry points" in proc.stdout + proc.stderr


def test_pytest_n_grades_on_one_seed_and_reports_every_workers_tests(tmp_path):
    """`pytest -n 2` (make test's way in the simulator): each worker draws its inputs from the
    seed the header prints, and results.json holds every graded test, whichever worker ran it."""
    body = "".join(f"@pytest.mark.points({k + 1})\ndef test_{k}(rng):\n    assert {k} != 3\n\n\n"
                   for k in range(6))
    path = write_test_file(tmp_path, body)
    results = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", str(path), "-p",
                           "no:cacheprovider", f"--results={results}"], capture_output=True,
                          text=True, cwd=tmp_path, env={**os.environ, "KERNELLAB_DEVICE": "sim"})
    assert "bringing up nodes" in proc.stdout, proc.stdout + proc.stderr   # distributed
    document = json.loads(results.read_text())
    seed = re.search(r"seed=(\d+)", document["output"]).group(1)
    assert sorted(t["number"].rsplit("::", 1)[1] for t in document["tests"]) == [f"test_{k}" for k in range(6)]
    assert all(f"seed {seed} " in t["output"] for t in document["tests"]), document["tests"]
    assert (document["score"], document["max_score"]) == (21 - 4, 21)


def test_the_score_table_counts_only_the_tests_selected(tmp_path):
    """`make test` leaves the graded tests to `kernellab check` (`-m "not points"`): the table
    leaves out what -m and -k deselect, on one process and across workers, not "0 / 157"."""
    body = "".join(f"@pytest.mark.points(1)\ndef test_{k}(rng):\n    pass\n\n\n" for k in range(3))
    path = write_test_file(tmp_path, body + "def test_plain():\n    pass\n")
    for options in (["-k", "test_1"], ["-m", "not points"], ["-n", "2", "-k", "test_1 or test_plain"]):
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", str(path), "-p", "no:cacheprovider",
                               *options], capture_output=True, text=True, cwd=tmp_path,
                              env={**os.environ, "KERNELLAB_DEVICE": "sim"})
        score = re.search(r"total\s+(\d+) / (\d+)", proc.stdout)
        assert (score and score.groups()) == (("1", "1") if "test_1" in options[-1] else None), (
            options, proc.stdout)


def test_pytest_n_auto_keeps_a_gpu_to_one_process(monkeypatch, pytestconfig):
    """The timing tests must have the GPU to themselves: `-n auto` runs no worker there. Asked as
    xdist asks, through the hook (the first answer wins: xdist's own counted 16 cores on a GPU)."""
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    for mode, workers in (("gpu", 0), ("sim", min(settings.usable_cores(), 8))):
        monkeypatch.setattr(device, "mode", lambda: mode)
        assert pytestconfig.hook.pytest_xdist_auto_num_workers(config=pytestconfig) == workers


def test_usable_cores_are_capped_by_the_containers_cpu_quota(tmp_path):
    """A container limited to 2 CPUs on a bigger host: os.cpu_count() counts the host's cores."""
    v2, quota, period = tmp_path / "cpu.max", tmp_path / "quota", tmp_path / "period"
    v2.write_text("150000 100000\n")
    assert settings.usable_cores((v2,)) == min(2, settings.usable_cores(()))
    quota.write_text("100000\n"), period.write_text("100000\n")
    assert settings.usable_cores(((quota, period),)) == 1
    v2.write_text("max 100000\n")
    assert settings.usable_cores((v2, tmp_path / "absent")) == settings.usable_cores(())


def test_plain_pytest_on_a_gpu_does_not_call_simulator_tests_lost():
    graded = {"t::a": {"name": "Lab 00 a", "points": 2, "visibility": "visible"},
              "t::b": {"name": "Lab 00 b", "points": 1, "visibility": "visible"}}
    outcomes = {"t::a": {"outcome": "passed", "output": ""},
                "t::b": {"outcome": "elsewhere", "output": f"skipped: {plugin.ELSEWHERE}"}}
    document = plugin.results_document(graded, outcomes, "header")
    table = plugin.score_table(document)
    assert "(1 not run here)" in table and "not lost" in table
    assert plugin.lost_points(document) == []


def test_console_names_each_lost_test_and_why():
    graded = {"tests/labs/test_lab00_x.py::test_one": {"name": "Lab 00 test_one", "points": 2,
                                                  "visibility": "visible"},
              "tests/labs/test_lab00_x.py::test_two": {"name": "Lab 00 test_two", "points": 1,
                                                  "visibility": "hidden"}}
    outcomes = {n: {"outcome": "failed", "output": "[call] AssertionError: axpb: element 7 was "
                                                   "never written\nmore detail"} for n in graded}
    lines = plugin.lost_points(plugin.results_document(graded, outcomes, "header"))
    assert lines == ["  - Lab 00 test_one (-2): AssertionError: axpb: element 7 was never written",
                     "  - Lab 00 test_two (-1): (hidden test)"]


CHEAT = """
import kernellab.occupancy as reference
from kernellab.occupancy import blocks_limited_by_warps as given_warps


def occupancy(*args, **kwargs):
    return reference.occupancy(*args, **kwargs)


blocks_limited_by_warps = given_warps
"""


def test_lab06_may_not_use_kernellabs_reference_implementation(tmp_path):
    """Both ways in (a wrapper that calls the reference, a name bound to it) fail the tests that
    call them, naming the line; the functions the student wrote still score."""
    source = (SOLUTIONS / "lab06_occupancy.py").read_text() + CHEAT
    root = submission(tmp_path, "lab06_occupancy.py", source)
    results = tmp_path / "results.json"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(target.ROOT / "tests" / "labs" / "test_lab06_occupancy.py"), "-k", "not linear_relu",
                    f"--results={results}"], cwd=target.ROOT, capture_output=True,
                   env={**os.environ, "KERNELLAB_DEVICE": "sim", "KERNELLAB_TARGET": "labs",
                        "KERNELLAB_LABS_DIR": str(root / "labs")})
    tests = {t["number"].split("::")[1]: t for t in json.loads(results.read_text())["tests"]}
    for name, line, used in (("test_warps_limit", source.count("\n", 0, source.index(
            "blocks_limited_by_warps = given_warps")) + 1, "blocks_limited_by_warps"),
                             ("test_occupancy_matches_calculator", None, "occupancy")):
        output = tests[name]["output"]
        assert tests[name]["score"] == 0 and "reference answer" in output, output
        assert f"kernellab.occupancy.{used}" in output
        if line:
            assert f"lab06_occupancy.py, line {line}" in output
    assert tests["test_register_limit"]["score"] == tests["test_register_limit"]["max_score"]


def test_the_starter_and_solutions_use_no_reference_implementation(tmp_path):
    for target_name in settings.TARGETS:
        assert target.reference_uses(target.load("06", target_name), "06") == []
    # a name imported from the reference and then defined by the lab itself is the lab's own
    shadowed = tmp_path / "lab06_shadowed.py"
    shadowed.write_text("from kernellab.occupancy import occupancy\n\n\n"
                        "def occupancy(cc, block_size, registers):\n    return 1\n\n\n"
                        "def report():\n    return occupancy(90, 256, 32)\n")
    spec = importlib.util.spec_from_file_location("lab06_shadowed", shadowed)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert target.reference_uses(module, "06") == []


def test_fail_under_sets_the_exit_code_and_no_stress_reaches_the_children(tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.setenv("KERNELLAB_DEVICE", "sim")
    children = record_children(monkeypatch)
    root = submission(tmp_path, "lab00_indexing.py", (STARTER / "lab00_indexing.py").read_text())
    common = ["grade", "00", "--root", str(root), "--results", str(tmp_path / "r.json")]
    assert cli.main(common + ["--fail-under", "100", "--no-stress"]) == 1
    assert "0% is under --fail-under 100%" in capsys.readouterr().err
    assert children and all("--no-stress" in extra for _, _, extra in children)
    monkeypatch.setattr(runner, "grade", lambda *a, **k: {"score": 7, "max_score": 14})
    assert [cli.main(common + ["--fail-under", value]) for value in ("50", "50.1")] == [0, 1]
    assert cli.main(common) == 0     # without --fail-under, lost points leave the exit code 0
    with pytest.raises(SystemExit):
        cli.main(common + ["--fail-under", "lots"])
    assert "--fail-under: must be a percentage from 0 to 100, not 'lots'" in capsys.readouterr().err


def test_check_grades_both_targets_on_one_seed(monkeypatch, tmp_path):
    seeds = []

    def fake_grade(labs, target_name, results, seed, timeout, **kwargs):
        seeds.append(seed)
        score = 1 if target_name == "solutions" else 0
        return {"score": score, "max_score": 1, "tests": [
            {"name": "Lab 00 t", "number": "t", "score": score, "max_score": 1,
             "output": "", "visibility": "visible"}]}
    monkeypatch.setattr(runner, "grade", fake_grade)
    lines = []
    assert runner.check(["00"], tmp_path, out=lines.append)
    assert len(seeds) == 2 and seeds[0] == seeds[1]
    assert sum(str(seeds[0]) in line for line in lines) == 1
