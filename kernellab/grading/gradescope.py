"""`kernellab gradescope`: a Gradescope autograder bundle (setup.sh, run_autograder, the course).

Gradescope builds an image from the zip by running setup.sh once as root, then runs
run_autograder for each submission and reads /autograder/results/results.json. Every
/autograder path here comes from AUTOGRADER_DIR (default /autograder), so CI runs both scripts
in a temporary folder (tests/instruments/test_gradescope.py).

Python: the default base image (Ubuntu 22.04) has apt python3 3.10, which kernellab does not
support: the tested numpy line (constraints.txt, numpy 2.4) ships no wheels for 3.10 (numpy
2.3 dropped it; pip would pick numpy 2.2 there), so grading on 3.10 would run a stack CI never
tests. setup.sh installs apt's python3.11 on 22.04 and uses python3 (3.12) on 24.04.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import zipfile
from pathlib import Path

from kernellab.course import target
from kernellab.grading import outputs, runner, release

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image.
# Python >= 3.11: Ubuntu 22.04's python3 is 3.10, so it installs apt's python3.11 there
# (24.04's python3 is 3.12). Environment (for tests): AUTOGRADER_DIR, KERNELLAB_VENV,
# KERNELLAB_APT=skip, KERNELLAB_SETUP_PYTHON.
set -euo pipefail
AUTOGRADER="${AUTOGRADER_DIR:-/autograder}"
VENV="${KERNELLAB_VENV:-$AUTOGRADER/venv}"
PYTHON="${KERNELLAB_SETUP_PYTHON:-python3}"
# The apt steps (a Python and the unprivileged grading user) run only as root on Ubuntu, that is
# on Gradescope; anywhere else (CI, a laptop) they are skipped and the Python given is used.
if [ "${KERNELLAB_APT:-auto}" != skip ] && [ "$(id -u)" = 0 ] && grep -qx 'ID=ubuntu' /etc/os-release; then
  apt-get update -qq
  if python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    apt-get install -y -qq python3-venv > /dev/null
  else
    apt-get install -y -qq python3.11 python3.11-venv > /dev/null
    PYTHON=python3.11
  fi
  # bubblewrap shows student code only its workspace; without it the grader gives each
  # workspace a uid of its own (kernellab.grading.sandbox)
  apt-get install -y -qq bubblewrap > /dev/null 2>&1 || echo "setup.sh: bubblewrap not installed"
else
  echo "setup.sh: apt steps skipped (not root on Ubuntu, or KERNELLAB_APT=skip); Python: $PYTHON"
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -c "$AUTOGRADER/source/constraints.txt" "$AUTOGRADER/source[cu13]"
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope calls this for each submission. It always leaves a results.json of this run behind:
# the grade, or a failing one that names why grading could not run.
# Environment (for tests): AUTOGRADER_DIR, KERNELLAB_VENV.
AUTOGRADER="${AUTOGRADER_DIR:-/autograder}"
PYTHON="${KERNELLAB_VENV:-$AUTOGRADER/venv}/bin/python"
RESULTS="$AUTOGRADER/results/results.json"
LOG="$AUTOGRADER/results/grader.log"
mkdir -p "$AUTOGRADER/results"
rm -f "$RESULTS" "$LOG"            # a previous run's report must never stand for this one
fail() {   # fail CAUSE: a failing results.json that names the cause, and the log's tail
  python3 - "$RESULTS" "$LOG" "$1" <<'PY'
import json, os, sys
log = open(sys.argv[2], errors="replace").read()[-3000:] if os.path.exists(sys.argv[2]) else ""
json.dump({"score": 0, "output": f"the grader failed: {sys.argv[3]}; please tell your "
           f"instructor.\n{log}", "tests": []}, open(sys.argv[1], "w"))
PY
}
# The submission is graded from a copy in a folder of its own, deleted when this script ends. As
# root (Gradescope) the grader itself stays root, out of the student code's reach, and runs that
# code behind bubblewrap or as a uid of its own (--require-protection user refuses anything
# weaker); elsewhere it runs as the user that called it. The report is copied out afterwards.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
cd "$AUTOGRADER/source"
# The lab files, wherever the upload put them (top level, one folder down, a .zip); an upload
# with none of them gets a report that names what it holds and what was expected.
"$PYTHON" -m kernellab.grading.gradescope gather "$AUTOGRADER/submission" "$work/submission" \
    "$work/upload.txt" "$RESULTS" {labs}2> "$LOG"
case $? in
  0) ;;
  3) cat "$work/upload.txt"; exit 0 ;;
  *) rm -rf "$work/submission"; cp -r "$AUTOGRADER/submission" "$work/submission" ;;
esac
required=()
if [ "$(id -u)" = 0 ]; then
  required=(--require-protection user)
fi
env HOME="$work" TMPDIR="$work" KERNELLAB_DEVICE=sim \
    "$PYTHON" -m kernellab.cli grade {labs}--root "$work/submission" "${required[@]}" \
    --results "$work/results.json" >> "$LOG" 2>&1
status=$?
cp "$work/results.json" "$RESULTS" 2> /dev/null
if ! "$PYTHON" -c 'import json, sys; assert "score" in json.load(open(sys.argv[1]))' "$RESULTS" 2> /dev/null; then
  fail "kernellab grade exited with code $status and wrote no report"
elif [ -s "$work/upload.txt" ]; then
  "$PYTHON" -m kernellab.grading.gradescope annotate "$RESULTS" "$work/upload.txt"
fi
cat "$LOG"
"""


