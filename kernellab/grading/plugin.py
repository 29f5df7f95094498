"""The grader's pytest plugin: points, seeds, the per-lab score table and results.json.

Registered through the `pytest11` entry point, so plain `pytest` uses it:
- `@pytest.mark.points(n)` marks a graded test (`visibility="hidden"` hides it from students);
- `@pytest.mark.simulator` marks a test that needs Numba's simulator (the traffic meter, its
  bounds checks, stress mode's shared-memory poison and thread switching): on a
  GPU, plain pytest skips it and its score table says so; `kernellab grade` runs it in a
  simulator child, so the score is the same on every machine;
- `@pytest.mark.gpu` marks a test that needs a real GPU: it never carries points;
- `--target labs|solutions` picks the implementation (else KERNELLAB_TARGET, else labs: see
  kernellab.course.settings);
- `--seed N` (else KERNELLAB_SEED) replays the random inputs of an earlier run (the seed is
  printed in the header);
- `--results PATH` is where the Gradescope-format report goes (always written);
- `-n auto` (pytest-xdist) spreads the tests over one worker per core in the simulator, all on the
  run's one seed, and none on a GPU, where a timing test must have the device to itself;
- the `lab` fixture imports the lab a test file is named after (tests/labs/test_lab02_*.py -> lab 02);
- the `rng` fixture gives each test its own reproducible numpy Generator.
`kernellab grade` runs this plugin in child processes (see kernellab.grading.runner) and watches the
progress events it writes, so a test that hangs or kills its interpreter costs only itself.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import re
import secrets
import time
import zlib
from pathlib import Path

import pytest

from kernellab.gpu import checks, device, stress
from kernellab.course import target
from kernellab.course import settings
from kernellab.gpu.launches import record_launches

OUTPUT_CAP = 4000  # characters of failure text and captured output kept per test
VISIBILITIES = ("visible", "hidden", "after_due_date", "after_published")


def new_seed() -> int:
    """The one source of fresh seeds: every lab and target of a run grades on the same inputs."""
    return secrets.randbelow(2**31)


def pytest_addoption(parser):
    group = parser.getgroup("kernellab", "kernellab grading")
    group.addoption("--target", choices=settings.TARGETS, default=None,
                    help="implementation under test: labs (the starter, default) or solutions")
    group.addoption("--seed", type=int, default=None,
                    help="seed for the random test inputs (default: fresh each run; printed)")
    group.addoption("--results", default="results.json",
                    help="where to write the Gradescope-format results.json")
    group.addoption("--no-stress", dest="stress", action="store_false",
                    help="simulator: run blocks in order, as plain Numba does (by default the "
                         "grader shuffles blocks and threads, poisons shared memory and switches "
                         "threads often, to expose missing syncthreads and inter-block dependencies)")
    group.addoption("--output-cap", type=int, default=OUTPUT_CAP,
                    help="characters of output kept per test in the report")
    # Used by kernellab.grading.runner's child processes: progress events and the graded-test manifest.
    group.addoption("--kl-progress", default=None, help=argparse.SUPPRESS)
    group.addoption("--kl-manifest", default=None, help=argparse.SUPPRESS)
    group.addoption("--kl-hung", default="{}", help=argparse.SUPPRESS)  # JSON {kernel: why}
    group.addoption("--kl-tape", default=None, help=argparse.SUPPRESS)    # record into this folder
    group.addoption("--kl-replay", default=None, help=argparse.SUPPRESS)  # judge from this folder


def run_seed(config) -> int:
    return config.stash[_SEED]


_SEED = pytest.StashKey[int]()
_STATE = pytest.StashKey["GradeState"]()
_SETTINGS = pytest.StashKey[contextlib.ExitStack]()


def pytest_configure(config):
    config.addinivalue_line("markers", "points(n, visibility='visible'): graded test worth n points")
    config.addinivalue_line("markers", "gpu: needs a real GPU; skipped in the simulator; "
                                       "never carries points")
    config.addinivalue_line("markers", "simulator: needs Numba's simulator (traffic meter, bounds "
                                       "checks, stress mode); "
                                       "on a GPU, kernellab grade runs it in a simulator child")
    settings.target(config.getoption("target"))   # a bad KERNELLAB_TARGET fails here, naming it
    config.stash[_SETTINGS] = contextlib.ExitStack()   # --target holds for the whole run
    config.stash[_SETTINGS].enter_context(settings.using(target=config.getoption("target")))
    seed = settings.seed(config.getoption("seed"))
    if hasattr(config, "workerinput"):   # a pytest-xdist worker: the controller's seed
        seed = config.workerinput["kernellab_seed"]
    config.stash[_SEED] = new_seed() if seed is None else seed
    config.stash[_STATE] = GradeState(config)
    config.pluginmanager.register(config.stash[_STATE], "kernellab-grade-state")
    device.setup()
    if config.getoption("stress") and device.is_simulator():
        stress.enable(config.stash[_SEED])


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: a worker per usable core (at most 8) in the simulator, where each test is CPU-bound
    and on its own; none on a GPU, where the timing tests must not share the device. It runs before
    xdist's own answer (the first answer is taken), which counts physical cores, not the usable
    ones, and ran 16 workers on the H200's host; PYTEST_XDIST_AUTO_NUM_WORKERS
    is left to xdist."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    try:
        on_gpu = device.mode() == "gpu"
    except (device.DeviceModeError, ValueError):
        return 0          # pytest_configure names the problem
    return 0 if on_gpu else min(settings.usable_cores(), 8)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Every pytest-xdist worker grades on the controller's seed: one run, one seed to replay."""
    node.workerinput["kernellab_seed"] = run_seed(node.config)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A worker's graded tests (collected there, not here) join the controller's results.json."""
    state = node.config.stash[_STATE]
    state.graded.update(node.workeroutput.get("kernellab_graded", {}))
    state.deselected.update(node.workeroutput.get("kernellab_deselected", ()))
    for nodeid in node.workeroutput.get("kernellab_elsewhere", ()):
        entry = state.outcomes.get(nodeid)
        if entry is not None and entry["outcome"] == "skipped":
            entry["outcome"] = "elsewhere"


def pytest_unconfigure(config):
    if _SETTINGS in config.stash:
        config.stash[_SETTINGS].close()


def pytest_report_header(config):
    seed = run_seed(config)
    mode = "  stress: on" if config.getoption("stress") and device.is_simulator() else ""
    return [f"kernellab: target={target.current()}  device={device.mode()} "
            f"({device.facts().label})  seed={seed}  (replay with --seed {seed}){mode}"]


def lab_of(path) -> str | None:
    """The lab a graded test file or node id belongs to (tests/labs/test_lab02_*.py: '02'), or None."""
    try:
        return target.lab_number(path)
    except ValueError:
        return None


def _lab_number(request) -> str:
    try:
        return target.lab_number(request.module.__file__)
    except ValueError as exc:
        raise RuntimeError(f"the `lab` fixture works in tests/labs/test_labNN_*.py files only "
                           f"({exc})") from None


@pytest.fixture(scope="module")
def lab_module(request):
    """The lab module under test, from the target chosen by --target / KERNELLAB_TARGET; a
    function of it that uses kernellab's reference implementation of the lab fails when called.
    The judge (`--kl-replay`) never imports it: None there."""
    if request.config.getoption("kl_replay"):
        return None
    number = _lab_number(request)
    return target.forbid_references(target.given_references(target.load(number), number), number)


@pytest.fixture
def lab(request, lab_module):
    """What a graded test calls: the lab module itself; in the grader's child a proxy that tapes
    every operation on it (`--kl-tape`), and in the judge one that replays them (`--kl-replay`):
    kernellab.grading.tape."""
    from kernellab.grading import tape
    config = request.config
    if config.getoption("kl_replay"):
        with tape.replaying(_lab_number(request), Path(config.getoption("kl_replay")),
                            request.node.nodeid) as ghost:
            yield ghost
    elif config.getoption("kl_tape"):
        with tape.recording(lab_module, Path(config.getoption("kl_tape")), request.node.nodeid) as live:
            yield live
    else:
        yield lab_module


@pytest.fixture
def rng(request):
    """A fresh, reproducible Generator per test: same --seed, same inputs."""
    seed = run_seed(request.config)
    stream = zlib.crc32(request.node.nodeid.encode())
    print(f"random inputs: seed {seed} (test stream {stream}); replay with --seed {seed}")
    import numpy as np
    return np.random.default_rng([seed, stream])


ELSEWHERE = ("needs the simulator (its traffic meter, bounds checks or stress mode); kernellab "
             "grade runs it in a simulator child")


def seed_drawn_inputs(item, seed: int) -> None:
    """A test whose inputs Hypothesis draws (kernellab.grading.drawn) draws them from the grade's
    seed: the same cases in the grader's child and in its judge, and on every machine."""
    test = getattr(item, "obj", None)
    if getattr(test, "is_hypothesis_test", False):
        import hypothesis
        from kernellab.grading import drawn
        hypothesis.seed(drawn.seed_for(seed, item.nodeid))(test)


