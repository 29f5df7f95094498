"""What makes a student release a repository that grades itself: a GitHub Actions workflow that
grades every push, and a .gitignore that keeps the venv, caches, figures and reports out of it.
`kernellab release` writes both (`write`).

The workflow uses Node 24 actions only (actions/checkout@v5, actions/setup-python@v6,
actions/upload-artifact@v6). tests/instruments/test_student_repo.py reads its steps, and runs
its `run:` steps as written, in a fresh venv, in a release.
"""

from __future__ import annotations

from pathlib import Path

WORKFLOW_PATH = Path(".github") / "workflows" / "grade.yml"

WORKFLOW = """\
# kernellab: every push grades this repository's labs/ in Numba's CUDA simulator (no GPU), as
# `make test` does, and shows the score table on the run's page (its summary). The score here is
# feedback: your instructor grades the commit collected at the deadline with the same tests.
name: grade
"on":
  push:
  workflow_dispatch:
permissions:
  contents: read
concurrency:                  # a newer push replaces a grade still running
  group: grade-${{ github.ref }}
  cancel-in-progress: true
jobs:
  grade:
    runs-on: ubuntu-24.04
    timeout-minutes: 30
    env:
      KERNELLAB_DEVICE: sim
    steps:
      - uses: actions/checkout@v5
      - uses: actions/setup-python@v6
        with:
          python-version: "3.12"
          cache: pip            # the CUDA wheels are downloaded once, then restored
          cache-dependency-path: |
            pyproject.toml
            constraints.txt
      - name: Install as make install does
        # The tested versions and the CUDA extra: without it the GPU compile check cannot run
        # and the grade is not an official one.
        run: python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[cu13]"
      - name: Check the graded tests against their checksums
        run: python -m kernellab.grading.integrity --verify
      - name: Grade
        run: kernellab grade --results results.json | tee grade.txt
      - name: Score table in the summary
        if: always()
        run: |
          if [ -s grade.txt ]; then
            { echo '### kernellab grade'; echo '```'; cat grade.txt; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
          fi
      - uses: actions/upload-artifact@v6
        if: always()
        with:
          name: results
          path: results.json
          if-no-files-found: warn
"""

GITIGNORE = """\
# kernellab: what a run makes, never your work
.venv/
__pycache__/
*.pyc
*.egg-info/
.ipynb_checkpoints/
.pytest_cache/
.kernellab/
figures/
results*.json
grade.txt
gradebook-*/
build/
"""


def write(release: Path) -> None:
    """The workflow and the .gitignore, into the release folder `release`."""
    workflow = Path(release) / WORKFLOW_PATH
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(WORKFLOW)
    (Path(release) / ".gitignore").write_text(GITIGNORE)
