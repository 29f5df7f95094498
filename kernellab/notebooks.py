"""Notebook hygiene for CI: committed without outputs, and each one runs headless.

    python -m kernellab.notebooks --check-clean --execute [NOTEBOOK ...]

Notebooks execute with the solutions target, in their own folder, two at a time; a failure
names the notebook and the cell.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import sys
import time
from pathlib import Path

from . import target

NOTEBOOKS = target.ROOT / "notebooks"
CELL_TIMEOUT = 300


def with_outputs(path: Path) -> list[int]:
    """Indices of code cells that carry outputs or execution counts."""
    cells = json.loads(Path(path).read_text())["cells"]
    return [i for i, cell in enumerate(cells) if cell["cell_type"] == "code"
            and (cell.get("outputs") or cell.get("execution_count") is not None)]


def execute(path: Path) -> tuple[Path, float, str | None]:
    """Run a notebook headless with the solutions target; returns (path, seconds, error or None)."""
    import nbclient
    import nbformat
    os.environ["KERNELLAB_TARGET"] = "solutions"
    os.environ.setdefault("MPLBACKEND", "Agg")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=CELL_TIMEOUT, kernel_name="python3",
                                     resources={"metadata": {"path": str(Path(path).parent)}})
    started = time.perf_counter()
    try:
        client.execute()
    except Exception as exc:  # report the failing notebook and carry on with the rest
        return path, time.perf_counter() - started, f"{type(exc).__name__}: {str(exc)[-1500:]}"
    return path, time.perf_counter() - started, None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument("--check-clean", action="store_true", help="fail if any holds outputs")
    parser.add_argument("--execute", action="store_true", help="run each one headless")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("*.ipynb"))
    failed = False
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
            for path, seconds, error in pool.map(execute, paths):
                print(f"{'FAILED' if error else 'ok':<7}{seconds:6.1f} s  {path.name}")
                if error:
                    failed = True
                    print(f"        {error}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
