"""`kernellab release`: the student distribution holds no solution code and works on its own.

The release is installed (`pip install --no-deps`, not editable) into a fresh venv that links to
the test venv's packages, then used from its own folder, from a subfolder and from outside it:
the course folder is found from the working directory, falling back to the package's location.
"""

import importlib.util
import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from kernellab.grading import integrity, release
from kernellab.course import target

SOLUTIONS = target.ROOT / "solutions"

pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")


def builds_without_an_index() -> bool:
    """Whether the test venv's own setuptools (linked into the fresh one) can build the release
    (a wheel needs the `wheel` package before setuptools 70.1): then pip needs no package index,
    as on the offline GPU machine."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    import setuptools
    major, minor = (int(part) for part in setuptools.__version__.split(".")[:2])
    return importlib.util.find_spec("wheel") is not None or (major, minor) >= (70, 1)

@pytest.fixture(scope="module")
def student_release(tmp_path_factory):
    return release.build(tmp_path_factory.mktemp("release") / "kernellab")


@pytest.fixture(scope="module")
def installed(student_release, fresh_venv, tmp_path_factory):
    """The python of a fresh venv with the release installed from its folder, not editable."""
    python = fresh_venv(tmp_path_factory.mktemp("venv") / "venv")
    offline = ["--no-build-isolation"] if builds_without_an_index() else []
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", *offline,
                           "--disable-pip-version-check", str(student_release)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return python


def run(python, *args, cwd, timeout=600):
    """A command as a student runs it: in the simulator, with no target set (each command's own
    default: the starter for pytest and grade, the recorded figures for the tour)."""
    env = {name: value for name, value in os.environ.items() if name != "KERNELLAB_TARGET"}
    # no path into this checkout (a GPU run's script puts it on PYTHONPATH): the release's own install only
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != target.ROOT]
    return subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**env, "PYTHONPATH": os.pathsep.join(paths), "KERNELLAB_DEVICE": "sim"})


def test_release_leaves_the_answers_out(student_release):
    names = {str(p.relative_to(student_release)) for p in student_release.rglob("*")}
    assert not [n for n in names if n.startswith(("solutions", "tests/mutants"))]
    assert {"labs/lab00_indexing.py", "tests/labs/test_lab00_indexing.py", "Makefile", "README.md",
            "constraints.txt", "data/reference/h200/lab02.json"} <= names
    tests = student_release / "tests" / "labs"
    assert integrity.changes(tests, tests / "CHECKSUMS.sha256") == []
    for notebook in (student_release / "notebooks").glob("*.ipynb"):
        cells = json.loads(notebook.read_text())["cells"]
        assert not [c for c in cells if c.get("outputs") or c.get("execution_count")], notebook
    readme = (student_release / "README.md").read_text()
    for instructor_only in ("kernellab check", "kernellab mutants", "solutions/", "kernellab bench"):
        assert instructor_only not in readme
    assert release.leaks(student_release) == []


def test_release_holds_what_a_student_needs_in_at_most_10_mb(student_release):
    """The recorded data the notebooks, claims and tour read (each lab's records, the tour's figures),
    no run logs or scripts, no build outputs; at most 10 MB in all."""
    files = [p for p in student_release.rglob("*") if p.is_file()]
    data = {str(p.relative_to(student_release / "data" / "reference")) for p in files
            if p.is_relative_to(student_release / "data")}
    recorded = {str(p.relative_to(target.ROOT / "data" / "reference"))
                for pattern in ("*/lab*.json", "*/figures/*.png")
                for p in (target.ROOT / "data" / "reference").glob(pattern)}
    assert data == recorded
    assert not [p for p in files if p.suffix in (".so", ".o", ".pyc")]
    stored = json.loads((student_release / "data/reference/h200/lab07.json").read_text())
    assert stored == json.loads((target.ROOT / "data/reference/h200/lab07.json").read_text())
    assert sum(p.stat().st_size for p in files) <= 10_000_000


def test_leak_search_finds_a_single_solution_line_anywhere(student_release, tmp_path):
    """One line of a solution body (30 characters or more, not in the starter) planted in a copied
    file fails the check (the fresh release passes it: test_release_leaves_the_answers_out)."""
    lines = release.solution_lines(target.ROOT)
    starter = release.collapse("\n".join(p.read_text() for p in (target.ROOT / "labs").glob("lab*.py")))
    assert lines and not [line for line in lines if line in starter or len(line) < release.MIN_LINE_CHARS]
    line, name = next(iter(lines.items()))
    copy = shutil.copytree(student_release, tmp_path / "release")
    planted = copy / "experiments" / "lab00_indexing.py"
    planted.write_text(planted.read_text() + f"\n# kept from a diagnostic:\n    {line}\n")
    found = release.leaks(copy)
    assert f"experiments/lab00_indexing.py: holds a line of {name}: {line}" in found
    assert all(hit.startswith("experiments/lab00_indexing.py") for hit in found), found


def test_a_line_the_starter_or_a_hint_gives_is_not_a_leak(tmp_path):
    """A solution line counts as given where the starter holds it, or a notebook's hint (a
    `<details><summary>Hint` cell, opened on demand) quotes it; otherwise it is the solution's."""
    (tmp_path / "labs").mkdir()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "labs/lab00_x.py").write_text(
        'def scale(x, out):\n    # out[i] = x[i] * 2.0 for each index i < x.size\n    raise NotImplementedError("Lab 00.1")\n')
    (tmp_path / "solutions/lab00_x.py").write_text(
        "def scale(x, out):\n    for i in range(x.size):\n        out[i] = x[i] * 2.0  # for each index i < x.size\n"
        "    total_of_the_scaled_values = out.sum()\n    return total_of_the_scaled_values\n")
    hint = {"cell_type": "markdown", "source": ["<details><summary>Hint 00.1</summary>\n",
                                                "`total_of_the_scaled_values = out.sum()`\n</details>"]}
    notebook = tmp_path / "notebooks/00_x.ipynb"
    notebook.write_text(json.dumps({"cells": []}))
    assert sorted(release.solution_lines(tmp_path)) == [
        "out[i] = x[i] * 2.0 # for each index i < x.size", "return total_of_the_scaled_values",
        "total_of_the_scaled_values = out.sum()"]
    notebook.write_text(json.dumps({"cells": [hint]}))
    assert "total_of_the_scaled_values = out.sum()" not in release.solution_lines(tmp_path)


