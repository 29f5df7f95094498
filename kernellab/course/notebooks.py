"""Notebook hygiene for CI: committed without outputs, and each one runs headless.

    python -m kernellab.course.notebooks --check-clean --execute [NOTEBOOK ...]
    python -m kernellab.course.notebooks --write-setup      # after editing SETUP_CELL or COURSE_REPO
    python -m kernellab.course.notebooks --execute --output-dir /tmp/run notebooks/00_indexing.ipynb

Notebooks execute with the solutions target, in their own folder, two at a time; a failure
names the notebook and the cell. A notebook whose lab is in reading.ENFORCED also fails over the
reading budget (kernellab.course.reading), counted on its executed copy; --output-dir keeps
those copies (never commit them: notebooks are committed without outputs). Every notebook
opens with the same setup cell and an "Open in Colab" badge, both generated here from
COURSE_REPO.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import json
import string
import sys
import time
from pathlib import Path

from kernellab.course import reading, target

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


SLOW_NOTEBOOK_S = 60     # a notebook slower than this names its slowest cell


@functools.cache
def kernel_manager_class():
    """nbclient's kernel manager, with a shell channel that cannot miss a cell's reply.

    jupyter_client's Session.send writes to a zmq.asyncio socket through a plain shadow of it,
    so pyzmq's asyncio layer never hears of the send. libzmq's file descriptor is
    edge-triggered: a send handles the socket's pending commands, and when the kernel's reply
    has just come in, it takes the one wake-up the awaited poll was waiting for (libzmq asks for
    ZMQ_EVENTS to be read after each send; pyzmq's asyncio socket then wakes its waiters).
    nbclient sends on the shell channel while it awaits a cell's reply there when the cell shows
    an ipywidgets Output widget: its stand-in for the widget sends each output back to the
    kernel (jupyter/nbclient#312). Notebook 06's explorer is such a cell: in some runs its
    reply, already there, was read only when the poll's timeout, the cell timeout (300 s), ran
    out, and the run went on as if nothing had happened. This channel reads ZMQ_EVENTS through
    the asyncio socket after every send. Built on first use: jupyter_client takes 0.15 s to
    import."""
    import zmq
    from jupyter_client import AsyncKernelManager
    from jupyter_client.asynchronous import AsyncKernelClient
    from jupyter_client.channels import AsyncZMQSocketChannel
    from traitlets import Type, default

    class ShellChannel(AsyncZMQSocketChannel):
        def send(self, msg):
            super().send(msg)
            self.socket.get(zmq.EVENTS)      # wakes a waiting poll if a message is there

    class KernelClient(AsyncKernelClient):
        shell_channel_class = Type(ShellChannel)

    class KernelManager(AsyncKernelManager):
        @default("client_factory")
        def _client_factory_default(self):
            return KernelClient

    return KernelManager


class CellClock:
    """Each code cell's wall time as nbclient waits for it, from sending the cell to holding its
    reply and outputs (nbclient's hooks). The kernel's own timestamps cannot show a wait on
    nbclient's side: in the 300 s runs of notebook 06 they put the time in the next cell."""

    def __init__(self):
        self.started: dict[int, float] = {}
        self.seconds: dict[int, float] = {}

    def start(self, cell, cell_index):
        self.started[cell_index] = time.perf_counter()

    def stop(self, cell, cell_index, execute_reply):
        self.seconds[cell_index] = time.perf_counter() - self.started[cell_index]

    def slowest(self, notebook) -> str:
        """'slowest cell N: S s (its first line)'; a cell still waited on when the run ended
        counts up to then."""
        if not self.started:
            return "no code cell ran"
        now = time.perf_counter()
        took = {index: self.seconds.get(index, now - start) for index, start in self.started.items()}
        index = max(took, key=took.get)
        first_line = (notebook.cells[index].source.strip().splitlines() or [""])[0][:80]
        running = "" if index in self.seconds else ", unfinished"
        return f"slowest cell {index}: {took[index]:.1f} s{running} ({first_line})"


def execute(path: Path, output_dir: Path | None = None) -> tuple[Path, float, str | None, str]:
    """Run a notebook headless with the solutions target; returns (path, seconds, error or None,
    its slowest cell). The error is also a lab in reading.ENFORCED over the reading budget. The
    executed copy goes to `output_dir` when given."""
    import nbclient
    import nbformat
    from kernellab.course import settings
    env = settings.child_env(target="solutions")       # the kernel is a child process
    env.setdefault("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    clock = CellClock()
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     kernel_manager_class=kernel_manager_class(),
                                     on_cell_execute=clock.start, on_cell_executed=clock.stop,
                                     resources={"metadata": {"path": str(Path(path).parent)}})
    started = time.perf_counter()
    try:
        client.execute(env=env)
    except Exception as exc:  # report the failing notebook and carry on with the rest
        return (path, time.perf_counter() - started, f"{type(exc).__name__}: {str(exc)[-1500:]}",
                clock.slowest(notebook))
    seconds = time.perf_counter() - started
    if output_dir is not None:
        Path(output_dir).mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, Path(output_dir) / Path(path).name)
    over = reading.read(notebook, Path(path).name).over_budget() if reading.enforced(path) else []
    error = (f"over the reading budget: {'; '.join(over)} (python -m kernellab.course.reading on an "
             f"executed copy, --output-dir, lists them)") if over else None
    return path, seconds, error, clock.slowest(notebook)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check-clean", action="store_true", help="fail if any holds outputs")
    parser.add_argument("--execute", action="store_true", help="run each one headless")
    parser.add_argument("--write-setup", action="store_true",
                        help="give each the Colab badge and the setup cell (from SETUP_CELL)")
    parser.add_argument("--output-dir", type=Path, help="with --execute: write the executed copies here")
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
            runs = pool.map(execute, paths, [args.output_dir] * len(paths))
            for path, seconds, error, slowest in runs:
                print(f"{'FAILED' if error else 'ok':<7}{seconds:6.1f} s  {path.name}"
                      + (f"  ({slowest})" if seconds > SLOW_NOTEBOOK_S else ""))
                if error:
                    failed = True
                    print(f"        {error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
