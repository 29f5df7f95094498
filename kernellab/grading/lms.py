"""A class roster, and the gradebooks an LMS imports: `grade --batch --roster` writes canvas.csv
and moodle.csv beside gradebook.csv, each student found through the roster.

The roster is a CSV with a header. `submission` (the submission's folder name) is required; the
other columns are optional: name, email, sis_user_id, sis_login_id, section, username, and repo
(a git URL, for `kernellab collect`). Other columns are kept and ignored.

Canvas (Grades > Import): the documented header is `Student, ID, SIS User ID, SIS Login ID,
Section`, then one column per assignment; Canvas finds each student by one of Student, ID or SIS
User ID, and an assignment column it does not know becomes a new assignment. Followed:
https://teaching.resources.osu.edu/toolsets/carmencanvas/guides/calculating-final-grades/import-csv-file-carmen-grades
(Ohio State's CarmenCanvas guide to importing a CSV into the Canvas gradebook). `ID` is Canvas's
own user id, which a roster does not hold: it is left empty. Since any unknown column becomes an
assignment, canvas.csv carries no protection or official column (gradebook.csv does).

Moodle (Grade administration > Import > CSV file): each column is mapped on import; "Map from"
names the file's column that identifies a user and "Map to" its field, Email address
(useremail) or Username (username) here, and each other column is mapped to a grade item.
Followed: https://docs.moodle.org/311/en/Grade_import (Moodle's "Grade import" page; the
mapping's fields are gradeimport_csv's: userid, username, useridnumber, useremail). moodle.csv
holds the identifier column and the lab columns only, so nothing is there to mis-map.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from kernellab.course import target

ROSTER_COLUMNS = ("submission", "name", "email", "sis_user_id", "sis_login_id", "section",
                  "username")
CANVAS_HEADER = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
MOODLE_IDENTIFIERS = (("email", "Email address"), ("username", "Username"))
SUBMISSION_NAME = re.compile(r"[^./\\\x00-\x1f][^/\\\x00-\x1f]*")   # one folder's name, no path


def read_roster(path: Path) -> dict[str, dict[str, str]]:
    """{submission: its row} from a roster CSV, or a ValueError (one line) naming what is wrong:
    no such file, no `submission` column, an empty or unsafe submission name, a duplicate."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no roster {path}: give a CSV file with a submission column")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh)
            header = [name.strip() for name in reader.fieldnames or []]
            rows = list(reader)
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"roster {path} is not a UTF-8 CSV file ({exc})") from None
    if "submission" not in header:
        raise ValueError(f"roster {path} has no submission column (its header: "
                         f"{', '.join(header) or 'none'}); the columns are "
                         f"{','.join(ROSTER_COLUMNS)}, and only submission is required")
    roster: dict[str, dict[str, str]] = {}
    for line, row in enumerate(rows, start=2):
        row = {(key or "").strip(): (value or "").strip() for key, value in row.items()
               if isinstance(value, str)}
        name = row.get("submission", "")
        if not SUBMISSION_NAME.fullmatch(name):
            raise ValueError(f"roster {path}, line {line}: submission {name!r} is not a folder "
                             "name (no slash, not empty, not starting with a dot)")
        if name in roster:
            raise ValueError(f"roster {path}, line {line}: submission {name!r} appears twice")
        roster[name] = row
    if not roster:
        raise ValueError(f"roster {path} lists no submission")
    return roster


def unmatched(roster: dict[str, dict], submissions: list[str]) -> list[str]:
    """One line for the submissions with no roster row and one for the roster rows with no
    submission (none when every one matches)."""
    missing = [s for s in submissions if s not in roster]
    absent = [s for s in roster if s not in submissions]
    lines = []
    if missing:
        lines.append(f"{len(missing)} submission(s) with no roster row, in gradebook.csv only: "
                     + ", ".join(missing))
    if absent:
        lines.append(f"{len(absent)} roster row(s) with no submission, in no gradebook: "
                     + ", ".join(absent))
    return lines


def lab_columns(numbers: list[str]) -> list[str]:
    """The LMS's assignment names: the lab's file name, so a re-import updates the same column."""
    names = target.labs()
    return [names[n] for n in numbers]


def moodle_identifier(rows: list[dict]) -> tuple[str, str] | None:
    """(roster column, Moodle's header) of the first identifier every row holds, or None."""
    return next(((column, header) for column, header in MOODLE_IDENTIFIERS
                 if all(row.get(column) for row in rows)), None)


def formats(roster: dict[str, dict], submissions: list[str]) -> dict[str, str | None]:
    """{file name: None if it can be written, else why not (one line)}, known before grading."""
    rows = [roster[s] for s in submissions if s in roster]
    nameless = [r["submission"] for r in rows if not (r.get("name") or r.get("sis_user_id"))]
    canvas = (f"canvas.csv not written: Canvas finds a student by name or sis_user_id, and "
              f"{', '.join(nameless)} have neither" if nameless else None)
    lacking = {column: ", ".join(r["submission"] for r in rows if not r.get(column))
               for column, _ in MOODLE_IDENTIFIERS}
    moodle = None if moodle_identifier(rows) else (
        "moodle.csv not written: Moodle finds a student by email or username, and neither is "
        f"given for every rostered submission (no email: {lacking['email']}; no username: "
        f"{lacking['username']})")
    return {"canvas.csv": canvas, "moodle.csv": moodle}


def write(folder: Path, roster: dict[str, dict], scores: dict[str, dict[str, float]],
          numbers: list[str]) -> list[Path]:
    """canvas.csv and moodle.csv in `folder` for the rostered submissions in `scores`
    ({submission: {lab: points}}), each where `formats` allows; returns the files written."""
    graded = [s for s in scores if s in roster]
    rows = [roster[s] for s in graded]
    labs = lab_columns(numbers)
    why_not = formats(roster, graded)
    written = []

    def points(submission):
        return [f"{scores[submission][n]:g}" for n in numbers]

    if why_not["canvas.csv"] is None:
        written.append(write_csv(folder / "canvas.csv", [*CANVAS_HEADER, *labs], (
            [r.get("name", ""), "", r.get("sis_user_id", ""), r.get("sis_login_id", ""),
             r.get("section", ""), *points(s)] for s, r in zip(graded, rows))))
    if why_not["moodle.csv"] is None:
        column, header = moodle_identifier(rows)
        written.append(write_csv(folder / "moodle.csv", [header, *labs],
                                  ([r[column], *points(s)] for s, r in zip(graded, rows))))
    return written


def write_csv(path: Path, header: list[str], rows) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path