def test_leak_search_finds_a_solution_body_anywhere(tmp_path):
    """Copied whole, renamed into a starter file, or pasted into a notebook: each is found."""
    body = next(iter(release.solution_bodies(target.ROOT).items()))
    name, (code, _) = body
    file, function = name.split(":")
    source = (target.ROOT / file).read_text()
    (tmp_path / "copied.py").write_text(source)
    (tmp_path / "renamed.py").write_text("def mine():\n" + textwrap.indent(code, "    ") + "\n")
    segment = release.function_bodies(source)[function][1]
    (tmp_path / "pasted.ipynb").write_text(json.dumps(
        {"cells": [{"cell_type": "code", "source": [segment]}]}))
    found = release.leaks(tmp_path)
    for where in ("copied.py", "renamed.py:mine", "pasted.ipynb"):
        assert any(line.startswith(where) for line in found), (where, found)


def test_the_release_refuses_an_existing_folder(student_release):
    with pytest.raises(ValueError, match="already exists"):
        release.build(student_release)


def test_installed_release_grades_the_starter_zero_and_a_solution_full(student_release, installed,
                                                                       tmp_path):
    """`make test` in a release is `kernellab grade`. One grade, run from a subfolder: the
    untouched starter of Lab 01 scores exactly 0, Lab 00 with its solution copied in full marks.
    (The starter files are the repository's, which `kernellab check` grades 0 in every lab.)"""
    assert "$(KL) grade" in (student_release / "Makefile").read_text()
    for starter in (target.ROOT / "labs").glob("lab*.py"):
        assert (student_release / "labs" / starter.name).read_text() == starter.read_text()
    submission = tmp_path / "submission"
    shutil.copytree(student_release / "labs", submission / "labs")
    shutil.copy(SOLUTIONS / "lab00_indexing.py", submission / "labs")
    results = tmp_path / "results.json"
    proc = run(installed, "-m", "kernellab.cli", "grade", "00", "01", "--root", str(submission),
               "--results", str(results), cwd=student_release / "labs")
    document = json.loads(results.read_text())
    assert "WARNING" not in document["output"]          # the shipped checksums verify
    by_lab = {}
    for test in document["tests"]:
        points = by_lab.setdefault(test["name"].split(" ")[1], [0, 0])
        points[0] += test["score"]
        points[1] += test["max_score"]
    assert by_lab["00"][0] == by_lab["00"][1] > 0, proc.stdout[-2000:]
    assert by_lab["01"][0] == 0 < by_lab["01"][1], proc.stdout[-2000:]