def pytest_collection_modifyitems(session, config, items):
    state = config.stash[_STATE]
    for item in items:
        seed_drawn_inputs(item, run_seed(config))
        needs_gpu, needs_simulator = (item.get_closest_marker(m) for m in ("gpu", "simulator"))
        if needs_gpu and device.is_simulator():
            item.add_marker(pytest.mark.skip(reason="needs a real GPU: the simulator has no clock"))
        if needs_simulator and not device.is_simulator():
            item.add_marker(pytest.mark.skip(reason=ELSEWHERE))
            state.elsewhere.add(item.nodeid)
        marker = item.get_closest_marker("points")
        if marker is None:
            continue
        if needs_gpu:
            raise pytest.UsageError(f"{item.nodeid}: a test marked gpu may not carry points (a "
                                    "grade must not depend on the machine it runs on)")
        points = marker.args[0] if marker.args else marker.kwargs.get("n")
        visibility = marker.kwargs.get("visibility", "visible")
        if not isinstance(points, (int, float)) or points <= 0:
            raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.points needs a positive number")
        if visibility not in VISIBILITIES:
            raise pytest.UsageError(f"{item.nodeid}: visibility must be one of {VISIBILITIES}")
        state.graded[item.nodeid] = {
            "lab": lab_of(item.fspath) or "kernellab",
            "points": points,
            "visibility": visibility,
            "name": test_title(item),
            "simulator": bool(needs_simulator),
        }
    manifest = config.getoption("kl_manifest")
    if manifest:
        Path(manifest).write_text(json.dumps(state.graded))


