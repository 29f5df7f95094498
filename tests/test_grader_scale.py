"""Grading at scale: the Gradescope bundle and local batch grading, on Lab 00 submissions."""

import csv
import json
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from kernellab import grader, grading, target

SOLUTION = target.ROOT / "solutions" / "lab00_indexing.py"
STARTER = target.ROOT / "labs" / "lab00_indexing.py"


pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


def test_gradescope_bundle_runs_and_writes_results(tmp_path):
    archive = grader.build_gradescope_bundle(tmp_path / "bundle", ["00"])
    autograder = tmp_path / "autograder"
    with zipfile.ZipFile(archive) as zf:
        names = zf.namelist()
        zf.extractall(autograder / "source")
    assert "run_autograder" in names and "setup.sh" in names
    assert not any(name.startswith("solutions/") for name in names), "the bundle leaks solutions"
    (autograder / "submission").mkdir()
    shutil.copy(SOLUTION, autograder / "submission" / "lab00_indexing.py")  # flat, as uploaded
    proc = subprocess.run(["bash", str(autograder / "source" / "run_autograder")],
                          env={**os.environ, "AUTOGRADER_DIR": str(autograder),
                               "PYTHON": sys.executable},
                          capture_output=True, text=True, timeout=300)
    results = json.loads((autograder / "results" / "results.json").read_text())
    assert results["score"] == results["max_score"] > 0, (grading.lost_points(results),
                                                          proc.stdout[-2000:])
    for test in results["tests"]:
        assert {"name", "score", "max_score", "output", "visibility"} <= set(test)


def test_batch_grading_writes_a_gradebook(tmp_path):
    for name, source in (("alice", SOLUTION), ("bob", STARTER)):
        (tmp_path / "subs" / name / "labs").mkdir(parents=True)
        shutil.copy(source, tmp_path / "subs" / name / "labs" / "lab00_indexing.py")
    gradebook = grader.grade_batch(tmp_path / "subs", jobs=2, labs=["00"],
                                   gradebook=tmp_path / "out" / "gradebook.csv", seed=7,
                                   out=lambda *a: None)
    rows = {row["submission"]: row for row in csv.DictReader(open(gradebook))}
    alice = json.loads((tmp_path / "out" / "alice.results.json").read_text())
    assert float(rows["alice"]["score"]) == float(rows["alice"]["max_score"]) > 0, (
        grading.lost_points(alice))
    assert float(rows["bob"]["score"]) == 0 and rows["bob"]["lab00"] == "0.0"
    assert (tmp_path / "out" / "alice.results.json").exists()
