"""The Gradescope bundle as Gradescope runs it: setup.sh's install step, then run_autograder, in a
fresh venv of the oldest supported Python (3.11: the only one here), on a flat submission and on
broken ones. Every results.json must match Gradescope's format (gradescope_results.schema.json).
The apt steps of setup.sh are skipped (KERNELLAB_APT=skip): they only run on Gradescope itself.
"""

import io
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
# working directory is the bundle's source/): the import rule refuses the file before it runs.
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
               "KERNELLAB_APT": "skip"}
        setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env,
                               capture_output=True, text=True, timeout=300)
        if setup.returncode and any(sign in setup.stdout + setup.stderr for sign in OFFLINE):
            pytest.skip("setup.sh installs the course's pins from the package index, which this machine "
                        "cannot reach (the lent GPU machines have no network)")
        assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-2000:]
        assert "apt steps skipped" in setup.stdout
        yield root, env, os.geteuid() == 0     # as root the grader protects the children itself


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
    for name, content in files.items():     # a name may hold a folder; bytes for a .zip
        path = root / "submission" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    proc = subprocess.run(["bash", str(root / "source" / "run_autograder")],
                          env={**base_env, **env}, capture_output=True, text=True, timeout=300)
    results = json.loads((root / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    assert not list((root / "tmp").iterdir()), "run_autograder left its temporary copy behind"
    return results | {"log": proc.stdout}


def test_flat_submission_gets_full_marks(autograder):
    results = run_autograder(autograder, {"lab00_indexing.py": SOLUTION.read_text()})
    assert results["score"] == results["max_score"] > 0, results["log"][-3000:]
    if autograder[2]:   # as root, behind a protection it requires: an official grade
        assert "WARNING" not in results["output"], results["output"]


def test_a_lab_file_that_plants_a_file_among_the_tests_scores_0_and_plants_nothing(autograder):
    results = run_autograder(autograder, {"lab00_indexing.py": SOLUTION.read_text() + PLANT})
    planted = autograder[0] / "source" / "tests" / "labs" / "planted.py"
    exists = planted.exists()
    planted.unlink(missing_ok=True)
    assert not exists
    assert results["score"] == 0 and results["tests"]
    assert all("imports pathlib" in test["output"] for test in results["tests"]), results["tests"][0]


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


def zipped(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buffer.getvalue()


def test_an_upload_one_folder_down_or_zipped_is_graded_and_says_from_where(autograder, tmp_path):
    """Graded through the bundle one folder down; a zip is found by the same gather (a grade each
    would cost CI 17 s more)."""
    solution = SOLUTION.read_text()
    results = run_autograder(autograder, {"mywork/lab00_indexing.py": solution})
    assert results["score"] == results["max_score"] > 0, results["log"][-3000:]
    assert results["output"].startswith("graded: lab00_indexing.py from mywork/lab00_indexing.py")
    (tmp_path / "upload").mkdir()
    (tmp_path / "upload" / "labs.zip").write_bytes(zipped({"labs/lab00_indexing.py": solution}))
    taken, note = gradescope.gather(tmp_path / "upload", tmp_path / "dest", ["00"])
    assert taken == ["lab00_indexing.py"] and (tmp_path / "dest" / taken[0]).read_text() == solution
    assert note == "graded: lab00_indexing.py from labs.zip:labs/lab00_indexing.py"


def test_an_upload_without_the_lab_file_names_what_it_holds_and_what_was_expected(autograder):
    results = run_autograder(autograder, {"lab00.ipynb": "{}", "notes.txt": "hi"})
    assert results["score"] == 0 and "the grader failed" not in results["output"]
    assert "missing from your upload: lab00_indexing.py" in results["output"]
    assert "your upload holds: lab00.ipynb, notes.txt" in results["output"]
    assert "a notebook is not graded" in results["output"]


def test_gather_takes_only_the_lab_files_and_follows_no_link(tmp_path):
    upload, secret = tmp_path / "upload", tmp_path / "secret.txt"
    (upload / "deep" / "er").mkdir(parents=True)
    secret.write_text("not the student's")
    (upload / "lab01_launch_overhead.py").symlink_to(secret)
    (upload / "deep" / "er" / "lab02_vertical_fusion.py").write_text("# two folders down")
    (upload / "deep" / "lab00_indexing.py").write_text("# one folder down")
    (upload / "work.zip").write_bytes(zipped({"../../lab00_indexing.py": "# escapes",
                                              "lab03_horizontal_fusion.py": "# zipped"}))
    taken, note = gradescope.gather(upload, tmp_path / "dest", ["00", "01", "02", "03"])
    assert sorted(taken) == ["lab00_indexing.py", "lab03_horizontal_fusion.py"]
    assert (tmp_path / "dest" / "lab00_indexing.py").read_text() == "# one folder down"
    assert sorted(p.name for p in (tmp_path / "dest").iterdir()) == sorted(taken)
    assert "missing from your upload: lab01_launch_overhead.py, lab02_vertical_fusion.py" in note


def test_an_existing_bundle_is_replaced_only_with_force(tmp_path):
    gradescope.build_bundle(tmp_path / "build", ["00"])
    with pytest.raises(ValueError, match="exists already: give a new --out, or --force"):
        gradescope.build_bundle(tmp_path / "build", ["00"])
    assert gradescope.build_bundle(tmp_path / "build", ["00"], force=True).exists()


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


def test_a_hostile_submission_scores_0_through_the_bundle(autograder):
    """The attack that once forged 27 of 32 points on Gradescope, added to the untouched starter,
    scores 0 through the bundle (tests/instruments/test_hostile.py grades the others through the
    grader every route shares)."""
    from test_hostile import ALL_ATTACKS, STARTER
    attack = ALL_ATTACKS["pytest's runtest patched"]
    results = run_autograder(autograder, {"lab00_indexing.py": STARTER + "\n" + attack})
    assert results["score"] == 0 and results["tests"], results["output"][-2000:]
    assert all("imports _pytest.python" in test["output"] for test in results["tests"])