def stub_behind(kernel) -> str | None:
    """Why a GPU run of `kernel` failed, where the kernel or a function it calls is still a stub:
    the stub's `Lab NN.M: ...` and what a GPU made of it. The simulator raises a stub's own
    NotImplementedError; a GPU cannot: a kernel's raise is dropped (its output stays poison),
    and a device function that only raises has no result, so the kernel calling it fails to
    compile with a TypingError about `none` that names neither the stub nor the next step."""
    fn = getattr(kernel, "py_func", None)
    if fn is None:
        return None
    callees = [(None, fn)] + [(name, fn.__globals__.get(name)) for name in fn.__code__.co_names]
    for name, callee in callees:
        source_fn = getattr(callee, "py_func", callee)
        if not inspect.isfunction(source_fn):
            continue
        try:
            lines, first = inspect.getsourcelines(source_fn)
            where = Path(inspect.getsourcefile(source_fn)).name
        except (OSError, TypeError):
            continue
        text = "".join(lines)
        found = target.STUB.search(text)
        if found:
            line = first + text.count("\n", 0, found.start())
            how = ("is still a stub: on a GPU a kernel's raise is dropped, so it wrote nothing"
                   if name is None else f"calls {name}, still a stub: a GPU cannot compile a kernel "
                                        f"that calls a function with no result")
            return f"{found.group(1)} ({fn.__name__} {how}; {where}:{line})"
    return None


