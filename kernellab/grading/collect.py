"""`kernellab collect ROSTER DIR [--deadline ISO-8601]`: each student's repository, as it stood at
the deadline, into DIR/<submission>/, for `kernellab grade --batch DIR`.

The roster (kernellab.grading.lms) gives each submission a `repo` column, a git URL. Each is
cloned (its default branch) and checked out at its last commit at or before the deadline, by
the commit's committer time (a time the student's machine wrote: the record says which commit
was graded, it does not prove when it was pushed). DIR/collected.csv records, per student, the
commit and its time, or why there is none. A repository that cannot be fetched is reported
there and in the summary, and the others go on.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import shutil
import subprocess
from pathlib import Path

from kernellab.grading import lms, outputs

CLONE_TIMEOUT = 600          # seconds one repository may take to clone
RECORD = "collected.csv"


def parse_deadline(text: str | None) -> datetime.datetime | None:
    """An ISO-8601 time with its time zone (2026-12-01T23:59:00+01:00, or Z for UTC), or a
    ValueError in one line."""
    if text is None:
        return None
    try:
        when = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--deadline {text!r} is not an ISO-8601 time: write it as "
                         "2026-12-01T23:59:00+00:00") from None
    if when.tzinfo is None:
        raise ValueError(f"--deadline {text!r} has no time zone: add one, e.g. "
                         f"{when.isoformat()}+00:00 (or Z for UTC)")
    return when


def git(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GCM_INTERACTIVE": "never"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=CLONE_TIMEOUT)


def fetch(url: str, folder: Path, deadline: datetime.datetime | None) -> dict:
    """Clone `url` into `folder` and check out its last commit at or before `deadline` (its
    newest without one); {commit, commit_time, status}. On failure the folder is removed and
    `status` says why, in one line."""
    try:
        done = git("clone", "--quiet", "--no-checkout", "--", url, str(folder))
        if done.returncode:
            raise RuntimeError(f"could not clone: {last_line(done.stderr)}")
        before = [f"--before={deadline.astimezone(datetime.timezone.utc):%Y-%m-%d %H:%M:%S +0000}"
                  ] if deadline else []
        done = git("log", "-1", "--format=%H %cI", *before, "HEAD", cwd=folder)
        if done.returncode:
            raise RuntimeError(f"no commit to grade: {last_line(done.stderr)}")
        if not done.stdout.strip():
            raise RuntimeError("no commit at or before the deadline")
        commit, when = done.stdout.split()
        done = git("checkout", "--quiet", "--detach", commit, cwd=folder)
        if done.returncode:
            raise RuntimeError(f"could not check out {commit}: {last_line(done.stderr)}")
        return {"commit": commit, "commit_time": when, "status": "collected"}
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        reason = (f"clone took over {CLONE_TIMEOUT} s" if isinstance(exc, subprocess.TimeoutExpired)
                  else str(exc))
        return {"commit": "", "commit_time": "", "status": reason}


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "git gave no reason"


def collect(roster_path: Path, dest: Path, deadline: str | None = None, jobs: int = 4,
            out=print) -> Path:
    """Fetch every rostered repository into `dest`/<submission>/ at `deadline`; write and return
    `dest`/collected.csv. Everything is checked before the first clone: the roster (a `repo`
    for every row), the deadline, and `dest` (writable, outside the course, holding none of the
    submission folders yet)."""
    if shutil.which("git") is None:
        raise ValueError("collect needs git, which is not installed here")
    when = parse_deadline(deadline)
    roster = lms.read_roster(roster_path)
    no_repo = [name for name, row in roster.items() if not row.get("repo")]
    if no_repo:
        raise ValueError(f"roster {roster_path} gives no repo (a git URL) for {', '.join(no_repo)}")
    dest = outputs.output_folder(dest, "collect's folder")
    there = [name for name in [*roster, RECORD] if (dest / name).exists()]
    if there:
        raise ValueError(f"{dest} already holds {', '.join(there[:5])}: give a new folder (a "
                         "later collection, for late work, goes in a folder of its own)")
    dest.mkdir(parents=True, exist_ok=True)
    out(f"kernellab collect: {len(roster)} repositories into {dest}"
        + (f", last commit at or before {when.isoformat()}" if when else ", newest commit"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        fetched = dict(zip(roster, pool.map(lambda name: fetch(roster[name]["repo"], dest / name,
                                                               when), roster)))
    record = dest / RECORD
    lms.write_csv(record, ["submission", "repo", "commit", "commit_time", "status"],
                  ([name, roster[name]["repo"], f["commit"], f["commit_time"], f["status"]]
                   for name, f in fetched.items()))
    failed = {name: f["status"] for name, f in fetched.items() if f["status"] != "collected"}
    out(f"collected {len(roster) - len(failed)} of {len(roster)}; record: {record}")
    for name, why in failed.items():
        out(f"  not collected: {name}: {why}")
    return record
