"""GitHub Classroom gives the score `make install` gives: the workflow's install step and its
Lab 00 grade step run as written (through bash, in a fresh venv, in a student release), on the
untouched starter and on a kernel no GPU compiles, and each score equals `kernellab grade`'s here.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kernellab.course import target
from kernellab.grading import release, runner

WORKFLOW = target.ROOT / ".github" / "classroom" / "autograding.yml"
SOLUTION = (target.ROOT / "solutions" / "lab00_indexing.py").read_text()
# A Python list inside a kernel: the simulator runs it, no GPU compiles it.
LIST_KERNEL = SOLUTION.replace("        out[i] = a * x[i] + b  # 1 read (x[i]), 1 write (out[i])",
                               "        parts = [a * x[i], b]\n        out[i] = parts[0] + parts[1]")
OFFLINE = ("Temporary failure in name resolution", "Failed to establish a new connection",
           "Network is unreachable")

pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


def workflow_steps() -> tuple[dict, dict[str, dict], list[dict]]:
    steps = [step for job in yaml.safe_load(WORKFLOW.read_text())["jobs"].values()
             for step in job["steps"]]
    graders = {step["id"]: step for step in steps if "autograding-command-grader" in step.get("uses", "")}
    return next(s for s in steps if s.get("name", "").startswith("Install")), graders, steps


def test_the_workflow_installs_as_make_install_does_and_verifies_the_tests():
    install, _, steps = workflow_steps()
    assert "-c constraints.txt" in install["run"] and '".[cu13]"' in install["run"]
    assert any("kernellab.grading.integrity --verify" in step.get("run", "") for step in steps)


@pytest.fixture(scope="module")
def classroom(tmp_path_factory, fresh_venv):
    """A student release set up by the workflow's install step, run as written by bash."""
    repo = release.build(tmp_path_factory.mktemp("classroom") / "repo")
    venv = fresh_venv(tmp_path_factory.mktemp("venv") / "venv").parent.parent
    env = {key: value for key, value in os.environ.items() if not key.startswith("KERNELLAB_")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    install, graders, _ = workflow_steps()
    done = subprocess.run(["bash", "-c", install["run"]], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=600)
    if done.returncode and any(sign in done.stdout + done.stderr for sign in OFFLINE):
        pytest.skip("the install step asks the package index, which this machine cannot reach")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    workflow_env = yaml.safe_load(WORKFLOW.read_text())["jobs"]["run-autograding-tests"]["env"]
    return repo, {**env, **workflow_env}, graders["lab00"]["with"]


@pytest.mark.parametrize("name, lab00", [("starter", None), ("list kernel", LIST_KERNEL)])
def test_the_classroom_grade_step_scores_as_kernellab_grade(classroom, name, lab00, tmp_path):
    repo, env, step = classroom
    labs = repo / "labs" / "lab00_indexing.py"
    shipped = labs.read_text()
    labs.write_text(lab00 or shipped)
    try:
        done = subprocess.run(["bash", "-c", step["command"]], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=60 * float(step["timeout"]))
        classroom_score = json.loads((repo / "results.json").read_text())
    finally:
        labs.write_text(shipped)
    if lab00 is None:     # the untouched starter: 0 here as in `kernellab check`
        here = {"score": 0, "max_score": classroom_score["max_score"]}
    else:
        (tmp_path / "labs").mkdir()
        (tmp_path / "labs" / "lab00_indexing.py").write_text(lab00)
        here = runner.grade(["00"], root=tmp_path, results=tmp_path / "r.json",
                            seed=classroom_score["extra_data"]["seed"], out=None)
    assert classroom_score["score"] == here["score"] < here["max_score"] == step["max-score"], name
    assert classroom_score["extra_data"]["official"], classroom_score["output"]
    assert done.returncode == 1, done.stdout[-2000:]          # under 100%: the step fails
    if lab00 is LIST_KERNEL:
        lost = [t for t in classroom_score["tests"] if t["score"] < t["max_score"]]
        assert lost and all("compile check" in t["output"] for t in lost)