def name_the_stub(outcome, launches):
    """On a GPU, a test that failed while a launched kernel is, or calls, a stub fails with the
    stub's NotImplementedError, as in the simulator, instead of what the GPU made of it."""
    if outcome.excinfo is None or isinstance(outcome.excinfo[1], NotImplementedError):
        return
    kernels = {id(launch.kernel): launch.kernel for launch in launches}   # each kernel once
    why = next(filter(None, map(stub_behind, kernels.values())), None)
    if why is not None:
        outcome.force_exception(NotImplementedError(why))


def test_title(item) -> str:
    lab_number = lab_of(item.fspath)
    doc = (getattr(item.obj, "__doc__", None) or "").strip().splitlines()
    summary = f": {doc[0]}" if doc else ""
    prefix = f"Lab {lab_number} " if lab_number else ""
    return f"{prefix}{item.name}{summary}"


class GradeState:
    """Per-test outcomes as pytest reports them; turned into results.json at the end."""

    def __init__(self, config):
        self.config = config
        self.graded: dict[str, dict] = {}
        self.outcomes: dict[str, dict] = {}
        self.kernels: dict[str, list] = {}   # nodeid -> compile requests (grader runs only)
        self.elsewhere: set[str] = set()     # simulator tests skipped on this GPU (not lost)
        self.deselected: set[str] = set()    # left out by -m or -k: not in this run's score table
        self.hung: dict[str, str] = json.loads(config.getoption("kl_hung"))
        progress = config.getoption("kl_progress")
        self.progress = open(progress, "a", buffering=1) if progress else None

    def event(self, **fields):
        if self.progress:
            self.progress.write(json.dumps(fields) + "\n")

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        self.event(event="start", nodeid=item.nodeid, time=time.time())

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        """In the grader's runs, tell the grader which kernel is about to run (so a hang can be
        named), fail a test at its first launch of a kernel that hung earlier, and, in both
        modes, note the lab kernels launched with their argument types, so the grader can check
        that the specialisation each launch compiled also compiles for a real GPU (in float32
        where the lab declares float32); on a GPU, name the stub behind a failure
        (`name_the_stub`)."""
        if not self.progress or self.config.getoption("kl_replay"):
            yield
            return
        simulated = device.is_simulator()
        announced = None   # a GPU child announces a kernel once per run of launches of it

        def starts(launch):
            nonlocal announced
            if launch.name in self.hung:
                pytest.fail(self.hung[launch.name], pytrace=False)
            if simulated or launch.name != announced:
                announced = launch.name
                self.event(event="launch", nodeid=item.nodeid, kernel=launch.name,
                           returns=simulated)   # a "returned" event follows in the simulator

        def ends(launch):
            self.event(event="returned", nodeid=item.nodeid, kernel=launch.name)

        with record_launches(with_types=True, on_launch=starts, on_return=ends) as launches, \
                checks.poisoned_allocations():     # on a GPU, as stress mode in the simulator
            outcome = yield
        if not simulated:
            name_the_stub(outcome, launches)
        from kernellab.grading import compile_check   # both modes: the launched specialisations
        self.kernels[item.nodeid] = compile_check.launched_requests(launches, f"{target.current()}.")

    def pytest_runtest_logreport(self, report):
        entry = self.outcomes.setdefault(report.nodeid, {"outcome": "passed", "output": []})
        if report.failed:
            entry["outcome"] = "failed"
            entry["output"].append(f"[{report.when}] {short_failure(report)}")
        elif report.skipped and entry["outcome"] == "passed":
            entry["outcome"] = "elsewhere" if report.nodeid in self.elsewhere else "skipped"
            entry["output"].append(f"skipped: {skip_reason(report)}")
        if report.when == "teardown":
            captured = "".join(text for _, text in report.sections if text)
            if captured:
                entry["output"].append(captured)
            cap = self.config.getoption("output_cap")
            entry["output"] = cap_text("\n".join(entry["output"]), cap)
            self.event(event="done", nodeid=report.nodeid, outcome=entry["outcome"],
                       output=entry["output"], printed=cap_text(captured, cap),
                       kernels=self.kernels.pop(report.nodeid, []))


