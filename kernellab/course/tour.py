"""`kernellab tour`: run every present lab's solution on this device, validate it, draw its figures.

Labs plug in by shipping `experiments/labNN_topic.py` with a `tour(figures_dir)` function that
returns a `TourResult`; nothing here lists them by hand. The target (solutions, or the starter
in labs/) is the caller's: `kernellab tour --target` resolves it as `kernellab bench` does.
"""

from __future__ import annotations

import shutil
import time
import traceback
from pathlib import Path

from kernellab.gpu import device
from kernellab.course import target
from kernellab.course.protocol import TourResult


def lab_tour(number: str, figures_dir: Path) -> TourResult:
    """The generic tour of the lab's declaration."""
    from kernellab.course import protocol
    return protocol.tour(protocol.declaration(number), figures_dir)


def recorded_tour(number: str, figures_dir: Path) -> TourResult:
    """A student release ships no solutions to run: show the figures drawn from the H200
    recordings (`kernellab tour` in the simulator draws them from data/reference/)."""
    from kernellab.course import reference
    recorded = sorted((reference.DATA / reference.DEFAULT_GPU / "figures").glob(f"lab{number}_*.png"))
    figures_dir.mkdir(parents=True, exist_ok=True)
    copies = [shutil.copy2(figure, figures_dir / figure.name) for figure in recorded]
    recorded_on = f"drawn from the data recorded on an {reference.DEFAULT_GPU.upper()} (data/reference/)"
    return TourResult(True, f"no solutions in this release: {len(copies)} figures {recorded_on}"
                      if copies else f"no solutions in this release and no figures {recorded_on} yet",
                      tuple(map(str, copies)))


def run(labs: list[str] | None = None, figures_dir: Path = Path("figures"),
        target_name: str = "solutions", out=print) -> bool:
    """Tour the given labs (default: all) of `target_name`, which the caller has chosen
    (settings.using) for the lab code that loads itself; print one summary table; True if all
    validated. Without solutions/ (a student release) the solutions' tour is the recorded one."""
    numbers = [target.lab_number(lab) for lab in labs] if labs else list(target.labs())
    recorded = target_name == "solutions" and not target.has_solutions()
    what = "recorded figures (no solutions/ here)" if recorded else f"target {target_name}"
    out(f"kernellab tour on {device.facts().label}: {what}")
    rows = []
    for number in numbers:
        started = time.perf_counter()
        try:
            result = (recorded_tour(number, Path(figures_dir)) if recorded
                      else lab_tour(number, Path(figures_dir)))
        except Exception as exc:  # one broken lab must not hide the others' results
            traceback.print_exc()
            result = TourResult(False, f"error: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - started
        rows.append((number, result, seconds))
        out(f"  lab {number}: {'ok' if result.ok else 'FAILED'} in {seconds:.1f} s")
    out("")
    out(f"{'lab':<5} {'result':<7} {'time':>7}  key figure")
    for number, result, seconds in rows:
        out(f"{number:<5} {'ok' if result.ok else 'FAILED':<7} {seconds:>6.1f}s  {result.key_figure}")
    out(f"figures in {Path(figures_dir).resolve()}")
    return all(result.ok for _, result, _ in rows)
