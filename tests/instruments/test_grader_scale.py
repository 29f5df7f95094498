"""Grading at scale: local batch grading, on Lab 00 submissions (the Gradescope bundle: test_gradescope.py)."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from kernellab.grading import batch, runner, plugin
from kernellab.course import target

SOLUTION = target.ROOT / "solutions" / "lab00_indexing.py"
STARTER = target.ROOT / "labs" / "lab00_indexing.py"


pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


def test_batch_grading_writes_a_gradebook(tmp_path):
    for name, source in (("alice", SOLUTION), ("bob", STARTER)):
        (tmp_path / "subs" / name / "labs").mkdir(parents=True)
        shutil.copy(source, tmp_path / "subs" / name / "labs" / "lab00_indexing.py")
    gradebook = batch.grade_batch(tmp_path / "subs", jobs=2, labs=["00"],
                                   out_dir=tmp_path / "out", seed=7, out=lambda *a: None)
    assert gradebook == tmp_path / "out" / "gradebook.csv"
    rows = {row["submission"]: row for row in csv.DictReader(open(gradebook))}
    alice = json.loads((tmp_path / "out" / "alice.results.json").read_text())
    assert float(rows["alice"]["score"]) == float(rows["alice"]["max_score"]) > 0, (
        plugin.lost_points(alice))
    assert float(rows["bob"]["score"]) == 0 and rows["bob"]["lab00"] == "0.0"
    assert (tmp_path / "out" / "alice.results.json").exists()


def test_batch_reports_go_to_a_folder_of_their_own_and_are_never_overwritten(tmp_path, monkeypatch):
    """Where the reports go, and when an --out is refused (the grades themselves are faked: the
    test above grades for real)."""
    (tmp_path / "subs" / "alice" / "labs").mkdir(parents=True)
    shutil.copy(STARTER, tmp_path / "subs" / "alice" / "labs" / "lab00_indexing.py")
    monkeypatch.chdir(tmp_path)

    def graded(labs, target_name, results, *args, **kwargs):
        document = {"score": 0, "max_score": 1, "tests": []}
        Path(results).write_text(json.dumps(document))
        return document
    monkeypatch.setattr(runner, "grade", graded)
    gradebook = batch.grade_batch(tmp_path / "subs", labs=["00"], seed=7, out=lambda *a: None)
    assert gradebook.parent.parent == tmp_path and gradebook.parent.name.startswith("gradebook-")
    with pytest.raises(ValueError, match="already holds reports.*--force"):
        batch.grade_batch(tmp_path / "subs", labs=["00"], out_dir=gradebook.parent, out=lambda *a: None)
    with pytest.raises(ValueError, match="inside"):
        batch.batch_folder(tmp_path / "subs", tmp_path / "subs" / "reports", force=True)
    (gradebook.parent / "notes.txt").write_text("kept")
    batch.grade_batch(tmp_path / "subs", labs=["00"], out_dir=gradebook.parent, force=True,
                       seed=7, out=lambda *a: None)
    assert (gradebook.parent / "notes.txt").read_text() == "kept" and gradebook.exists()
