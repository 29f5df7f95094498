"""Record and replay: the verdict is decided where student code cannot reach.

A graded test runs twice.

- **Recorded**, in the child that imports the student's lab (`--kl-tape DIR`): the `lab` fixture is
  a `Live` proxy. Every operation the test makes on the lab (an attribute, a call, a kernel's
  `[grid, block]`, an iteration, a `with`) goes through to the student's code and is written to the
  test's tape as data: the arguments' digests, the result, any exception with the student's line,
  and every array the test can see that changed (the arrays it allocated, the ones it passed in,
  the ones the lab returned). The instruments that watch student code run (`meter`,
  `record_launches`, `Timeline`, `capture`, `kernel_resources`: import them from here) are
  recorded the same way. The child's own pass or fail is never read.
- **Replayed**, in the judge (`--kl-replay DIR`): a pytest of the instructor's own tests that never
  imports the student's file. The `lab` fixture is a `Ghost` that answers each operation from the
  tape, writes the recorded arrays back, and raises the recorded exceptions; the references are the
  course's own. The test's assertions run here, on data, and their outcome is the score.

A student patch in the child (pytest, the plugin, numpy, a check) can change only what the child
records; the judge runs the pristine checks on it, so an operation that does not match the tape
(`Diverged`), a tape that ends early (`Incomplete`) or one that does not parse fails the test.
The tape is JSON lines; arrays travel as raw bytes of a numeric dtype, never pickled.
Outside the grader (plain pytest, the notebooks) nothing is recorded: the proxies are not used
and the instruments are the plain ones.
"""

from __future__ import annotations

import contextlib
import functools
import json
from pathlib import Path

from kernellab.course import target
from kernellab.gpu import checks, graphs, launches, timeline, traffic
from kernellab.grading.tape.record import Live, Recording
from kernellab.grading.tape.replay import Replay
from kernellab.grading.tape.values import Diverged, Incomplete, _Side, tape_path
from kernellab.kernels import resources

__all__ = ["recording", "replaying", "boundary", "Diverged", "Incomplete", "meter",
           "record_launches", "Timeline", "capture", "kernel_resources", "replays_counted",
           "pinned_allocations"]

# ---- which side is on, per test --------------------------------------------------------------

_active: _Side | None = None       # the tape of the test running now, if any


@contextlib.contextmanager
def recording(lab_module, folder: Path, nodeid: str):
    """The `lab` fixture of a recorded test: a Live proxy over the student's module."""
    global _active
    tape = Recording(tape_path(folder, nodeid))
    root = tape.handle(lab_module)
    _active = tape
    try:
        with tape.allocations():
            yield root
    finally:
        _active = None
        tape.close()


@functools.lru_cache(maxsize=None)
def _pristine(lab: str):
    return target.pristine_starter(lab)


@contextlib.contextmanager
def replaying(lab: str, folder: Path, nodeid: str):
    """The `lab` fixture of the judge: a Ghost answered by the test's tape, with the course's
    own references."""
    global _active
    reasons = Path(folder) / "reasons.json"
    why = ("the recorded run made no more calls here: its process was killed or died, or did "
           "not run the test as written")
    if reasons.exists():
        why = json.loads(reasons.read_text()).get(nodeid, why)
    path = tape_path(folder, nodeid)
    tape = Replay(path if path.exists() else None, why, _pristine(lab))
    _active = tape
    try:
        with tape.allocations():
            yield tape.ghost_root()
    finally:
        _active = None


def boundary(instrument):
    """An instrument that watches student code run, as a graded test must use it: plain outside the
    grader; in a recorded test it runs and is taped; in the judge the tape answers for it."""
    def observed(*args, **kwargs):
        tape = _active
        if tape is None:
            return instrument(*args, **kwargs)
        if isinstance(tape, Recording):
            proxy = Live(tape, instrument, -1)
            return proxy(*args, **kwargs)
        return tape.operation(-1, "__call__", args, kwargs)
    observed.__name__ = getattr(instrument, "__name__", "instrument")
    observed.__doc__ = instrument.__doc__
    observed.__wrapped__ = instrument
    return observed


# The instruments, as graded tests import them.
meter = boundary(traffic.meter)
record_launches = boundary(launches.record_launches)
Timeline = boundary(timeline.Timeline)
capture = boundary(graphs.capture)
kernel_resources = boundary(resources.kernel_resources)
replays_counted = boundary(graphs.replays_counted)
pinned_allocations = boundary(checks.pinned_allocations)
