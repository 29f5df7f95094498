"""`grade --batch --roster`: a batch of 3 graded for real writes gradebook.csv (with protection and
official columns), canvas.csv and moodle.csv in the formats their imports document
(kernellab/grading/lms.py cites the pages), and names every submission and roster row that did
not match. The roster's bad inputs are one line each."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from kernellab.course import target
from kernellab.grading import batch, lms, runner

SOLUTION = target.ROOT / "solutions" / "lab00_indexing.py"
STARTER = target.ROOT / "labs" / "lab00_indexing.py"
# The documented headers: Canvas's five student columns, then one column per assignment;
# Moodle's identifier column (mapped to useremail on import), then one column per grade item.
CANVAS_DOCUMENTED = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
MOODLE_IDENTIFIER = "Email address"

ROSTER = """submission,name,email,sis_user_id,sis_login_id,section,username,repo
alice,"Liddell, Alice",alice@example.edu,S001,aliddell,A,aliddell,
bob,"Builder, Bob",bob@example.edu,S002,bbuilder,B,bbuilder,
dora,"Explorer, Dora",dora@example.edu,S004,dexplorer,A,dexplorer,
"""

pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


def submissions(folder: Path, **sources) -> Path:
    for name, source in sources.items():
        (folder / name / "labs").mkdir(parents=True)
        shutil.copy(source, folder / name / "labs" / "lab00_indexing.py")
    return folder


def rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


def test_a_batch_of_3_with_a_roster_writes_what_canvas_and_moodle_import(tmp_path):
    subs = submissions(tmp_path / "subs", alice=SOLUTION, bob=STARTER, carol=STARTER)
    (tmp_path / "roster.csv").write_text(ROSTER)
    said = []
    gradebook = batch.grade_batch(subs, jobs=2, labs=["00"], out_dir=tmp_path / "out", seed=7,
                                  roster=tmp_path / "roster.csv", out=said.append)
    book = {row["submission"]: row for row in csv.DictReader(open(gradebook))}
    assert set(book) == {"alice", "bob", "carol"}          # carol has no roster row: still graded
    alice = json.loads((tmp_path / "out" / "alice.results.json").read_text())
    assert float(book["alice"]["score"]) == alice["max_score"] > 0
    assert float(book["bob"]["score"]) == 0
    assert book["alice"]["protection"] == alice["extra_data"]["protection"]
    assert book["alice"]["official"] == str(alice["extra_data"]["official"])
    lab = lms.lab_columns(["00"])[0]
    canvas = rows(tmp_path / "out" / "canvas.csv")
    assert canvas[0] == CANVAS_DOCUMENTED + [lab]
    assert canvas[1:] == [["Liddell, Alice", "", "S001", "aliddell", "A", f"{alice['score']:g}"],
                          ["Builder, Bob", "", "S002", "bbuilder", "B", "0"]]
    moodle = rows(tmp_path / "out" / "moodle.csv")
    assert moodle == [[MOODLE_IDENTIFIER, lab], ["alice@example.edu", f"{alice['score']:g}"],
                      ["bob@example.edu", "0"]]
    assert any("protection:" in line for line in said)
    assert "1 submission(s) with no roster row, in gradebook.csv only: carol" in said
    assert "1 roster row(s) with no submission, in no gradebook: dora" in said


def fake_grade(labs, target_name, results, *args, **kwargs):
    document = {"score": 1, "max_score": 1, "extra_data": {"protection": "copy", "official": True},
                "tests": [{"number": "00.1", "score": 1.0, "max_score": 1.0}]}
    Path(results).write_text(json.dumps(document))
    return document


def test_moodle_falls_back_to_username_and_a_format_it_cannot_fill_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "grade", fake_grade)
    subs = submissions(tmp_path / "subs", alice=STARTER, bob=STARTER)
    roster = tmp_path / "roster.csv"
    roster.write_text("submission,username\nalice,al\nbob,bo\n")
    said = []
    batch.grade_batch(subs, labs=["00"], out_dir=tmp_path / "out", seed=1, roster=roster,
                      out=said.append)
    assert rows(tmp_path / "out" / "moodle.csv")[0] == ["Username", lms.lab_columns(["00"])[0]]
    assert not (tmp_path / "out" / "canvas.csv").exists()
    assert any(line.startswith("canvas.csv not written") and "alice, bob" in line for line in said)


@pytest.mark.parametrize("text, words", [
    ("name,email\nAlice,a@x\n", "has no submission column"),
    ("submission,name\nalice,A\nalice,B\n", "submission 'alice' appears twice"),
    ("submission\n../etc\n", "is not a folder name"),
    ("submission\n", "lists no submission"),
])
def test_a_bad_roster_is_one_line_before_anything_is_graded(text, words, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "grade", lambda *a, **k: pytest.fail("graded a bad roster"))
    subs = submissions(tmp_path / "subs", alice=STARTER)
    (tmp_path / "roster.csv").write_text(text)
    with pytest.raises(ValueError, match=words) as raised:
        batch.grade_batch(subs, labs=["00"], out_dir=tmp_path / "out", roster=tmp_path / "roster.csv",
                          out=lambda *a: None)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "out").exists()
