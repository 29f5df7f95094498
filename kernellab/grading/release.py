"""`kernellab release OUT`: the student distribution of the course, without the answers.

It holds the starter (labs/), the notebooks (outputs cleared), experiments/, kernellab/, the
recorded GPU data, the graded tests with their checksums, the packaging files, and a student
README and Makefile. It leaves out solutions/, tests/mutants/ (near-copies of the solutions)
and the tests of kernellab itself (they need the solutions). Before it returns, the release is
searched for the body of every solution function that differs from the starter; any hit fails
the build.

In a release, `make test` grades the student's labs (the untouched starter scores 0: the stubs
fail by design) and `make tour` shows the recorded H200 figures where a solution is needed.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import textwrap
from pathlib import Path

from kernellab.grading import integrity
from kernellab.course import target

CONSTRAINTS = "constraints.txt"
COPIED = ("kernellab", "labs", "experiments", "data")
COPIED_FILES = ("pyproject.toml", "environment.yml", CONSTRAINTS)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
MIN_BODY_CHARS = 40          # shorter bodies ("return out") are too common to identify a solution

STUDENT_MAKEFILE = """\
# kernellab, student release: `make tour` and `make test` each set themselves up.
VENV   ?= .venv
PYTHON ?= python3
CUDA   ?= cu13
KL     := $(VENV)/bin/kernellab
STAMP  := $(VENV)/.kernellab-installed
TEST_DEVICE ?= sim

.PHONY: install tour test clean

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
\t$(PYTHON) -m venv $(VENV)
\t$(VENV)/bin/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(CUDA)]"
\ttouch $(STAMP)

tour: install
\t$(KL) tour

# Grades your labs/: every stub you have not written yet scores 0.
test: install
\tKERNELLAB_DEVICE=$(TEST_DEVICE) $(KL) grade

clean:
\trm -rf $(VENV) .kernellab figures results.json
"""

STUDENT_README = """\
# kernellab

A kernel lab for learning GPU performance with Numba's `numba.cuda`: you write unfused and fused
kernels, measure launch overhead and memory traffic, run streams, calculate occupancy and capture
CUDA graphs. Everything runs without a GPU, in Numba's CUDA simulator; on an NVIDIA GPU the same
code runs with live timings.

## Quick start

```
make tour
make test
```

Each sets itself up on a fresh machine (`make install` makes `.venv` once, with the tested
versions from `constraints.txt`). `make tour` shows what each lab measures: on a GPU it runs
live; without one it shows the figures drawn from the data recorded on an NVIDIA H200 (`data/reference/h200/`).
`make test` grades your `labs/`: a score table and `results.json`. Untouched, the starter scores
0: each stub raises `NotImplementedError` until you write it.

