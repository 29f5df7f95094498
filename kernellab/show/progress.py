"""Progress bars for long runs (benches, sweeps, batch grading): one helper around `tqdm.auto`.

`tqdm.auto` draws a widget bar in a notebook and a text bar in a terminal. A bar is shown only
where someone watches it: in a notebook, or when stderr is a terminal; never in CI logs or the
grader's child processes. `KERNELLAB_PROGRESS=auto|on|off` (default `auto`) overrides that, and
each caller has its own flag (`bench.run(progress=False)`, for instance).
"""

from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm

SETTINGS = ("auto", "on", "off")


def setting() -> str:
    value = os.environ.get("KERNELLAB_PROGRESS", "auto").strip().lower() or "auto"
    if value not in SETTINGS:
        raise ValueError(f"KERNELLAB_PROGRESS must be one of {'|'.join(SETTINGS)}, not {value!r}")
    return value


def watched() -> bool:
    """True in a notebook (a Jupyter kernel is running) or when stderr is a terminal."""
    return "ipykernel" in sys.modules or sys.stderr.isatty()


def shown(enabled: bool = True) -> bool:
    """Whether a bar the caller `enabled` is drawn: KERNELLAB_PROGRESS first, then `watched()`."""
    chosen = setting()
    return enabled and chosen != "off" and (chosen == "on" or watched())


def progress_bar(iterable=None, *, total: int | None = None, desc: str | None = None,
                 unit: str = "it", enabled: bool = True) -> tqdm:
    """A tqdm bar on stderr (a widget in a notebook); it draws nothing unless `shown(enabled)`."""
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not shown(enabled),
                file=sys.stderr, dynamic_ncols=True)


def printing():
    """A context in which printed lines go above the bars on screen instead of through them."""
    return tqdm.external_write_mode()
