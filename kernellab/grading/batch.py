"""`kernellab grade --batch`: every submission folder of a class graded on one seed, into a gradebook
(and, with a roster, the gradebooks Canvas and Moodle import: kernellab.grading.lms)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kernellab.course import target
from kernellab.grading import lms, outputs, plugin, runner, sandbox

REPORTS = ("gradebook.csv", "canvas.csv", "moodle.csv")


def batch_folder(folder: Path, out_dir: Path | None, force: bool) -> tuple[list[Path], Path]:
    """The submission folders in `folder` and the reports folder, checked before anything is
    graded or written: `out_dir` defaults to a new gradebook-<date>-<time> folder here; it must
    be writable and outside the course (or under its build/), and an existing one that holds
    reports is refused unless `force` (then its old reports are replaced)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"no folder {folder}: give --batch the folder that holds one folder per "
                         "submission")
    out_dir = Path(out_dir or time.strftime("gradebook-%Y%m%d-%H%M%S")).resolve()
    if out_dir == folder.resolve() or folder.resolve() in out_dir.parents:
        raise ValueError(f"the reports folder {out_dir} lies inside {folder}, where it would be "
                         "taken for a submission: give --out a folder elsewhere")
    out_dir = outputs.output_folder(out_dir, "--out")
    if out_dir.exists() and any(out_dir.iterdir()) and not force:
        raise ValueError(f"{out_dir} already holds reports: give a new --out, or --force to "
                         "replace them")
    submissions = sorted(p for p in folder.iterdir() if p.is_dir() and p.resolve() != out_dir
                         and not p.name.startswith("."))
    if not submissions:
        raise ValueError(f"{folder} holds no submission folders")
    return submissions, out_dir


def grade_batch(folder: Path, jobs: int = 1, labs=None, out_dir: Path | None = None,
                force: bool = False, timeout: float | None = None, seed: int | None = None,
                stress: bool = True, roster: Path | None = None,
                require_protection: str | None = None, out=print) -> Path:
    """Grade every submission folder in `folder` (same seed for all), each in a workspace of its
    own; write `out_dir`/gradebook.csv and `out_dir`/<submission>.results.json (see
    `batch_folder` for `out_dir` and `force`) and, with a `roster`, canvas.csv and moodle.csv.
    Every input and output is checked before the first grade; under the `user` protection the
    batch folder is closed to the children while they run. gradebook.csv flags each submission
    whose file broke the import rule (the labs, in `import_rule_broken`). Returns the
    gradebook's path."""
    import concurrent.futures
    from kernellab.show.progress import printing, progress_bar
    seed = plugin.new_seed() if seed is None else seed
    numbers = runner.resolve_labs(labs)
    students = lms.read_roster(roster) if roster is not None else None
    submissions, reports = batch_folder(folder, out_dir, force)
    protection = sandbox.require(require_protection)
    out(f"kernellab grade --batch: {len(submissions)} submissions, seed {seed}; protection: "
        f"{protection.describe()}")
    reports.mkdir(parents=True, exist_ok=True)
    for old in [*(reports / name for name in REPORTS), *reports.glob("*.results.json")]:
        old.unlink(missing_ok=True)

    def one(sub: Path) -> tuple[Path, dict]:
        results = reports / f"{sub.name}.results.json"
        try:
            document = runner.grade(labs, "labs", results, seed, timeout, root=sub, stress=stress,
                                    out=None, require_protection=require_protection)
        except Exception as exc:   # one submission that broke its own grade costs only itself
            document = {"score": 0, "max_score": 0, "output": f"the grader failed on this "
                        f"submission: {type(exc).__name__}: {exc}", "tests": [],
                        "extra_data": {"official": False, "seed": seed,
                                       "protection": protection.kind}}
            results.write_text(json.dumps(document, indent=2))
        return sub, document

    rows, scores = [], {}
    with sandbox.closed(folder), \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for sub, document in progress_bar(pool.map(one, submissions), total=len(submissions),
                                          desc="grading", unit="submission"):
            per_lab = {n: 0.0 for n in numbers}
            for test in document["tests"]:
                per_lab[target.lab_number(test["number"])] += test["score"]
            scores[sub.name] = per_lab
            extra = document.get("extra_data", {})
            refused = extra.get("policy") or {}
            rows.append([sub.name, document["score"], document["max_score"],
                         *(per_lab[n] for n in numbers), extra.get("protection", ""),
                         extra.get("official", False), " ".join(sorted(refused))])
            with printing():
                flag = f"  (import rule broken in lab {', '.join(sorted(refused))})" if refused else ""
                out(f"{sub.name:<30} {document['score']:g} / {document['max_score']:g}{flag}")
    gradebook = reports / "gradebook.csv"
    lms.write_csv(gradebook, ["submission", "score", "max_score", *(f"lab{n}" for n in numbers),
                              "protection", "official", "import_rule_broken"], rows)
    out(f"gradebook: {gradebook} ({len(rows)} submissions, seed {seed})")
    if students is not None:
        for path in lms.write(reports, students, scores, numbers):
            out(f"{path.name}: {path}")
        names = [sub.name for sub in submissions]
        for line in [*filter(None, lms.formats(students, names).values()),
                     *lms.unmatched(students, names)]:
            out(line)
    return gradebook
