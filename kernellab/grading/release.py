"""`kernellab release OUT`: the student distribution of the course, without the answers.

It holds what the notebooks, the grade and the tour read, and nothing else: the starter
(labs/), the notebooks (outputs cleared) and the docs/ pages they link to, experiments/,
kernellab/ (no build outputs), the recorded GPU data (each lab's records, written compactly, and
the figures the tour shows, as 256-colour PNGs), the graded tests with their checksums, the
packaging files, and a student README and Makefile. It leaves out solutions/, tests/mutants/
(near-copies of the solutions) and the tests of kernellab itself (they need the solutions).
Before it returns, the release is searched for solution code: the body of every solution
function that differs from the starter, and every single line of such a body at least
MIN_LINE_CHARS long that the starter (with the notebooks' hints) does not contain; any hit fails
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
COPIED = ("kernellab", "labs", "experiments")
COPIED_FILES = ("pyproject.toml", "environment.yml", CONSTRAINTS)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints",   # caches
                                 "*.so", "*.o", "*.egg-info", "build")          # build outputs
MIN_BODY_CHARS = 40          # shorter bodies ("return out") are too common to identify a solution
MIN_LINE_CHARS = 30          # a single solution line this long (stripped) identifies it
# Published models a lab checks its exercises against, which the release must ship: a line of a
# solution that one of them holds is given, not leaked. Lab 06's exercises 06.1-06.4 re-derive
# NVIDIA's occupancy rules, which kernellab.occupancy publishes and the lab names as its check.
GIVEN_MODELS = ("kernellab/occupancy.py",)
HINT = re.compile(r"<details>\s*<summary>\s*Hint\b.*?</details>", re.S)   # a notebook's hint, opened on demand
DOC_LINK = re.compile(r"docs/[\w.-]+\.md")
FIGURE_COLOURS = 256         # the tour's figures, quantized: they look the same at under a third the bytes

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
    """Copy course folders and top-level files into `dest`, without caches or build outputs."""
    for folder in folders:
        shutil.copytree(target.ROOT / folder, dest / folder, ignore=IGNORED)
    for name in files:
        shutil.copy2(target.ROOT / name, dest / name)


def copy_recorded_data(dest: Path) -> None:
    """What the notebooks, claims and tour read of data/reference/: each GPU's labNN.json,
    rewritten without indentation (the same JSON), and its figures/*.png, quantized to
    FIGURE_COLOURS colours."""
    from PIL import Image
    for record in sorted(target.ROOT.glob("data/reference/*/lab*.json")):
        copied = dest / record.relative_to(target.ROOT)
        copied.parent.mkdir(parents=True, exist_ok=True)
        copied.write_text(json.dumps(json.loads(record.read_text()), separators=(",", ":"),
                                     sort_keys=True) + "\n")
    for figure in sorted(target.ROOT.glob("data/reference/*/figures/*.png")):
        copied = dest / figure.relative_to(target.ROOT)
        copied.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(figure) as image:
            image.convert("RGB").quantize(FIGURE_COLOURS, method=Image.Quantize.FASTOCTREE).save(copied)


def copy_linked_docs(dest: Path) -> None:
    """The docs/ pages a notebook or a starter file links to (docs/NAME.md), as they are."""
    texts = [p.read_text() for p in (*sorted((target.ROOT / "notebooks").glob("*.ipynb")),
                                     *sorted((target.ROOT / "labs").glob("lab*.py")))]
    for name in sorted({link for text in texts for link in DOC_LINK.findall(text)}):
        if (target.ROOT / name).is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
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
    copy_recorded_data(out)
    copy_graded_tests(out / "tests" / "labs")
    shutil.copytree(target.ROOT / "notebooks", out / "notebooks", ignore=IGNORED)
    copy_linked_docs(out)
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


def functions(source: str) -> dict[str, list[ast.stmt]]:
    """Every function in `source` by qualified name (`Class.method`, `outer.inner`): its body's
    statements without the docstring; a function whose body is only a docstring is left out."""
    found = {}

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                body = [] if isinstance(child, ast.ClassDef) else child.body
                if body and isinstance(body[0], ast.Expr) and isinstance(
                        getattr(body[0], "value", None), ast.Constant) and isinstance(body[0].value.value, str):
                    body = body[1:]
                if body:
                    found[name] = body
                visit(child, name + ".")

    visit(target.parse_source(source), "")
    return found


def function_bodies(source: str) -> dict[str, tuple[str, str]]:
    """Every function in `source` by qualified name: (its body unparsed, its body's own text
    with whitespace collapsed), both without the docstring."""
    lines = source.splitlines()
    return {name: ("\n".join(ast.unparse(stmt) for stmt in body),
                   collapse(textwrap.dedent("\n".join(lines[body[0].lineno - 1:body[-1].end_lineno]))))
            for name, body in functions(source).items()}


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


def given_text(root: Path) -> str:
    """What a student is given to start from, whitespace collapsed: the starter (every lab), the
    notebooks' hints (HINT: a lab's recipe, moved out of the stub, which may quote a line of the
    solution on purpose) and the published models (GIVEN_MODELS)."""
    files = [*sorted((root / "labs").glob("lab*.py")), *(root / m for m in GIVEN_MODELS)]
    hints = [hint for notebook in sorted((root / "notebooks").glob("*.ipynb"))
             for cell in json.loads(notebook.read_text())["cells"] if cell["cell_type"] == "markdown"
             for hint in HINT.findall("".join(cell["source"]))]
    return collapse("\n".join([*(p.read_text() for p in files if p.is_file()), *hints]))


def solution_lines(root: Path) -> dict[str, str]:
    """Each line of a solution function's body (its docstring aside), whitespace collapsed, at least
    MIN_LINE_CHARS long, that nothing a student is given to start from contains (`given_text`):
    {line: 'solutions/labNN_x.py:name'}."""
    given = given_text(root)
    found = {}
    for solution in sorted((root / "solutions").glob("lab*.py")):
        source = solution.read_text()
        lines = source.splitlines()
        for name, body in functions(source).items():
            for line in lines[body[0].lineno - 1:body[-1].end_lineno]:
                line = collapse(line)
                if len(line) >= MIN_LINE_CHARS and line not in given:
                    found.setdefault(line, f"solutions/{solution.name}:{name}")
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
    """Where in `folder` solution code appears, one line each: a solution body as the same
    statements in any function (compared as parsed code) or the same text anywhere, or a single
    line of one (`solution_lines`) anywhere (whitespace aside)."""
    solutions = solution_bodies(root or target.ROOT)
    lines = solution_lines(root or target.ROOT)
    by_code = {code: name for name, (code, _) in solutions.items()}
    found = []
    for path, text in release_texts(Path(folder)):
        where = path.relative_to(folder)
        flat = collapse(text)
        for name, (_, body_text) in solutions.items():
            if body_text in flat:
                found.append(f"{where}: holds the text of {name}")
        found += [f"{where}: holds a line of {name}: {line}" for line, name in lines.items() if line in flat]
        if path.suffix == ".py":
            try:
                bodies = function_bodies(text)
            except SyntaxError:
                continue
            for function, (code, _) in bodies.items():
                if code in by_code:
                    found.append(f"{where}:{function} has the body of {by_code[code]}")
    return sorted(set(found))
