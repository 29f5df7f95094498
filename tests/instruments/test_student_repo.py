"""A student release is a repository that grades itself: its workflow (.github/workflows/grade.yml)
uses Node 24 actions, installs as `make install` does, checks the graded tests, grades, writes the
score table to the job summary and uploads results.json; its .gitignore keeps the venv, caches,
figures and reports out. The slow test (KERNELLAB_SLOW_TESTS=1) runs the workflow's `run:` steps
as written, through bash as GitHub runs them, in a fresh clone of a release with a fresh venv, and
compares the score with `kernellab grade`'s here."""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from kernellab.course import target
from kernellab.grading import release, runner, student_repo

NODE24_ACTIONS = {"actions/checkout": 5, "actions/setup-python": 6, "actions/upload-artifact": 6}
OFFLINE = ("Temporary failure in name resolution", "Failed to establish a new connection",
           "Network is unreachable")


def workflow() -> dict:
    return yaml.safe_load(student_repo.WORKFLOW)


def steps() -> list[dict]:
    (job,) = workflow()["jobs"].values()
    return job["steps"]


def step(words: str) -> dict:
    return next(s for s in steps() if words in s.get("run", "") or words in s.get("uses", ""))


def test_the_workflow_grades_every_push_with_node24_actions_only():
    assert "push" in workflow()["on"]
    used = [s["uses"] for s in steps() if "uses" in s]
    assert {u.split("@")[0] for u in used} == set(NODE24_ACTIONS)
    for uses in used:
        name, version = uses.split("@")
        assert int(version.removeprefix("v")) >= NODE24_ACTIONS[name], uses
    assert "classroom" not in student_repo.WORKFLOW.lower()


def test_the_workflow_installs_as_make_install_does_with_a_pip_cache():
    make = re.search(r"pip install .*", release.STUDENT_MAKEFILE).group(0).replace("$(CUDA)", "cu13")
    assert make in step("pip install")["run"]
    setup = step("actions/setup-python")["with"]
    assert setup["cache"] == "pip" and "constraints.txt" in setup["cache-dependency-path"]


def test_the_workflow_checks_the_tests_grades_and_reports():
    names = [s.get("run", s.get("uses")) for s in steps()]
    verify = names.index(step("integrity --verify")["run"])
    grade = names.index(step("kernellab grade")["run"])
    assert verify < grade
    assert "$GITHUB_STEP_SUMMARY" in step("GITHUB_STEP_SUMMARY")["run"]
    upload = step("actions/upload-artifact")
    assert upload["with"]["path"] == "results.json" and upload["if"] == "always()"


def test_the_gitignore_keeps_runs_out_and_work_in(tmp_path):
    student_repo.write(tmp_path)
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    made = [".venv/bin/python", "labs/__pycache__/x.pyc", "figures/lab00.png", "results.json",
            ".kernellab/check/results-labs.json", ".pytest_cache/v", "kernellab.egg-info/PKG-INFO"]
    kept = ["labs/lab00_indexing.py", "notebooks/00_indexing.ipynb", ".github/workflows/grade.yml"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *made, *kept], cwd=tmp_path,
                             capture_output=True, text=True).stdout.split()
    assert ignored == made


def slow():
    return pytest.mark.skipif(os.environ.get("KERNELLAB_SLOW_TESTS") != "1",
                              reason="runs the workflow's steps in a fresh venv (minutes): "
                                     "KERNELLAB_SLOW_TESTS=1")


@slow()
@pytest.mark.usefixtures("grade_in_the_simulator")
def test_the_workflow_steps_pass_as_written_on_a_fresh_clone(tmp_path, fresh_venv):
    built = release.build(tmp_path / "release")
    assert (built / student_repo.WORKFLOW_PATH).read_text() == student_repo.WORKFLOW
    shutil.copy(target.ROOT / "solutions" / "lab00_indexing.py", built / "labs")  # some points
    for command in (["init", "--quiet", "-b", "main"], ["add", "."],
                    ["-c", "user.name=s", "-c", "user.email=s@x", "commit", "--quiet", "-m", "r"]):
        subprocess.run(["git", *command], cwd=built, check=True)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", built.as_uri(), str(clone)], check=True)
    venv = fresh_venv(tmp_path / "venv").parent.parent
    summary = tmp_path / "summary.md"
    (job,) = workflow()["jobs"].values()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("KERNELLAB_") and k != "PYTHONPATH"}
    env |= {**job["env"], "PATH": f"{venv / 'bin'}{os.pathsep}{env['PATH']}",
            "GITHUB_STEP_SUMMARY": str(summary)}
    for each in (s for s in steps() if "run" in s):
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", each["run"]],
                              cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
        if done.returncode and any(sign in done.stdout + done.stderr for sign in OFFLINE):
            pytest.skip("the install step asks the package index, which this machine cannot reach")
        assert done.returncode == 0, (each["run"], done.stdout[-2000:], done.stderr[-2000:])
    document = json.loads((clone / "results.json").read_text())
    assert document["extra_data"]["official"], document["output"][:2000]
    assert "total" in summary.read_text() and "kernellab grade" in summary.read_text()
    here = runner.grade(root=clone, results=tmp_path / "here.json", out=None,
                        seed=document["extra_data"]["seed"])
    assert document["score"] == here["score"] > 0
    assert document["max_score"] == here["max_score"]
