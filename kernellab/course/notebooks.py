"""Notebook hygiene for CI: committed without outputs, and each one runs headless.

    python -m kernellab.course.notebooks --check-clean --execute [NOTEBOOK ...]
    python -m kernellab.course.notebooks --write-setup      # after editing SETUP_CELL or COURSE_REPO

Notebooks execute with the solutions target, in their own folder, two at a time; a failure
names the notebook and the cell. Every notebook opens with the same setup cell and an
"Open in Colab" badge, both generated here from COURSE_REPO.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import string
import sys
import time
from pathlib import Path

from kernellab.course import target

NOTEBOOKS = target.ROOT / "notebooks"
CELL_TIMEOUT = 300

# The course repository on GitHub: the Colab badges point at it and Colab clones it. It holds
# the solutions, so a student release names its own (`kernellab release OUT --repo-url URL`);
# a fork sets its own here and runs `--write-setup`; a student can override the clone with the
# KERNELLAB_REPO environment variable.
COURSE_REPO = "https://github.com/kernellab/kernellab"
COURSE_BRANCH = "main"
COLAB_BADGE = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
               "(https://colab.research.google.com/github/$path/blob/$branch/notebooks/$notebook)")
# Under the badge: Colab's /content is wiped when the runtime is recycled.
KEEP_YOUR_WORK = ("*On Colab, keep your work:* `/content` is wiped when the runtime is recycled. "
                  "Mount Google Drive and set `KERNELLAB_CLONE` to a folder in it before the "
                  "setup cell runs (the course is then cloned there and stays), or download "
                  "your `labs/labNN_*.py` (Files panel) before you leave.")

# The first code cell of every notebook. On Colab it clones the course, installs it with the
# tested versions (constraints.txt) and the cu12 wheels (Colab's T4 driver is CUDA 12.4; the
# default cu13 wheels need an R580 driver) and moves into the clone. Elsewhere (a laptop, a
# JupyterHub with the course pulled by nbgitpuller) kernellab is already installed and it only
# imports it.
SETUP_CELL = """\
# Setup. On Colab: clone and install the course (once), then work in the clone.
# Elsewhere it only imports kernellab, which must come before numba.cuda.
import os, subprocess, sys
on_colab = "google.colab" in sys.modules
if on_colab:
    KERNELLAB_REPO = os.environ.get("KERNELLAB_REPO", "$repo")
    if not KERNELLAB_REPO:
        raise SystemExit("set KERNELLAB_REPO to your course's repository (ask your instructor)")
    clone = os.environ.get("KERNELLAB_CLONE", "/content/kernellab")   # in Drive, it stays
    if not os.path.isdir(clone):
        subprocess.run(["git", "clone", "--depth", "1", KERNELLAB_REPO, clone], check=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-c", "constraints.txt",
                        "-e", ".[cu12]"], cwd=clone, check=True)
        from importlib.metadata import version
        if "numpy" in sys.modules and version("numpy") != sys.modules["numpy"].__version__:
            raise SystemExit("numpy was upgraded: Runtime > Restart session, then run this cell again")
    sys.path.insert(0, clone)           # this kernel started before the install
    os.chdir(os.path.join(clone, "notebooks"))
