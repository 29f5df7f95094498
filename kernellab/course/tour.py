"""`kernellab tour`: run every present lab's solution on this device, validate it, draw its figures.

Labs plug in by shipping `experiments/labNN_topic.py` with its declaration `LAB`
(kernellab.course.protocol runs it); nothing here lists them by hand. The target (solutions, or
the starter in labs/) is the caller's: `kernellab tour --target` resolves it as `kernellab bench`
does. On the starter, a lab that a stub stops is "todo", with one line per stub still in its
file; a finished starter skips the solution-side kernels it lacks, saying so.
"""

from __future__ import annotations

import re
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


def stopped_by_a_stub(number: str, exc: BaseException) -> TourResult | None:
    """A lab stopped by a stub of its own file (its NotImplementedError, or a check that names
    it): every stub still in that file, one line each, in place of a traceback; None for any
    other failure. A student's unfinished starter is work to do, not an error."""
    chain, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        chain.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    text = "\n".join(chain)
    if not re.search(r"Lab \d\d\.\d+: ", text):
        return None
    left = target.stubs(target.load(number))
    if not any(stub.exercise in text for stub in left):
        return None
    exercises = sorted({stub.exercise.split(":")[0].removeprefix("Lab ") for stub in left})
    files = sorted({target.shown(stub.file) for stub in left})
    return TourResult(False, f"unfinished: {len(left)} stubs to write (Lab {', '.join(exercises)}) "
                             f"in {', '.join(files)}", unfinished=tuple(left))


def lab_line(exc: BaseException) -> str:
    """Where in a lab file the error was raised (the innermost frame there), as ' (file, line
    N)'; '' where no lab file is in the traceback. One line in place of a traceback."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if target.LAB_FILE.match(Path(f.filename).name)]
    return f" ({Path(frames[-1].filename).name}, line {frames[-1].lineno})" if frames else ""


def status(result: TourResult) -> str:
    return "ok" if result.ok else "todo" if result.unfinished else "FAILED"


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
            result = stopped_by_a_stub(number, exc)
            if result is None:
                first_line = (str(exc).strip().splitlines() or [""])[0]
                result = TourResult(False, f"error: {type(exc).__name__}: {first_line}"
                                           f"{lab_line(exc)}")
        seconds = time.perf_counter() - started
        rows.append((number, result, seconds))
        out(f"  lab {number}: {status(result)} in {seconds:.1f} s")
        for note in result.notes:
            out(f"    {note}")
        for stub in result.unfinished:
            out(f"    {stub.exercise}: still a stub ({target.shown(stub.file)}, line {stub.line})")
    out("")
    out(f"{'lab':<5} {'result':<7} {'time':>7}  key figure")
    for number, result, seconds in rows:
        out(f"{number:<5} {status(result):<7} {seconds:>6.1f}s  {result.key_figure}")
    out(f"figures in {Path(figures_dir).resolve()}")
    return all(result.ok for _, result, _ in rows)