def test_installed_release_tours_from_recorded_figures(student_release, installed, tmp_path):
    proc = run(installed, "-m", "kernellab.cli", "tour", "--figures", str(tmp_path), cwd=student_release)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "no solutions in this release" in proc.stdout
    assert sorted(p.name for p in tmp_path.glob("*.png")) == sorted(
        p.name for p in (student_release / "data/reference/h200/figures").glob("*.png"))


def test_root_is_found_from_a_subfolder_and_falls_back_to_the_package(student_release, installed,
                                                                      tmp_path):
    where = "from kernellab.course import target; print(target.ROOT, len(target.labs()))"
    inside = run(installed, "-c", where, cwd=student_release / "notebooks")
    assert inside.stdout.split() == [str(student_release), str(len(target.labs()))], \
        inside.stderr[-2000:]
    outside = run(installed, "-c", where, cwd=tmp_path)
    root, count = outside.stdout.split()
    assert Path(root).name == "site-packages" and count == "0"   # the package's folder: no course
    instructor = run(installed, "-m", "kernellab.cli", "check", cwd=student_release)
    assert instructor.returncode == 2 and "needs solutions/" in instructor.stderr


def test_notebook_runs_up_to_the_first_stub(student_release, installed):
    """Notebook 00 on the untouched starter: the setup cells run, then the first stub stops it
    with its name."""
    script = textwrap.dedent("""
        import nbclient, nbformat, sys
        nb = nbformat.read(sys.argv[1], as_version=4)
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                         resources={"metadata": {"path": "notebooks"}})
        try:
            client.execute()
        except nbclient.exceptions.CellExecutionError as exc:
            ran = [i for i, c in enumerate(nb.cells) if c.get("outputs") or c.get("execution_count")]
            print(exc.ename, "|", exc.evalue, "|", len(ran))
    """)
    proc = run(installed, "-c", script, "notebooks/00_indexing.ipynb", cwd=student_release)
    ename, evalue, cells_run = proc.stdout.strip().splitlines()[-1].split(" | ")
    assert ename == "NotImplementedError" and evalue.startswith("Lab 00."), proc.stdout[-2000:]
    assert int(cells_run) >= 2                           # the imports ran before the stub


def test_every_claim_in_the_release_is_true_or_awaits_without_failing(student_release, installed):
    """A notebook's discussion prints its lab's claims; without solutions/ a claim that computes
    with the course's solution says it awaits them instead of raising (and none may fail)."""
    script = textwrap.dedent("""
        from kernellab.course import claims, target
        for lab in target.labs():
            verdicts = claims.report(lab, out=lambda line: None)
            print(lab, sum(v.true is True for v in verdicts), sum(v.true is False for v in verdicts),
                  sum(v.true is None for v in verdicts))
    """)
    proc = run(installed, "-c", script, cwd=student_release)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    counts = {line.split()[0]: tuple(map(int, line.split()[1:])) for line in proc.stdout.splitlines()}
    assert sorted(counts) == sorted(target.labs()) and all(failed == 0 for _, failed, _ in counts.values()), counts


def notebook_texts(folder: Path) -> dict[str, str]:
    return {nb.name: "\n".join("".join(cell["source"]) for cell in json.loads(nb.read_text())["cells"])
            for nb in sorted((folder / "notebooks").glob("*.ipynb"))}


def test_no_released_notebook_names_a_repository_with_solutions(student_release, tmp_path):
    from kernellab.course import notebooks
    students = "https://github.com/example-course/kernellab-students"
    named = release.build(tmp_path / "named", repo_url=students)
    for folder, repo in ((student_release, ""), (named, students)):
        texts = notebook_texts(folder)
        assert len(texts) == len(list((target.ROOT / "notebooks").glob("*.ipynb")))
        for name, text in texts.items():
            assert notebooks.COURSE_REPO not in text and "kernellab/kernellab" not in text, name
            assert notebooks.setup_cell_source(repo) in text, name       # the clone it installs
            assert '"-c", "constraints.txt"' in text and notebooks.KEEP_YOUR_WORK in text, name
            assert (f"colab.research.google.com/github/example-course/kernellab-students/blob/main/"
                    f"notebooks/{name}" in text) == bool(repo), name
    with pytest.raises(ValueError, match="holds the solutions"):
        release.build(tmp_path / "upstream", repo_url=notebooks.COURSE_REPO + ".git")
    assert not (tmp_path / "upstream").exists()
