"""Grading at scale: where local batch grading writes its reports (a batch graded for real, with a
roster: test_batch_lms.py; the Gradescope bundle: test_gradescope.py)."""

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
