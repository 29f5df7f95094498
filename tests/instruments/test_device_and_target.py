"""kernellab.gpu.device, kernellab.course.target and settings: modes, facts, the implementation
resolver, and where each setting comes from."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernellab import cli
from kernellab.gpu import device
from kernellab.course import settings, target


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, cwd=target.ROOT)


def test_bad_device_mode_names_the_variable():
    proc = run_python("import kernellab", KERNELLAB_DEVICE="tpu")
    assert proc.returncode != 0 and "KERNELLAB_DEVICE must be one of auto|gpu|sim" in proc.stderr


def test_sim_mode_enables_the_simulator_and_names_the_reference_device():
    proc = run_python("import kernellab\nfrom kernellab.gpu import device\n"
                      "from numba.cuda.core import config\n"
                      "print(config.ENABLE_CUDASIM, device.facts().label)", KERNELLAB_DEVICE="sim")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("1 simulated NVIDIA H200 (cc 9.0, 132 SMs)")


def test_numba_imported_first_in_the_other_mode_is_a_clear_error():
    proc = run_python("import os\nos.environ['NUMBA_ENABLE_CUDASIM'] = '0'\n"
                      "from numba import cuda\nimport kernellab", KERNELLAB_DEVICE="sim")
    assert proc.returncode != 0 and "import kernellab first" in proc.stderr


def test_reference_device_is_chosen_by_name():
    proc = run_python("import kernellab\nfrom kernellab.gpu import device\nprint(device.facts().cc)",
                      KERNELLAB_DEVICE="sim", KERNELLAB_REFERENCE_DEVICE="t4")
    assert proc.stdout.strip() == "(7, 5)"
    proc = run_python("import kernellab\nfrom kernellab.gpu import device\ndevice.facts()",
                      KERNELLAB_DEVICE="sim", KERNELLAB_REFERENCE_DEVICE="gtx480")
    assert "KERNELLAB_REFERENCE_DEVICE must be one of" in proc.stderr


@pytest.mark.skipif(device.driver_present(), reason="this machine has a CUDA driver")
def test_gpu_mode_without_a_driver_says_what_to_do():
    proc = run_python("import kernellab", KERNELLAB_DEVICE="gpu")
    assert proc.returncode != 0 and "KERNELLAB_DEVICE=sim" in proc.stderr


def test_info_prints_mode_device_and_versions():
    proc = run_python("from kernellab.cli import main; main(['info'])")
    assert proc.returncode == 0, proc.stderr
    for word in ("mode:", "device:", "numba:", "numba-cuda:", "numpy:", "cuda_driver:"):
        assert word in proc.stdout


@pytest.mark.parametrize("spelling", [0, "0", "00", "lab00", "lab00_indexing", "labs/lab00_indexing.py"])
def test_lab_spellings(spelling):
    assert target.lab_number(spelling) == "00"


@pytest.mark.parametrize("text", ["tests/labs/test_lab00_indexing.py",
                                  "tests/labs/test_lab00_indexing.py::test_axpb[3]", "lab00.json",
                                  "lab00_fused_chain.png"])
def test_lab_numbers_are_read_from_test_files_node_ids_and_file_names(text):
    assert target.lab_number(text) == "00"


def test_unknown_lab_target_and_seed_are_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="no lab 99"):
        target.lab_number(99)
    with pytest.raises(ValueError, match="not a lab: 'test_timeline.py'"):
        target.lab_number("test_timeline.py")
    with pytest.raises(ValueError, match=r"KERNELLAB_TARGET must be one of labs\|solutions, not 'answers'"):
        settings.TARGET.resolve(environ={"KERNELLAB_TARGET": "answers"})
    with pytest.raises(ValueError, match=r"--target must be one of labs\|solutions"):
        settings.target("answers")
    monkeypatch.setenv("KERNELLAB_SEED", "x")
    with pytest.raises(ValueError, match="KERNELLAB_SEED must be an integer, not 'x'"):
        settings.seed()
    assert settings.seed(12) == 12


def test_a_setting_resolves_option_then_the_commands_choice_then_environment_then_default(monkeypatch):
    monkeypatch.setattr(settings, "_chosen", {})          # no command has chosen a target yet
    monkeypatch.setenv("KERNELLAB_TARGET", " Solutions ")
    assert settings.target() == "solutions"
    with settings.using(target="labs"):
        assert settings.target() == target.current() == "labs"
        assert settings.target("solutions") == "solutions"
        with settings.using(target=None):                 # None leaves it as it was
            assert settings.target() == "labs"
    assert settings.target() == "solutions"
    monkeypatch.delenv("KERNELLAB_TARGET")
    assert settings.target() == "labs" and settings.target(default="solutions") == "solutions"


def test_child_env_is_the_one_writer_of_settings(monkeypatch):
    monkeypatch.setenv("KERNELLAB_GRADING", "1")
    before = dict(os.environ)
    env = settings.child_env(target="solutions", seed=7, labs_dir=Path("/sub/labs"), grading=False,
                             device=None)
    assert (env["KERNELLAB_TARGET"], env["KERNELLAB_SEED"], env["KERNELLAB_LABS_DIR"]) == (
        "solutions", "7", "/sub/labs")
    assert "KERNELLAB_GRADING" not in env and env.get("KERNELLAB_DEVICE") == os.environ.get("KERNELLAB_DEVICE")
    assert settings.child_env({}, grading=True, device="sim") == {"KERNELLAB_GRADING": "1",
                                                                   "KERNELLAB_DEVICE": "sim"}
    assert dict(os.environ) == before                     # this process's environment is untouched
    with pytest.raises(ValueError, match=r"KERNELLAB_DEVICE must be one of auto\|gpu\|sim"):
        settings.child_env(device="tpu")
    writers = {}
    for path in sorted((target.PACKAGE_ROOT / "kernellab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([node.value] if isinstance(node, ast.Constant) else
                     [node.arg] if isinstance(node, ast.keyword) else [])
            for name in names:
                if name in {"KERNELLAB_TARGET", "KERNELLAB_SEED", "KERNELLAB_LABS_DIR",
                            "KERNELLAB_GRADING"}:
                    writers.setdefault(name, set()).add(path.name)
    assert writers == dict.fromkeys(writers, {"settings.py"}), writers


def test_tour_and_bench_resolve_the_target_alike(monkeypatch):
    monkeypatch.setattr(settings, "_chosen", {})
    monkeypatch.setenv("KERNELLAB_TARGET", "labs")
    assert cli.course_target(None) == "labs" and cli.course_target("solutions") == "solutions"
    monkeypatch.delenv("KERNELLAB_TARGET")
    assert cli.course_target(None) == "solutions"    # a release's tour shows the recorded figures


def test_tour_and_bench_run_the_target_they_say(capsys, tmp_path):
    assert cli.main(["tour", "00", "--target", "labs", "--figures", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "target labs" in out and "Lab 00.1: blocks_for: still a stub" in out   # the starter ran
    assert cli.main(["bench", "00", "--target", "labs"]) == 2
    captured = capsys.readouterr()
    assert "kernellab bench: target labs" in captured.out and "Lab 00" in captured.err


def test_starter_and_solution_have_the_same_api():
    for number in target.labs():
        starter, solution = target.load(number, "labs"), target.load(number, "solutions")
        public = lambda m: {n for n in vars(m) if not n.startswith("_")}
        solution_side = set(getattr(solution, "SOLUTION_SIDE", ()))   # kept out of the starter on purpose
        assert public(starter) == public(solution) - solution_side, f"lab {number}"


@pytest.mark.parametrize("driver, toolkit, too_old", [
    (12040, "13.5.0", True),    # Colab's T4 driver with the default cu13 wheels
    (11080, "12.9.1", True),
    (13000, "13.5.0", False),
    (12040, "12.9.1", False),   # the cu12 route on the same driver: minor versions are compatible
    (13020, "12.9.1", False),   # an old toolkit on a new driver
    (None, "13.5.0", False),    # no driver: the simulator decides elsewhere
    (12040, None, False),       # toolkit not from PyPI (conda): nothing to compare
])
def test_driver_older_than_the_toolkit_wheels_is_recognised(driver, toolkit, too_old):
    assert bool(device.driver_too_old(driver, toolkit)) is too_old


def test_driver_too_old_names_both_versions_and_the_fixes():
    message = device.driver_too_old(12040, "13.5.0")
    assert message == ("the CUDA driver supports CUDA 12.4, kernellab was installed with CUDA 13 "
                       "wheels: pip install -e '.[cu12]' (or use the simulator: KERNELLAB_DEVICE=sim)")
    assert "update the NVIDIA driver" in device.driver_too_old(11080, "13.5.0")


@pytest.mark.parametrize("requested", ["auto", "gpu"])
def test_a_gpu_whose_driver_is_too_old_is_a_clear_error_where_the_mode_is_chosen(monkeypatch, requested):
    monkeypatch.setenv("KERNELLAB_DEVICE", requested)
    monkeypatch.setattr(device, "driver_present", lambda: True)
    monkeypatch.setattr(device, "driver_cuda_version", lambda: 12040)
    monkeypatch.setattr(device, "toolkit_cuda_version", lambda: "13.5.0")
    device.mode.cache_clear()
    try:
        with pytest.raises(device.DeviceModeError, match=r"CUDA 12\.4.*\[cu12\]"):
            device.mode()
        monkeypatch.setattr(device, "driver_cuda_version", lambda: 13000)
        device.mode.cache_clear()
        assert device.mode() == "gpu"
        monkeypatch.setenv("KERNELLAB_DEVICE", "sim")
        device.mode.cache_clear()
        assert device.mode() == "sim"
    finally:
        monkeypatch.undo()
        device.mode.cache_clear()
