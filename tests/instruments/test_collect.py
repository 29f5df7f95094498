"""`kernellab collect` on local bare repositories (file:// URLs): each student's last commit at or
before the deadline is checked out and recorded with its time; a repository that cannot be
fetched is reported and the others go on; bad input is one line, before any clone."""

import csv
import os
import subprocess
from pathlib import Path

import pytest

from kernellab.grading import collect

DEADLINE = "2026-12-01T23:59:00+00:00"
BEFORE, AFTER = "2026-12-01T23:00:00+00:00", "2026-12-02T08:00:00+00:00"


def git(*args, cwd=None, when=None):
    env = {**os.environ, "GIT_AUTHOR_NAME": "s", "GIT_AUTHOR_EMAIL": "s@x", "GIT_COMMITTER_NAME": "s",
           "GIT_COMMITTER_EMAIL": "s@x"}
    if when:
        env |= {"GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def student_repo(root: Path, name: str, commits: list[tuple[str, str]]) -> str:
    """A bare repository holding one commit per (time, text of labs/lab00_indexing.py); its URL."""
    work, bare = root / f"{name}-work", root / f"{name}.git"
    (work / "labs").mkdir(parents=True)
    git("init", "--quiet", "-b", "main", cwd=work)
    for when, text in commits:
        (work / "labs" / "lab00_indexing.py").write_text(text)
        git("add", ".", cwd=work)
        git("commit", "--quiet", "-m", text, cwd=work, when=when)
    git("clone", "--quiet", "--bare", str(work), str(bare))
    return bare.as_uri()


def test_collect_takes_the_last_commit_at_or_before_the_deadline(tmp_path):
    on_time = student_repo(tmp_path, "alice", [(BEFORE, "# on time\n"), (AFTER, "# late\n")])
    late_only = student_repo(tmp_path, "bob", [(AFTER, "# late\n")])
    at_the_second = student_repo(tmp_path, "dora", [(DEADLINE, "# at the deadline\n")])
    roster = tmp_path / "roster.csv"
    roster.write_text(f"submission,repo\nalice,{on_time}\nbob,{late_only}\n"
                      f"carol,{(tmp_path / 'missing.git').as_uri()}\ndora,{at_the_second}\n")
    said = []
    record = collect.collect(roster, tmp_path / "subs", DEADLINE, out=said.append)
    subs = tmp_path / "subs"
    assert (subs / "alice" / "labs" / "lab00_indexing.py").read_text() == "# on time\n"
    assert not (subs / "bob").exists() and not (subs / "carol").exists()
    assert (subs / "dora" / "labs" / "lab00_indexing.py").read_text() == "# at the deadline\n"
    rows = {row["submission"]: row for row in csv.DictReader(open(record))}
    expected = git("rev-list", "-1", "--before=2026-12-01T23:59:00Z", "main",
                   cwd=tmp_path / "alice.git")
    assert rows["alice"]["commit"] == expected and rows["alice"]["status"] == "collected"
    assert rows["alice"]["commit_time"].startswith("2026-12-01T23:00:00")
    assert rows["bob"]["status"] == "no commit at or before the deadline"
    assert rows["carol"]["status"].startswith("could not clone")
    assert "collected 2 of 4; record: " + str(record) in said
    assert any(line.startswith("  not collected: carol: could not clone") for line in said)

    latest = collect.collect(roster, tmp_path / "now", None, out=lambda *a: None)   # no deadline
    assert (tmp_path / "now" / "alice" / "labs" / "lab00_indexing.py").read_text() == "# late\n"
    assert (tmp_path / "now" / "bob" / "labs" / "lab00_indexing.py").read_text() == "# late\n"
    assert latest.exists()


def test_collect_refuses_before_cloning(tmp_path, monkeypatch):
    monkeypatch.setattr(collect, "fetch", lambda *a: pytest.fail("cloned on bad input"))
    roster = tmp_path / "roster.csv"
    roster.write_text("submission,repo\nalice,file:///nowhere.git\nbob,\n")
    with pytest.raises(ValueError, match="gives no repo .* for bob"):
        collect.collect(roster, tmp_path / "subs", DEADLINE)
    roster.write_text("submission,repo\nalice,file:///nowhere.git\n")
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    with pytest.raises(ValueError, match="already holds alice"):
        collect.collect(roster, tmp_path / "subs", DEADLINE)
    assert not (tmp_path / "subs" / collect.RECORD).exists()