Older NVIDIA drivers (below R580, e.g. Colab's T4): `make install CUDA=cu12`, or
`pip install -c constraints.txt -e ".[cu12]"`. On Colab, each notebook's first cell clones and
installs the course; `/content` is wiped when the runtime is recycled, so keep your clone in
Google Drive (set `KERNELLAB_CLONE`) or download your `labs/` before you leave. The conda route:
`conda env create -f environment.yml && conda activate kernellab && pip install --no-deps -e .`

## How to work a lab

1. Open `notebooks/NN_topic.ipynb` (`.venv/bin/jupyter lab`) and read along. A notebook runs up
   to the first stub you have not written, and stops there naming it (`Lab NN.M: ...`).
2. Fill in the stubs in `labs/labNN_topic.py`. Each says roughly how many lines it needs, the
   launch shape and the memory budget.
3. Check your work: `.venv/bin/kernellab grade NN`. The inputs are random on every run; the seed
   is printed, and `--seed N` replays it. `.venv/bin/python -m pytest tests/labs/test_labNN_topic.py`
   runs the same checks with pytest's full output.
4. Run the lab on your own code: `.venv/bin/kernellab tour NN --target labs` (`make tour` shows
   the recorded figures). Until you are done it lists each stub still to write, one a line.

`KERNELLAB_DEVICE=auto|gpu|sim` picks the device (default `auto`); `kernellab info` prints the
mode, the device and the versions.

## Layout

- `labs/labNN_topic.py`: your code. `tests/labs/test_labNN_topic.py`: the graded checks, verified
  against `tests/labs/CHECKSUMS.sha256` (an edited test makes the grade unofficial).
- `notebooks/`: the walkthroughs. `experiments/`: each lab's measurements and figures.
- `kernellab/`: the shared instruments and the grader. `data/reference/`: the recorded GPU data.
"""


def check_output(out: Path, what: str, new: bool) -> Path:
    """`out`, resolved, once it is known to be a safe place for a build: not an existing file,
    not inside the course folder (a build copies the course's folders, and one inside them
    would copy itself into itself) except under its git-ignored build/, and, when `new`, not
    existing yet. Checked before anything is written; a ValueError names the problem."""
    out, root = Path(out).resolve(), target.ROOT.resolve()
    if out.exists() and not out.is_dir():
        raise ValueError(f"{what} {out} is a file: give a folder")
    if (out == root or root in out.parents) and root / "build" not in (out, *out.parents):
        raise ValueError(f"{what} {out} lies inside the course folder {root}, which the build "
                         f"copies: give a folder outside it (or under {root / 'build'})")
    if new and out.exists():
        raise ValueError(f"{out} already exists: give a new folder for the {what}")
    return out


def copy_course(dest: Path, folders=COPIED, files=COPIED_FILES) -> None:
    """Copy course folders and top-level files into `dest`, without caches."""
    for folder in folders:
        shutil.copytree(target.ROOT / folder, dest / folder, ignore=IGNORED)
    for name in files:
        shutil.copy2(target.ROOT / name, dest / name)


def graded_test_files(tests: Path = integrity.TESTS) -> list[Path]:
    """The graded tests and what they need: the kernellab package provides the rest."""
    return sorted(tests.glob("test_lab[0-9][0-9]_*.py"))


def copy_graded_tests(dest: Path) -> None:
    """The graded tests and their recorded checksums (the lines of the files shipped), refusing
    to ship a test that differs from what the instructor recorded."""
    recorded = integrity.recorded()
    files = graded_test_files()
    changed = [p.name for p in files if recorded.get(p.name) != integrity.digest(p)]
    if changed:
        raise ValueError(f"tests/ differs from {integrity.MANIFEST.name} in {', '.join(changed)} "
                         "(re-record with `python -m kernellab.grading.integrity --write`)")
    dest.mkdir(parents=True)
    for path in files:
        shutil.copy2(path, dest / path.name)
    (dest / integrity.MANIFEST.name).write_text("".join(f"{recorded[p.name]}  {p.name}\n"
                                                        for p in files))


def clear_outputs(notebook: Path) -> None:
    document = json.loads(notebook.read_text())
    for cell in document["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
    notebook.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")


def build(out: Path, repo_url: str | None = None) -> Path:
    """Write the student release into `out` (which must not exist yet) and check it for leaks.

    Its notebooks' Colab setup cell clones `repo_url`, the students' repository (the course's
    own holds the solutions); without one the cell asks the student for KERNELLAB_REPO and the
    notebooks carry no Colab badge."""
    from kernellab.course import notebooks
    target.require_solutions()
    if repo_url is not None and (not repo_url.strip() or any(c.isspace() for c in repo_url)):
        raise ValueError(f"--repo-url must be a repository URL with no spaces, not {repo_url!r}")
    if repo_url and repo_url.rstrip("/").removesuffix(".git") == notebooks.COURSE_REPO:
        raise ValueError(f"--repo-url {repo_url} is the course's own repository, which holds the "
                         "solutions: give the students' repository")
    out = check_output(out, "release", new=True)
    copy_course(out)
    copy_graded_tests(out / "tests" / "labs")
    shutil.copytree(target.ROOT / "notebooks", out / "notebooks", ignore=IGNORED)
    for notebook in (out / "notebooks").glob("*.ipynb"):
        notebooks.write_setup(notebook, repo=repo_url or "")
        clear_outputs(notebook)
    (out / "README.md").write_text(STUDENT_README)
    (out / "Makefile").write_text(STUDENT_MAKEFILE)
    from kernellab.grading import student_repo
    student_repo.write(out)             # the workflow that grades each push, and a .gitignore
    found = leaks(out)
    if found:
        raise RuntimeError("the release holds solution code, not written out safely:\n  "
                           + "\n  ".join(found[:20]))
    return out


def function_bodies(source: str) -> dict[str, tuple[str, str]]:
    """Every function in `source` by qualified name: (its body unparsed, its body's own text
    with whitespace collapsed), both without the docstring."""
    tree = ast.parse(source)
    lines = source.splitlines()
    bodies = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    body = child.body
                    if body and isinstance(body[0], ast.Expr) and isinstance(
                            getattr(body[0], "value", None), ast.Constant) and isinstance(
                            body[0].value.value, str):
                        body = body[1:]
                    if body:
                        text = "\n".join(lines[body[0].lineno - 1:body[-1].end_lineno])
                        bodies[name] = ("\n".join(ast.unparse(stmt) for stmt in body),
                                        collapse(textwrap.dedent(text)))
                visit(child, name + ".")

    visit(tree, "")
    return bodies


def collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def solution_bodies(root: Path) -> dict[str, tuple[str, str]]:
    """Each solution function whose body the starter does not already give away (in any lab),
    long enough to recognise, as {'solutions/labNN_x.py:name': (unparsed, collapsed text)}."""
    given = {code for starter in (root / "labs").glob("lab*.py")
             for code, _ in function_bodies(starter.read_text()).values()}
    found = {}
    for solution in sorted((root / "solutions").glob("lab*.py")):
        for name, body in function_bodies(solution.read_text()).items():
            if body[0] not in given and len(body[1]) >= MIN_BODY_CHARS:
                found[f"solutions/{solution.name}:{name}"] = body
    return found


def release_texts(folder: Path):
    """(path, text) for every text file in `folder`; a notebook's text is its cells' sources."""
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        try:
            text = path.read_text()
        except (UnicodeDecodeError, ValueError):
            continue                                   # figures and other binary files
        if path.suffix == ".ipynb":
            text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        yield path, text


def leaks(folder: Path, root: Path | None = None) -> list[str]:
    """Where in `folder` a solution body appears, one line each: the same statements in any
    function (compared as parsed code) or the same text anywhere (whitespace aside)."""
    solutions = solution_bodies(root or target.ROOT)
    by_code = {code: name for name, (code, _) in solutions.items()}
    found = []
    for path, text in release_texts(Path(folder)):
        where = path.relative_to(folder)
        flat = collapse(text)
        for name, (_, body_text) in solutions.items():
            if body_text in flat:
                found.append(f"{where}: holds the text of {name}")
        if path.suffix == ".py":
            try:
                functions = function_bodies(text)
            except SyntaxError:
                continue
            for function, (code, _) in functions.items():
                if code in by_code:
                    found.append(f"{where}:{function} has the body of {by_code[code]}")
    return sorted(set(found))