def cap_text(text: str, cap: int) -> str:
    if len(text) <= cap:
        return text
    return text[: cap // 2] + f"\n... [{len(text) - cap} characters cut] ...\n" + text[-cap // 2:]


def short_failure(report) -> str:
    """The assertion or exception message, not a page of Numba internals, and where it failed
    (`where_it_failed`)."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None:
        where = getattr(report, "kernellab_where", None)
        return crash.message.strip() + (f" ({where})" if where else "")
    return str(report.longrepr).strip().splitlines()[-1] if report.longrepr else "failed"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.excinfo is not None:
        outcome.get_result().kernellab_where = where_it_failed(call.excinfo.tb)


def where_it_failed(tb) -> str | None:
    """The student's line: the innermost frame of the traceback in a lab file (a simulated
    kernel's IndexError carries the kernel's own frame); where none is in it (a result checked
    after the student's code returned), the graded test's line that checked it. Never a line of
    kernellab's or a library's."""
    import traceback
    frames = traceback.extract_tb(tb)
    def named(frame) -> str:
        return f"{Path(frame.filename).name}:{frame.lineno}"
    lab = [f for f in frames if target.LAB_FILE.match(Path(f.filename).name)
           and "kernellab" not in Path(f.filename).parts]
    if lab:
        return named(lab[-1])
    test = [f for f in frames if re.match(r"test_lab\d\d_\w+\.py$", Path(f.filename).name)]
    return f"checked at {named(test[-1])}" if test else None


def skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def outcome_points(info: dict, outcome: dict | None) -> float:
    return info["points"] if outcome and outcome["outcome"] == "passed" else 0


NOT_RUN_HERE = "not run here"   # how a simulator test skipped on a GPU opens its output


def results_document(graded: dict, outcomes: dict, header: str) -> dict:
    """Gradescope's results.json: every graded test appears, run or not."""
    tests = []
    for nodeid, info in graded.items():
        outcome = outcomes.get(nodeid)
        status = outcome["outcome"] if outcome else "not run"
        text = outcome["output"] if outcome else "not run: the grader never reached this test"
        if status == "elsewhere":
            status = f"{NOT_RUN_HERE} (not lost)"
        tests.append({
            "name": info["name"],
            "number": nodeid,
            "score": outcome_points(info, outcome),
            "max_score": info["points"],
            "status": "passed" if status == "passed" else "failed",
            "output": f"{status}\n{text}".strip() if status != "passed" else text,
            "visibility": info["visibility"],
        })
    score = sum(t["score"] for t in tests)
    max_score = sum(t["max_score"] for t in tests)
    return {"score": score, "max_score": max_score, "output": header,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests}


def not_run_here(test: dict) -> bool:
    """A simulator test that plain pytest skipped on a GPU: not run, so not lost either."""
    return test["output"].startswith(NOT_RUN_HERE)


def score_table(document: dict) -> str:
    """One row per lab: points, tests passed, and the points of simulator tests not run here."""
    rows: dict[str, list[float]] = {}
    for test in document["tests"]:
        row = rows.setdefault(test_lab(test), [0, 0, 0, 0, 0])
        row[0] += test["score"]
        row[1] += test["max_score"]
        row[2] += test["score"] == test["max_score"]
        row[3] += 1
        row[4] += test["max_score"] if not_run_here(test) else 0
    lines = [f"{'lab':<6} {'points':>13} {'tests passed':>13}"]
    for lab_number, (got, out_of, passed, count, elsewhere) in sorted(rows.items()):
        note = f"  ({fmt(elsewhere)} not run here)" if elsewhere else ""
        lines.append(f"{lab_number:<6} {fmt(got):>6} / {fmt(out_of):<4} {passed:>6} / {count:<4}"
                     f"{note}")
    lines.append(f"{'total':<6} {fmt(document['score']):>6} / {fmt(document['max_score']):<4}")
    elsewhere = sum(row[4] for row in rows.values())
    if elsewhere:
        lines.append(f"{fmt(elsewhere)} points are in tests that need the simulator, so this GPU "
                     "did not run them (not lost): `kernellab grade` runs them in a simulator "
                     "child")
    return "\n".join(lines)


def test_lab(test: dict) -> str:
    return lab_of(test["number"]) or "other"


def first_reason(output: str) -> str:
    """The whole first line of why a test lost its points, without the status word and the
    phase tag (a line that ends in ':' takes the next one with it)."""
    lines = [line.strip() for line in output.splitlines()[1:] if line.strip()]
    if not lines:
        return output.strip() or "failed"
    first = re.sub(r"^\[(setup|call|teardown)\] (Failed: )?", "", lines[0])
    first = re.sub(r"^(?:\w+\.)+(\w+: )", r"\1", first)   # kernellab.course.target.XError -> XError
    if first.endswith(":") and len(lines) > 1:
        first = f"{first} {lines[1]}"
    return first


def lost_points(document: dict) -> list[str]:
    """One line per test that lost points: which, how many, and the first line of its reason
    (the reason of a hidden test stays hidden)."""
    lines = []
    for test in document["tests"]:
        if test["score"] >= test["max_score"] or not_run_here(test):
            continue
        name = f"Lab {test_lab(test)} {test['number'].split('::')[-1]}"
        why = "(hidden test)" if test["visibility"] != "visible" else first_reason(test["output"])
        lines.append(f"  - {name} (-{fmt(test['max_score'] - test['score'])}): {why}")
    return lines


def fmt(x: float) -> str:
    return f"{x:g}"


def run_header(seed: int) -> str:
    return (f"target={target.current()} device={device.mode()} ({device.facts().label}) "
            f"seed={seed}")


def pytest_deselected(items):
    for item in items:
        item.config.stash[_STATE].deselected.add(item.nodeid)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    state = config.stash[_STATE]
    selected = {nodeid: info for nodeid, info in state.graded.items() if nodeid not in state.deselected}
    if not selected:
        return
    document = results_document(selected, state.outcomes, run_header(run_seed(config)))
    terminalreporter.section("kernellab score")
    terminalreporter.write_line(score_table(document))
    terminalreporter.write_line(f"seed {run_seed(config)}: replay with --seed "
                                f"{run_seed(config)}")


def pytest_sessionfinish(session, exitstatus):
    state = session.config.stash[_STATE]
    if state.progress:
        state.event(event="finished")
        state.progress.close()
    if session.config.getoption("kl_progress"):
        return  # the isolating grader assembles the report itself
    if hasattr(session.config, "workeroutput"):   # a pytest-xdist worker: the controller writes it
        session.config.workeroutput["kernellab_graded"] = state.graded
        session.config.workeroutput["kernellab_deselected"] = sorted(state.deselected)
        session.config.workeroutput["kernellab_elsewhere"] = sorted(state.elsewhere)
        return
    document = results_document(state.graded, state.outcomes,
                                run_header(run_seed(session.config)))
    Path(session.config.getoption("results")).write_text(json.dumps(document, indent=2))
