"""The Gradescope bundle as Gradescope runs it: setup.sh's install step, then run_autograder, in a
fresh venv of the oldest supported Python (3.11: the only one here), on a flat submission and on
broken ones. Every results.json must match Gradescope's format (gradescope_results.schema.json).
The apt steps of setup.sh are skipped (KERNELLAB_APT=skip): they only run on Gradescope itself.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

import jsonschema
import pytest

from kernellab.grading import gradescope, integrity
from kernellab.course import target

SCHEMA = json.loads((Path(__file__).parent / "gradescope_results.schema.json").read_text())
SOLUTION = target.ROOT / "solutions" / "lab00_indexing.py"
# Module-level code that tries to plant a file among the instructor's tests (the grader's
# working directory is the bundle's source/): as an unprivileged user it cannot.
PLANT = """
import pathlib
try:
    (pathlib.Path.cwd() / "tests" / "labs" / "planted.py").write_text("")
except OSError:
    pass
"""
# The system's interpreter of this version, if there is one: an unprivileged user may not be
# able to reach this one (here it lives under /root).
SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")

pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


OFFLINE = ("Temporary failure in name resolution", "Failed to establish a new connection",
           "Network is unreachable")   # pip's words when no package index answers


@pytest.fixture(scope="module")
def autograder(fresh_venv):
    """The bundle for Lab 00, unpacked into a world-readable AUTOGRADER_DIR, set up by setup.sh."""
    with tempfile.TemporaryDirectory(prefix="kernellab-autograder-") as folder:
        root = Path(folder)
        os.chmod(root, 0o755)
        archive = gradescope.build_bundle(root / "build", ["00"])
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(root / "source")
        for script in ("setup.sh", "run_autograder"):
            os.chmod(root / "source" / script, 0o755)   # zip extraction drops the mode
        venv = root / "venv"
        python = fresh_venv(venv, str(SYSTEM_PYTHON) if SYSTEM_PYTHON.exists() else sys.executable)
        env = {**os.environ, "AUTOGRADER_DIR": str(root), "KERNELLAB_VENV": str(venv),
               "KERNELLAB_APT": "skip", "KERNELLAB_GRADER_USER": "nobody"}
        setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env,
                               capture_output=True, text=True, timeout=300)
        if setup.returncode and any(sign in setup.stdout + setup.stderr for sign in OFFLINE):
            pytest.skip("setup.sh installs the course's pins from the package index, which this machine "
                        "cannot reach (the lent GPU machines have no network)")
        assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
        assert "apt steps skipped" in setup.stdout
        # As root, run_autograder drops to `nobody`; check here that `nobody` can run this venv,
        # packages included (they are links into the test venv, unreadable inside a 0700 clone).
        drops = os.geteuid() == 0 and subprocess.run(
            ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "env",
             str(python), "-c", "import numba, pytest"], capture_output=True).returncode == 0
        if os.geteuid() == 0 and not drops:
            env["KERNELLAB_GRADER_USER"] = "no-such-user"      # grade as root, say so below
        yield root, env, drops


def run_autograder(autograder, files: dict[str, str], previous: dict | None = None, **env) -> dict:
    """Grade a submission of `files` (at the top level, as Gradescope unpacks an upload), with
    `previous` as an earlier run's results.json; return its results.json after checking it
    against Gradescope's format, and check that its temporary copy is gone."""
    root, base_env, _ = autograder
    for folder in ("submission", "results", "tmp"):
        shutil.rmtree(root / folder, ignore_errors=True)
    (root / "submission").mkdir()
    (root / "results").mkdir()
    (root / "tmp").mkdir(mode=0o777)
    os.chmod(root / "tmp", 0o1777)
    if previous is not None:
        (root / "results" / "results.json").write_text(json.dumps(previous))
    env = {"TMPDIR": str(root / "tmp"), **env}
    for name, text in files.items():
        (root / "submission" / name).write_text(text)
    proc = subprocess.run(["bash", str(root / "source" / "run_autograder")],
                          env={**base_env, **env}, capture_output=True, text=True, timeout=300)
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    assert not list((root / "tmp").iterdir()), "run_autograder left its temporary copy behind"
    return results | {"log": proc.stdout}


def test_flat_submission_gets_full_marks_without_touching_the_tests(autograder):
    results = run_autograder(autograder, {"lab00_indexing.py": SOLUTION.read_text() + PLANT})
    assert results["score"] == results["max_score"] > 0, results["log"][-3000:]
    planted = autograder[0] / "source" / "tests" / "labs" / "planted.py"
    if autograder[2]:   # the grader dropped to `nobody`, who cannot write to source/tests/labs
        assert not planted.exists()
        assert "WARNING" not in results["output"], results["output"]   # the bundle's tests verify
    else:               # graded as this user: the plant lands in its private copy, not in source/
        assert not planted.exists()
        assert "student code ran on a private copy" in results["output"], results["output"]
    planted.unlink(missing_ok=True)


def test_syntax_error_scores_zero_with_the_reason(autograder):
    results = run_autograder(autograder, {"lab00_indexing.py": "def blocks_for(n, block):\n"
                                                                "    return (n +\n"})
    assert results["score"] == 0 and results["tests"]
    assert all("SyntaxError" in test["output"] for test in results["tests"]), results["tests"][0]


def test_a_grader_that_cannot_start_still_writes_results(autograder):
    """A previous run's full marks never stand for a run that could not grade."""
    results = run_autograder(autograder, {"lab00_indexing.py": SOLUTION.read_text()},
                             previous={"score": 14, "output": "an earlier run", "tests": []},
                             KERNELLAB_VENV="/nonexistent")
    assert results["score"] == 0 and "the grader failed" in results["output"]
    assert "earlier run" not in results["output"]
    if autograder[2]:       # as root the drop is tried first, and named as the cause
        assert "cannot run the grader's Python" in results["output"], results["output"]


def test_bundle_holds_no_solutions_and_its_tests_verify(tmp_path):
    archive = gradescope.build_bundle(tmp_path / "build")
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        zf.extractall(tmp_path / "source")
    assert {"setup.sh", "run_autograder", "constraints.txt", "pyproject.toml"} <= set(names)
    assert not [n for n in names if n.startswith(("solutions/", "tests/mutants/"))]
    tests = tmp_path / "source" / "tests" / "labs"
    assert integrity.changes(tests, tests / "CHECKSUMS.sha256") == []


def test_setup_provides_the_oldest_supported_python():
    """Ubuntu 22.04's python3 is 3.10; setup.sh must bring the Python pyproject asks for."""
    floor = tomllib.loads((target.ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    major, minor = map(int, re.fullmatch(r">=(\d+)\.(\d+)", floor).groups())
    assert f"sys.version_info < ({major}, {minor})" in gradescope.SETUP_SH
    assert f"apt-get install -y -qq python{major}.{minor} python{major}.{minor}-venv" in \
        gradescope.SETUP_SH