import kernellab
from kernellab.gpu import device
print(f"kernellab mode: {device.mode()}" + (" (on Colab)" if on_colab else ""))"""


def setup_cell_source(repo: str = COURSE_REPO) -> str:
    return string.Template(SETUP_CELL).substitute(repo=repo)


def colab_badge(notebook: str, repo: str = COURSE_REPO) -> str | None:
    """The badge that opens `notebook` (a file name in notebooks/) in Colab, which opens GitHub
    repositories only: None for any other `repo`."""
    if not repo.startswith("https://github.com/"):
        return None
    path = repo.removeprefix("https://github.com/").removesuffix(".git")
    return string.Template(COLAB_BADGE).substitute(path=path, branch=COURSE_BRANCH, notebook=notebook)


def write_setup(path: Path, repo: str = COURSE_REPO) -> bool:
    """Give `path` the badge of `repo` and the keep-your-work note under its title, and the
    setup cell that clones `repo` as its first code cell ("" : a release that names none, whose
    cell asks for KERNELLAB_REPO and which has no badge); True when the file changed. Other
    cells are left as they are."""
    text = Path(path).read_text()
    notebook = json.loads(text)
    cells = notebook["cells"]
    title = cells[0]["source"]
    badge = colab_badge(Path(path).name, repo)
    lines = [badge + "\n", "\n", KEEP_YOUR_WORK + "\n"] if badge else [KEEP_YOUR_WORK + "\n"]
    old = [i for i, line in enumerate(title)
           if line.startswith(("[![Open In Colab]", KEEP_YOUR_WORK[:20]))]
    if old:
        end = old[-1] + 1
        title[old[0]:end] = lines
    else:
        title[1:1] = ["\n", *lines]
    setup = setup_cell_source(repo).splitlines(keepends=True)
    first_code = next(i for i, cell in enumerate(cells) if cell["cell_type"] == "code")
    if cells[first_code]["source"][:1] == setup[:1]:
        cells[first_code]["source"] = setup
    else:
        cells.insert(first_code, {"cell_type": "code", "execution_count": None,
                                  "id": "kernellab-setup", "metadata": {}, "outputs": [],
                                  "source": setup})
    updated = json.dumps(notebook, indent=1, ensure_ascii=False) + "\n"
    Path(path).write_text(updated)
    return updated != text


def with_outputs(path: Path) -> list[int]:
    """Indices of code cells that carry outputs or execution counts."""
    cells = json.loads(Path(path).read_text())["cells"]
    return [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
            and (cell.get("outputs") or cell.get("execution_count") is not None)]


SLOW_NOTEBOOK_S = 60     # a notebook slower than this names its slowest cell (06 has stalled ~300 s in CI)


def slowest_cell(notebook) -> str:
    """Its slowest code cell: the wall time from the previous cell's reply to its own, from the
    timings nbclient records in each cell's metadata. (A cell's own execute_input message can
    arrive late: on 2026-12-02 notebook 06 took 312 s while its cells' input-to-reply times
    summed to seconds.)"""
    from datetime import datetime

    def at(cell, key):
        stamp = cell.get("metadata", {}).get("execution", {}).get(key)
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")) if stamp else None
    code = [(i, cell) for i, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and at(cell, "shell.execute_reply")]
    if not code:
        return "no timed code cells"
    gaps, previous = [], at(code[0][1], "iopub.execute_input") or at(code[0][1], "shell.execute_reply")
    for index, cell in code:
        reply = at(cell, "shell.execute_reply")
        gaps.append(((reply - previous).total_seconds(), index, cell))
        previous = reply
    took, index, cell = max(gaps, key=lambda gap: gap[0])
    first_line = (cell.source.strip().splitlines() or [""])[0][:80]
    return f"slowest cell {index}: {took:.1f} s from the previous reply ({first_line})"


def execute(path: Path) -> tuple[Path, float, str | None, str]:
    """Run a notebook headless with the solutions target; returns (path, seconds, error or None,
    its slowest cell)."""
    import nbclient
    import nbformat
    from kernellab.course import settings
    env = settings.child_env(target="solutions")       # the kernel is a child process
    env.setdefault("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(Path(path).parent)}})
    started = time.perf_counter()
    try:
        client.execute(env=env)
    except Exception as exc:  # report the failing notebook and carry on with the rest
        return (path, time.perf_counter() - started, f"{type(exc).__name__}: {str(exc)[-1500:]}",
                slowest_cell(notebook))
    return path, time.perf_counter() - started, None, slowest_cell(notebook)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check-clean", action="store_true", help="fail if any holds outputs")
    parser.add_argument("--execute", action="store_true", help="run each one headless")
    parser.add_argument("--write-setup", action="store_true",
                        help="give each the Colab badge and the setup cell (from SETUP_CELL)")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    failed = False
    if args.write_setup:
        changed = [path.name for path in paths if write_setup(path)]
        print(f"setup cell and badge written: {', '.join(changed) or 'all were up to date'}")
    if args.check_clean:
        for path in paths:
            dirty = with_outputs(path)
            if dirty:
                failed = True
                print(f"{path}: code cells {dirty} hold outputs; clear them before committing "
                      f"(jupyter nbconvert --clear-output --inplace {path})")
        print(f"{len(paths)} notebooks checked for outputs")
    if args.execute:
        with concurrent.futures.ProcessPoolExecutor(max_workers=args.jobs) as pool:
            for path, seconds, error, slowest in pool.map(execute, paths):
                print(f"{'FAILED' if error else 'ok':<7}{seconds:6.1f} s  {path.name}"
                      + (f"  ({slowest})" if seconds > SLOW_NOTEBOOK_S else ""))
                if error:
                    failed = True
                    print(f"        {error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