def build_bundle(out_dir: Path, labs=None, force: bool = False) -> Path:
    """A Gradescope autograder zip: setup.sh, run_autograder, and the course without solutions.

    `labs` limits it to some labs (one Gradescope assignment per lab, say). The solutions and
    the mutants (near-copies of them) stay out, and the bundle is searched for every solution
    body before it is zipped (`release.leaks`). An existing bundle in `out_dir` is replaced only
    with `force`; `out_dir` is checked (writable, outside the course or under build/) first.
    """
    chosen = "".join(f"{n} " for n in runner.resolve_labs(labs)) if labs else ""
    out_dir = outputs.output_folder(out_dir, "bundle")
    archive = out_dir / "autograder.zip"
    if archive.exists() and not force:
        raise ValueError(f"{archive} exists already: give a new --out, or --force to replace it")
    source = out_dir / "source"
    if source.exists():
        shutil.rmtree(source)
    release.copy_course(source, ("kernellab", "labs"), ("pyproject.toml", "README.md",
                                                        release.CONSTRAINTS))
    release.copy_graded_tests(source / "tests" / "labs")
    for name, text in (("run_autograder", RUN_AUTOGRADER.replace("{labs}", chosen)),
                       ("setup.sh", SETUP_SH)):
        (source / name).write_text(text)
        (source / name).chmod(0o755)
    found = release.leaks(source)
    if found:
        shutil.rmtree(source)
        raise RuntimeError("the bundle would hold solution code:\n  " + "\n  ".join(found[:20]))
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(source))
    return archive


LAB_FILE_LIMIT = 1_000_000   # bytes: a lab file is a few KiB; anything larger is not taken
NO_LAB_FILE = 3              # gather's exit code when the upload holds none of the lab files


def upload_files(upload: Path):
    """(where, name, read) for every regular file of an upload at its top level or one folder
    down, and for every member of a .zip there (up to two folders deep inside it). No link is
    followed and nothing is extracted: `read()` gives a file's bytes only when it is asked."""
    upload = Path(upload)
    for folder, dirs, files in os.walk(upload):             # os.walk follows no link
        depth = len(Path(folder).relative_to(upload).parts)
        dirs[:] = [] if depth >= 1 else sorted(d for d in dirs if d != "__MACOSX")
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                continue
            where = str(path.relative_to(upload))
            if name.lower().endswith(".zip"):
                yield from zip_members(path, where)
            elif path.stat().st_size <= LAB_FILE_LIMIT:
                yield where, name, path.read_bytes


def zip_members(path: Path, where: str):
    try:
        with zipfile.ZipFile(path) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, OSError):
        yield where, Path(where).name, None                   # named, never graded
        return
    for member in members:
        parts = Path(member.filename).parts
        if len(parts) > 3 or "__MACOSX" in parts or parts[-1].startswith("._"):
            continue
        read = (lambda m=member: zipfile.ZipFile(path).read(m)) \
            if member.file_size <= LAB_FILE_LIMIT else None
        yield f"{where}:{member.filename}", parts[-1], read


def gather(upload: Path, dest: Path, labs=None) -> tuple[list[str], str]:
    """Copy the lab files of a Gradescope upload into `dest` (flat), wherever the upload put
    them (see `upload_files`; the shallowest copy of a file wins). Returns the lab files taken,
    and a note (empty when every lab file was at the top level) that names what the upload
    holds, what was expected, and where each file came from."""
    expected = [f"{target.labs()[n]}.py" for n in runner.resolve_labs(labs)]
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    held, taken, came_from = [], [], {}
    files = sorted(upload_files(upload), key=lambda f: f[0].replace(":", "/").count("/"))
    for where, name, read in files:
        held.append(where)
        if name in expected and name not in taken and read is not None:
            (dest / name).write_bytes(read())
            taken.append(name)
            came_from[name] = where
    missing = [name for name in expected if name not in taken]
    moved = [f"{name} from {where}" for name, where in came_from.items() if where != name]
    lines = []
    if missing:
        lines.append(f"missing from your upload: {', '.join(missing)} (expected at the top level "
                     "of the upload, in one folder, or in a .zip)")
        lines.append(f"your upload holds: {', '.join(held) or 'nothing'}")
        if any(where.endswith(".ipynb") for where in held):
            lines.append("a notebook is not graded: upload the labs/labNN_topic.py files")
    if moved:
        lines.append(f"graded: {', '.join(moved)}")
    return taken, "\n".join(lines)


def main(argv: list[str]) -> int:
    """run_autograder's steps, as root before the grade drops privileges:
    `gather UPLOAD DEST NOTE RESULTS [LAB...]` copies the lab files and writes the note (with
    none, it writes a report of score 0 that says so, and exits 3); `annotate RESULTS NOTE`
    puts the note above the grade's output."""
    if argv[:1] == ["gather"] and len(argv) >= 5:
        upload, dest, note, results, *labs = argv[1:]
        taken, text = gather(Path(upload), Path(dest), labs or None)
        Path(note).write_text(text)
        if taken:
            return 0
        Path(results).write_text(json.dumps({"score": 0, "tests": [], "output": (
            "Your upload holds none of the lab files this assignment grades, so nothing was "
            f"graded.\n{text}")}))
        return NO_LAB_FILE
    if argv[:1] == ["annotate"] and len(argv) == 3:
        results, note = Path(argv[1]), Path(argv[2]).read_text().strip()
        document = json.loads(results.read_text())
        document["output"] = f"{note}\n\n{document.get('output', '')}"
        results.write_text(json.dumps(document))
        return 0
    print("usage: python -m kernellab.grading.gradescope gather UPLOAD DEST NOTE RESULTS [LAB...]"
          " | annotate RESULTS NOTE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
