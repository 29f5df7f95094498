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

import shutil
import zipfile
from pathlib import Path

from kernellab.grading import runner, release

GRADER_USER = "student"       # the unprivileged user that runs student code on Gradescope

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
  id {user} > /dev/null 2>&1 || useradd --system --create-home {user}
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
# Environment (for tests): AUTOGRADER_DIR, KERNELLAB_VENV, KERNELLAB_GRADER_USER.
AUTOGRADER="${AUTOGRADER_DIR:-/autograder}"
PYTHON="${KERNELLAB_VENV:-$AUTOGRADER/venv}/bin/python"
GRADER_USER="${KERNELLAB_GRADER_USER:-{user}}"
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
# root (Gradescope), the grader and the student code it runs drop to the unprivileged user, who
# cannot write to source/ (the tests) or results/; the report is copied out afterwards.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
cp -r "$AUTOGRADER/submission" "$work/submission"
as_user=()
sandboxed="run_autograder, as $(id -un)"
if [ "$(id -u)" = 0 ] && id "$GRADER_USER" > /dev/null 2>&1; then
  chown -R "$GRADER_USER" "$work"
  as_user=(setpriv "--reuid=$GRADER_USER" "--regid=$(id -g "$GRADER_USER")" --clear-groups --)
  sandboxed="run_autograder, as the unprivileged user $GRADER_USER"
  if ! why=$("${as_user[@]}" "$PYTHON" -c 'import kernellab' 2>&1); then
    echo "the unprivileged user $GRADER_USER cannot run $PYTHON: $why" > "$LOG"
    fail "the unprivileged user $GRADER_USER cannot run the grader's Python ($PYTHON)"
    cat "$LOG"
    exit 0
  fi
fi
cd "$AUTOGRADER/source"
"${as_user[@]}" env HOME="$work" TMPDIR="$work" KERNELLAB_DEVICE=sim \
    KERNELLAB_SANDBOXED="$sandboxed" \
    "$PYTHON" -m kernellab.cli grade {labs}--root "$work/submission" \
    --results "$work/results.json" > "$LOG" 2>&1
status=$?
cp "$work/results.json" "$RESULTS" 2> /dev/null
if ! "$PYTHON" -c 'import json, sys; assert "score" in json.load(open(sys.argv[1]))' "$RESULTS" 2> /dev/null; then
  fail "kernellab grade exited with code $status and wrote no report"
fi
cat "$LOG"
"""


def build_bundle(out_dir: Path, labs=None) -> Path:
    """A Gradescope autograder zip: setup.sh, run_autograder, and the course without solutions.

    `labs` limits it to some labs (one Gradescope assignment per lab, say). The solutions and
    the mutants (near-copies of them) stay out: nothing in the bundle can leak them.
    """
    chosen = "".join(f"{n} " for n in runner.resolve_labs(labs)) if labs else ""
    out_dir = release.check_output(out_dir, "bundle", new=False)
    source = out_dir / "source"
    if source.exists():
        shutil.rmtree(source)
    release.copy_course(source, ("kernellab", "labs"), ("pyproject.toml", "README.md",
                                                        release.CONSTRAINTS))
    release.copy_graded_tests(source / "tests" / "labs")
    for name, text in (("run_autograder", RUN_AUTOGRADER.replace("{labs}", chosen)),
                       ("setup.sh", SETUP_SH)):
        (source / name).write_text(text.replace("{user}", GRADER_USER))
        (source / name).chmod(0o755)
    archive = out_dir / "autograder.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(source.rglob("*")):
            if path.is_file():
                zf.write(path, path.relative_to(source))
    return archive
