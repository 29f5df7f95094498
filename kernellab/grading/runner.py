"""`kernellab grade` and `kernellab check`: scores that student code can neither break nor forge.

Before any student code runs, the parent reads each lab file (`policy`): a file that imports
anything beyond a lab's API, or reaches around imports, scores 0 for that lab with one line
naming what it did. Each lab's tests then run in a child of its own, a fresh one per lab, that
imports the student's file and records what it did on a tape (`tape`): the values the lab
returned, the arrays it wrote, the exceptions it raised and what the meter and the launch
recorder saw. The child reports every test's start and end, and every kernel launch, as it goes
(kernellab.grading.plugin's progress events). A test that hangs is killed at its timeout and the
kernel that was running is named; the child is restarted on the tests that remain, told to fail
any test at its first launch of that kernel instead of waiting out another timeout. A child that
dies (os._exit, a crash of the interpreter) costs only the test it was running.

Whether a test passed is decided by the judge: a pytest of the course's own tests, in the
course's own folder, that never imports the student's file. It replays each tape, runs the
checks on its data against references it computes itself, and its outcome is the score; what a
child says of its own tests is never read as one. On a GPU machine the tests marked `simulator`
run in a child of their own in the simulator, so a score never depends on the machine. The
report is always complete, and no score is ever read from an exit code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernellab.gpu import device
from kernellab.grading import plugin, integrity, policy, sandbox
from kernellab.kernels import ptxas
from kernellab.course import target
from kernellab.course import settings

DEFAULT_TIMEOUT = 60.0       # seconds one graded test may run in the simulator
IMPORT_TIMEOUT = 60.0        # seconds the probe may take to import a lab
POLL = 0.05


@dataclasses.dataclass
class LabRun:
    """Graded tests (of one lab, or a share of several) and what happened to each."""

    lab: str
    graded: dict                   # nodeid -> {lab, points, visibility, name}
    outcomes: dict                 # nodeid -> {outcome, output}
    kernels: dict = dataclasses.field(default_factory=dict)  # nodeid -> compile requests
    compiles: "CompileChecks | None" = None   # where each test's kernels go as it ends
    stuck: set = dataclasses.field(default_factory=set)   # tests the parent saw hang, die or not run
    printed: dict = dataclasses.field(default_factory=dict)   # nodeid -> what the test printed in its child

    def stops(self, first_failure: bool) -> bool:
        """With `first_failure`, a run stops once any test has not passed."""
        return first_failure and any(o["outcome"] != "passed" for o in self.outcomes.values())

    def finish(self, event: dict):
        self.outcomes[event["nodeid"]] = {"outcome": event["outcome"], "output": event["output"]}
        self.printed[event["nodeid"]] = str(event.get("printed") or "")
        self.kernels[event["nodeid"]] = event.get("kernels", [])
        if self.compiles is not None:
            self.compiles.submit(self.kernels[event["nodeid"]])


class CompileChecks:
    """The compile check of every kernel the graded tests launched, run beside the tests: each
    test's kernels are queued as the test ends (`submit`), and one thread compiles, in the
    `server`'s child, whatever queued while it compiled the last batch. Each kernel (request) is
    compiled once however many tests launched it; the canary once, in the first batch. `apply`
    waits for the last batch and fails every test with a kernel that did not compile.

    Compiled after a group's tests instead, they trailed the last group: ~10 s of a whole
    submission's grade on 2 cores."""

    def __init__(self, server=None):
        import concurrent.futures
        import threading
        self.server = server
        self._lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self._pending: dict[str, dict] = {}    # key -> request, not yet in a batch
        self._answers: dict[str, object] = {}  # key -> None, an error line, the exception, or _QUEUED
        self._scheduled = False                # a batch is queued that has not started yet
        self._canary_done = False
        self.unavailable: str | None = None    # why the check could not run here, if it could not

    @staticmethod
    def key(request: dict) -> str:
        return json.dumps(request, sort_keys=True)

    def submit(self, requests: list[dict]):
        with self._lock:
            for request in requests:
                key = self.key(request)
                if key not in self._answers:
                    self._pending[key] = request
                    self._answers[key] = _QUEUED
            if self._pending and not self._scheduled:
                self._scheduled = True
                self._pool.submit(self._compile_pending)

    def _compile_pending(self):
        from kernellab.grading import compile_check
        with self._lock:
            batch, self._pending, self._scheduled = self._pending, {}, False
        try:
            errors = compile_check.gpu_compile_errors(list(batch.values()), self.server,
                                                      canary=not self._canary_done)
            self._canary_done = True
        except Exception as exc:  # the check itself broke: those kernels' tests say so
            errors = [exc] * len(batch)
        with self._lock:
            self._answers.update(zip(batch, errors))

    def apply(self, runs: list[LabRun]):
        """Wait for every batch, then fail each test whose kernels did not all compile (a test that
        failed already keeps its own reason first); where the check itself could not run, the
        test keeps its outcome and says so."""
        self._pool.shutdown(wait=True)       # every batch queued (the tests have all ended) runs
        from kernellab.grading import compile_check
        cc = f"sm_{compile_check.GPU_CHECK_CC[0]}{compile_check.GPU_CHECK_CC[1]}"
        for run in runs:
            for nodeid, requests in run.kernels.items():
                answers = [self._answers.get(self.key(r)) for r in requests]
                broken = next((a for a in answers if isinstance(a, Exception)), None)
                outcome = run.outcomes[nodeid]
                if broken is not None:
                    outcome["output"] += f"\n(compile check unavailable: {broken})"
                    self.unavailable = str(broken).splitlines()[0]
                    continue
                failures = [a for a in answers if isinstance(a, str)]
                if not failures:
                    continue
                message = (f"fails the compile check for a real GPU ({cc}):\n" + "\n".join(failures)
                           + "\n(every lab kernel must compile for a GPU, in float32 where the lab "
                             "declares float32)")
                if outcome["outcome"] == "failed":      # its own failure stays the first reason
                    outcome["output"] += "\n" + message
                else:
                    outcome["outcome"] = "failed"
                    outcome["output"] = message + "\n" + outcome["output"]


_QUEUED = object()   # a kernel in a batch that has not answered yet


def check_compiles(runs: list[LabRun], server=None):
    """A test passes only if every lab kernel it launched also compiles for a real GPU: the
    kernels of all `runs` are compiled once each, in one child (the `server`'s, where given)."""
    checks = CompileChecks(server)
    for run in runs:
        for requests in run.kernels.values():
            checks.submit(requests)
    checks.apply(runs)


def child_env(target_name: str, labs_dir: Path | None, seed: int) -> dict:
    """The children's environment; KERNELLAB_DEVICE passes through, so they share this process's
    device mode (see `device_groups` for the tests that need the simulator)."""
    return {**settings.child_env(target=target_name, seed=seed, grading=True, labs_dir=labs_dir),
            "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}


def test_file(lab: str) -> Path:
    """The lab's graded test file, relative to the course folder (the children start in a
    workspace's copy of it)."""
    matches = sorted(integrity.TESTS.glob(f"test_lab{lab}_*.py"))
    if not matches:
        raise ValueError(f"lab {lab} has no graded tests (tests/labs/test_lab{lab}_*.py)")
    return matches[0].relative_to(target.ROOT)


def space(workdir) -> "sandbox.Workspace | sandbox.InPlace":
    """Where children start: a workspace as given, or a plain folder for the course in place
    (kernellab's own tests and the mutants)."""
    return workdir if hasattr(workdir, "popen") else sandbox.InPlace(Path(workdir))


def collect(labs: list[str], env: dict, workdir) -> dict[str, dict]:
    """{lab: its graded tests and their points}, read from the pristine tests/ in one child
    (no student code runs)."""
    where = space(workdir)
    manifest = where.scratch / f"manifest-{'-'.join(labs)}.json"
    proc = where.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                      *(str(test_file(lab)) for lab in labs), f"--kl-manifest={manifest}",
                      f"--results={where.scratch / 'collected.json'}"],  # not into the course folder
                     env=env, capture_output=True, text=True, timeout=300)
    if not manifest.exists():
        raise RuntimeError(f"could not collect the tests of lab(s) {', '.join(labs)}:\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    graded = json.loads(manifest.read_text())
    return {lab: {nodeid: info for nodeid, info in graded.items() if info["lab"] == lab}
            for lab in labs}


def probe_import(lab: str, env: dict, timeout: float) -> str | None:
    """Import the lab once in a child; None if it imports, else why not (one line or a short tail)."""
    return probe_imports([lab], env, timeout)[lab]


def probe_imports(labs: list[str], env: dict, timeout: float, workdir=None) -> dict:
    """{lab: None if it imports, else why not}: the labs imported one after another in one child
    (starting a child costs more than importing most labs), each within `timeout`. The lab whose
    import raises, hangs or ends the interpreter is reported, and a fresh child goes on with the
    labs after it. `workdir`: a workspace or a folder (default: a temporary one)."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="kernellab-probe-") as tmp:
            return probe_imports(labs, env, timeout, tmp)
    where = space(workdir)
    found: dict[str, str | None] = {}
    while pending := [lab for lab in labs if lab not in found]:
        token = f"{os.getpid()}-{time.monotonic_ns()}"
        marks, errors = where.scratch / f"probe-marks-{token}", where.scratch / f"probe-stderr-{token}"
        code = ("import sys\nimport kernellab\nfrom kernellab.course import target\n"
                f"marks = open({str(marks)!r}, 'a', buffering=1)\n"
                f"for lab in {pending!r}:\n"
                "    marks.write(f'start {lab}\\n')\n"
                "    target.load(lab)\n"
                "    marks.write(f'done {lab}\\n')\n")
        with open(errors, "w") as err:
            proc = where.popen([sys.executable, "-c", code], env=env,
                               stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            current, started, hung = None, time.monotonic(), False
            while proc.poll() is None and not hung:
                words = marks.read_text().split() if marks.exists() else []
                if words[-2:-1] == ["start"] and current != words[-1]:
                    current, started = words[-1], time.monotonic()   # each lab's own clock
                hung = time.monotonic() - started > timeout
                if hung:
                    kill_group(proc)
                time.sleep(POLL)
        lines = marks.read_text().splitlines() if marks.exists() else []
        found.update((line.split()[1], None) for line in lines if line.startswith("done "))
        stuck = next((lab for lab in pending if lab not in found), None)
        if stuck is None:
            break
        found[stuck] = (f"importing the lab did not finish within {timeout:.0f} s (a loop at "
                        "import time?)" if hung else _import_failure(errors.read_text(), proc.returncode))
    return found


def _import_failure(stderr: str, returncode: int | None) -> str:
    """Why a lab did not import: the exception's last line, the lab file's line and a short tail."""
    tail = [line for line in stderr.strip().splitlines() if line.strip()][-6:]
    if not tail:
        return f"the lab could not be imported: the interpreter exited with code {returncode}"
    places = [re.search(r'File "([^"]+)", line (\d+)', line) for line in tail]
    where = next((f" ({Path(m.group(1)).name}, line {m.group(2)})" for m in reversed(places)
                  if m and target.LAB_FILE.match(Path(m.group(1)).name)), "")   # the lab's line
    return f"the lab could not be imported: {tail[-1].strip()}{where}\n" + "\n".join(tail)


def kill_group(proc: subprocess.Popen):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def read_events(path: Path, offset: int) -> tuple[list[dict], int]:
    if not path.exists():
        return [], offset
    with open(path) as fh:
        fh.seek(offset)
        chunk = fh.read()
    complete = chunk[: chunk.rfind("\n") + 1]
    events = [json.loads(line) for line in complete.splitlines() if line.strip()]
    return events, offset + len(complete)


def children_use_the_simulator(env: dict) -> bool:
    """Whether children started with `env` run in the simulator. They run on this machine, so
    'auto' resolves there as it did here: the parent asks its own device mode, once."""
    requested = settings.device(env)
    return requested == "sim" or (requested == "auto" and device.is_simulator())


def device_groups(graded: dict, env: dict) -> list[tuple[dict, list[str]]]:
    """The children to run, as (environment, tests). Where the children would run on a GPU,
    the tests that need the simulator (the traffic meter) get a simulator child of their own."""
    if children_use_the_simulator(env):
        return [(env, list(graded))]
    simulated = [n for n, info in graded.items() if info.get("simulator")]
    elsewhere = [n for n in graded if n not in simulated]
    return [(group_env, nodeids) for group_env, nodeids in
            ((env, elsewhere), (settings.child_env(env, device="sim"), simulated)) if nodeids]


HUNG = ("kernel {kernel} hung in {test} (killed after {timeout:.0f} s), so this test was failed "
        "at its first launch of it rather than wait out another timeout")


def run_lab(lab: str, env: dict, workdir: Path, timeout: float, output_cap: int, *,
            graded: dict | None = None, first_failure: bool = False,
            compile_check: bool = True, probe: bool = True, stress: bool = True) -> LabRun:
    """Run a lab's graded tests in children until every test has an outcome: the course's own
    code (the mutants of a solution, `kernellab mutants`), whose children's outcomes stand; a
    student's submission goes through `grade`, where the judge decides.

    `first_failure` stops at the first test that does not pass (the mutation self-test needs
    one failure per mutant, not all of them); `probe=False` skips the import probe for code
    known to import (the mutants of a solution); `stress=False` runs the simulator plainly.
    """
    graded = graded if graded is not None else collect([lab], env, workdir)[lab]
    run = LabRun(lab, graded, {})
    why_not = probe and probe_import(lab, env, IMPORT_TIMEOUT)
    if why_not:
        for nodeid in graded:
            run.outcomes[nodeid] = {"outcome": "failed", "output": why_not}
        return run
    run_tests(run, env, workdir, timeout, output_cap, first_failure, stress)
    if compile_check:
        check_compiles([run])
    return run


def run_group(name: str, graded: dict, env: dict, workdir: Path, timeout: float, output_cap: int,
              imports: dict, stress: bool = True, hung: dict | None = None,
              compiles: CompileChecks | None = None, tapes: Path | None = None) -> LabRun:
    """One lab's graded tests in children of their own (a patch a lab file makes cannot reach
    another lab's tests). A lab that did not import (`probe_imports`) or broke the import rule
    (`policy`) fails its tests with the reason. `hung` (kernel -> why), shared between labs,
    lets a kernel that hung in one lab fail at its first launch in the others. With `tapes`,
    each test records its tape there for the judge."""
    run = LabRun(name, graded, {}, compiles=compiles)
    for nodeid, info in graded.items():
        if imports.get(info["lab"]):
            run.outcomes[nodeid] = {"outcome": "failed", "output": imports[info["lab"]]}
    run_tests(run, env, workdir, timeout, output_cap, False, stress, hung, tapes)
    return run


def run_tests(run: LabRun, env: dict, workdir, timeout: float, output_cap: int,
              first_failure: bool, stress: bool, hung: dict | None = None, tapes: Path | None = None):
    """Children over the run's tests without an outcome yet, until every test has one.
    `workdir`: the workspace (or a plain folder) they start in."""
    where = space(workdir)
    graded, attempt = {n: i for n, i in run.graded.items() if n not in run.outcomes}, 0
    hung = {} if hung is None else hung
    for group_env, nodeids in device_groups(graded, env):
        while remaining := [n for n in nodeids if n not in run.outcomes]:
            attempt += 1
            progress = where.scratch / f"progress-{run.lab}-{attempt}.jsonl"
            log = where.scratch / f"log-{run.lab}-{attempt}.txt"
            extra = [f"--kl-hung={json.dumps(hung)}"] + ([] if stress else ["--no-stress"]) + \
                ([f"--kl-tape={tapes}"] if tapes else [])
            stuck = run_child(remaining, group_env, progress, log, timeout, output_cap, run,
                              first_failure, extra, where)
            if stuck:
                run.outcomes[stuck.nodeid] = {"outcome": "failed", "output": stuck.reason}
                run.stuck.add(stuck.nodeid)
                if stuck.kernel:
                    hung[stuck.kernel] = HUNG.format(kernel=stuck.kernel, timeout=timeout,
                                                     test=stuck.nodeid.split("::")[-1])
            elif not any(n in run.outcomes for n in remaining):
                tail = log.read_text()[-1500:]
                for nodeid in remaining:
                    run.outcomes[nodeid] = {"outcome": "failed",
                                            "output": f"the grader could not run this test:\n{tail}"}
                    run.stuck.add(nodeid)
            if run.stops(first_failure):
                break
        if run.stops(first_failure):
            break


@dataclasses.dataclass
class Stuck:
    """The test a child was in when it was killed or died, and why; `kernel` if one hung."""

    nodeid: str
    reason: str
    kernel: str | None = None


def run_child(nodeids, env, progress: Path, log: Path, timeout: float, output_cap: int,
              run: LabRun, first_failure: bool, extra: list[str], where=None) -> Stuck | None:
    """One child pytest over `nodeids`, started in `where` (a workspace; default: the course
    in place); returns the test it was stuck in, if any."""
    where = where if where is not None else sandbox.InPlace(progress.parent)
    args = [sys.executable, "-m", "pytest", "-q", *nodeids, f"--kl-progress={progress}",
            f"--output-cap={output_cap}", "-o", "console_output_style=classic", *extra]
    if first_failure:
        args.append("-x")
    running, kernel, started, offset = None, None, 0.0, 0
    on_gpu = False   # the last launch was a GPU one: it returned at once, so it may have ended

    def drain():
        nonlocal running, kernel, started, offset, on_gpu
        events, offset = read_events(progress, offset)
        for event in events:
            if event["event"] == "start":
                running, kernel, started = event["nodeid"], None, time.monotonic()
            elif event["event"] == "launch":
                kernel, on_gpu = event["kernel"], not event["returns"]
            elif event["event"] == "returned":
                kernel = None
            elif event["event"] == "done":
                run.finish(event)
                running = None

    with open(log, "w") as log_fh:
        proc = where.popen(args, env=env, stdout=log_fh, stderr=subprocess.STDOUT,
                           start_new_session=True)
        while True:
            drain()
            if proc.poll() is not None:
                drain()
                if running is None:
                    return None
                return Stuck(running, f"the test process died during this test (exit code "
                                      f"{proc.returncode}: os._exit, sys.exit outside a test, or "
                                      f"a crash of the interpreter)")
            if running and time.monotonic() - started > timeout:
                kill_group(proc)
                drain()
                return timed_out(running, kernel, on_gpu, timeout)
            time.sleep(POLL)


def timed_out(nodeid: str, kernel: str | None, on_gpu: bool, timeout: float) -> Stuck:
    """Why a test was killed at its timeout. Only a simulated kernel known to be running when
    the test was killed is blamed (and then skipped in later tests): a GPU launch returns at
    once, so its kernel may have ended before the code after it hung."""
    if kernel and on_gpu:
        return Stuck(nodeid, f"timed out after {timeout:.0f} s and was killed; the last kernel it "
                             f"launched was {kernel} (a GPU launch returns at once: {kernel}, or "
                             f"the code after it, never finished)")
    if kernel:
        return Stuck(nodeid, f"timed out: kernel {kernel} was still running after {timeout:.0f} s "
                             f"and was killed (a loop in it that never ends? check its loop "
                             f"bounds and steps)", kernel)
    return Stuck(nodeid, f"timed out: still running after {timeout:.0f} s and was killed (a loop "
                         f"that never ends?)")


def resolve_labs(labs) -> list[str]:
    """The labs asked for; by default every lab that has graded tests."""
    if labs:
        return [target.lab_number(lab) for lab in labs]
    return [n for n in target.labs() if any(integrity.TESTS.glob(f"test_lab{n}_*.py"))]


def labs_dir_of(root: Path | None) -> Path | None:
    """A submission holds labs/labNN_*.py, or the lab files at its top level."""
    if root is None:
        return None
    root = Path(root).resolve()
    if not root.is_dir():
        raise ValueError(f"no submission folder {root}: give --root a folder that holds "
                         "labs/labNN_*.py or the lab files themselves")
    return root / "labs" if (root / "labs").is_dir() else root


def submission_labs(root: Path) -> Path:
    """`labs_dir_of` for a folder that must hold at least one lab file (`grade --root`: a wrong
    folder is a mistake to say, not a submission that scores 0)."""
    labs_dir = labs_dir_of(root)
    if not any(target.LAB_FILE.match(p.name) for p in labs_dir.glob("lab*.py")):
        raise ValueError(f"{Path(root).resolve()} holds no lab file (labNN_topic.py, at its top "
                         "level or in labs/): is it the submission's folder?")
    return labs_dir


def lab_files(numbers: list[str], space, target_name: str) -> dict[str, Path]:
    """{lab: the file graded for it}: the submission's where one is graded, else the target's."""
    folder = space.labs_dir or target.ROOT / ("solutions" if target_name == "solutions" else "labs")
    names = target.labs()
    return {n: Path(folder) / f"{names[n]}.py" for n in numbers if n in names}


def policy_refusals(files: dict[str, Path]) -> dict[str, str]:
    """{lab: the one line} for each lab file that breaks the import rule (read, never run)."""
    found = {}
    for lab, path in files.items():
        if path.is_file():
            why = policy.check_file(path, lab, target.ROOT)
            if why:
                found[lab] = f"scored 0: {why}"
    return found


JUDGE_TIMEOUT = 600.0


def with_printed(outcome: dict, printed: str | None, cap: int) -> dict:
    """The judge's outcome, with what the student's code printed in its child (their debugging
    output: shown, never judged)."""
    if not printed or not printed.strip():
        return outcome
    text = f"{outcome['output']}\nprinted while it ran in the grader:\n{printed}"
    return {**outcome, "output": plugin.cap_text(text, cap)}


def judge(graded: dict, reasons: dict, tapes: Path, seed: int, target_name: str,
          output_cap: int) -> dict:
    """{nodeid: outcome} decided by the course's own tests replaying each test's tape, in the
    course's own folder, in a process that never imports student code (`tape`). `reasons`
    ({nodeid: why}) are what the parent itself saw of a test that did not finish: the judge
    says them where a tape ends early."""
    with tempfile.TemporaryDirectory(prefix="kernellab-judge-") as tmp:
        copied = Path(tmp) / "tapes"
        copied.mkdir()
        if tapes.is_dir():     # regular files only: a link planted in scratch is not followed
            for path in tapes.iterdir():
                if path.is_file() and not path.is_symlink() and path.suffix == ".jsonl":
                    shutil.copyfile(path, copied / path.name)
        (copied / "reasons.json").write_text(json.dumps(reasons))
        progress, log = Path(tmp) / "progress.jsonl", Path(tmp) / "log.txt"
        env = {**settings.child_env(target=target_name, seed=seed, grading=True, labs_dir=False,
                                    device="sim"),
               "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0"}
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *graded,
                f"--kl-replay={copied}", f"--kl-progress={progress}", f"--output-cap={output_cap}",
                "--no-stress", "-o", "console_output_style=classic"]
        with open(log, "w") as log_fh:
            try:
                subprocess.run(args, cwd=target.ROOT, env=env, stdout=log_fh,
                               stderr=subprocess.STDOUT, timeout=JUDGE_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        events, _ = read_events(progress, 0)
        outcomes = {e["nodeid"]: {"outcome": e["outcome"], "output": e["output"]}
                    for e in events if e.get("event") == "done" and e.get("nodeid") in graded}
        tail = log.read_text()[-1500:] if log.exists() else ""
    for nodeid in graded:
        outcomes.setdefault(nodeid, {"outcome": "failed",
                                     "output": f"the judge could not decide this test:\n{tail}"})
    return outcomes


def grade(labs=None, target_name: str = "labs", results: Path = Path("results.json"),
          seed: int | None = None, timeout: float | None = None, root: Path | None = None,
          output_cap: int = plugin.OUTPUT_CAP, jobs: int = 1, stress: bool = True,
          out=print, require_protection: str | None = None, import_policy: bool = True,
          verbose: bool = False) -> dict:
    """Grade `labs` of the chosen target, each lab in a child of its own, `jobs` at a time; the
    judge decides every test; write results.json; print (unless `out` is None) the score table
    and each lost test with the first line of its reason. `require_protection` (bwrap or user)
    refuses, before anything runs, to grade under a weaker protection (sandbox.ProtectionError).
    `import_policy=False` lets a file that breaks the import rule run (kernellab's own tests of
    the layers behind the rule: the judge and the protection). `verbose` puts what the
    protection covers in the header (one word otherwise)."""
    import concurrent.futures
    protection = sandbox.require(require_protection)
    seed = plugin.new_seed() if seed is None else seed
    timeout = timeout or DEFAULT_TIMEOUT
    outcomes = {}
    numbers = resolve_labs(labs)
    hidden = () if target_name == "solutions" else (target.ROOT / "solutions",)
    with sandbox.Workspace(labs_dir_of(root), solutions=target_name == "solutions") as space, \
            sandbox.closed(*hidden), \
            concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool, \
            ptxas.CompileServer(lineinfo=True, sandbox=space) as server:  # numba imports there during collect
        env = {**child_env(target_name, space.labs_dir, seed), "PYTHONHASHSEED": "0"}
        refused = policy_refusals(lab_files(numbers, space, target_name)) if import_policy else {}
        probing = pool.submit(probe_imports, [n for n in numbers if n not in refused], env,
                              IMPORT_TIMEOUT, space)   # beside collect
        with tempfile.TemporaryDirectory(prefix="kernellab-collect-") as tmp:
            collected = collect(numbers, env, tmp)   # the pristine course: no student code, out of its reach
        imports = {**probing.result(), **refused}
        compiles, hung = CompileChecks(server), {}
        tapes = space.scratch / "tapes"
        tapes.mkdir()
        if space.uid is not None:
            os.chown(tapes, space.uid, space.uid)
        costliest_first = sorted(collected, key=lambda lab: -len(collected[lab]))
        runs = list(pool.map(lambda lab: run_group(f"lab{lab}", collected[lab], env, space, timeout,
                                                   output_cap, imports, stress, hung, compiles, tapes),
                             costliest_first))
        graded = {nodeid: info for lab in sorted(collected) for nodeid, info in collected[lab].items()}
        unrun = {n: o for run in runs for n, o in run.outcomes.items() if imports.get(graded[n]["lab"])}
        reasons = {n: o["output"] for run in runs for n, o in run.outcomes.items() if n in run.stuck}
        ran = {n: info for n, info in graded.items() if n not in unrun}
        judged = {**unrun, **(judge(ran, reasons, tapes, seed, target_name, output_cap) if ran else {})}
        for run in runs:
            run.outcomes = {n: with_printed(judged[n], run.printed.get(n), output_cap)
                            for n in run.graded}
        compiles.apply(runs)
        for run in runs:
            outcomes.update(run.outcomes)
    header = f"target={target_name} seed={seed} (replay with --seed {seed})"
    if not stress:
        header += " stress=off"
    header += (f"\nprotection: {protection.describe()}" if verbose else
               f"\nprotection: {protection.kind} (--verbose says what it covers)")
    warnings = []
    tampered = integrity.changes()
    if tampered:
        warnings.append("tests/ differs from the instructor's checksums:\n  " + "\n  ".join(tampered))
    if compiles.unavailable:
        warnings.append(f"the GPU compile check could not run here ({compiles.unavailable}); "
                        "install as `make install` does (pip install -c constraints.txt -e "
                        "\".[cu13]\")")
    header += "".join(f"\nWARNING: {w}\nso this is not an official grade" for w in warnings)
    document = plugin.results_document(graded, outcomes, header)
    document["extra_data"] = {"official": not warnings, "seed": seed,
                              "protection": protection.kind,
                              "protection_detail": protection.describe(),
                              "policy": {lab: why for lab, why in refused.items()}}
    Path(results).parent.mkdir(parents=True, exist_ok=True)
    Path(results).write_text(json.dumps(document, indent=2))
    if out is not None:
        out(f"kernellab grade: {header}")
        feedback(document, results, out)
    return document


def feedback(document: dict, results: Path, out=print):
    """The console's report: the score table, then each lost test and the first line of why."""
    out(plugin.score_table(document))
    lost = plugin.lost_points(document)
    if lost:
        out("lost points (the full reasons are in the report):")
        for line in lost:
            out(line)
    if any(t["visibility"] != "visible" for t in document["tests"]):
        out("(hidden tests are included in the score)")
    out(f"report: {results}")


def percent(document: dict) -> float:
    return 100.0 * document["score"] / document["max_score"] if document["max_score"] else 0.0


def official(document: dict) -> bool:
    """False when the header warns (tests edited, no compile check): `--fail-under` then fails."""
    return document.get("extra_data", {}).get("official", True)


def check(labs=None, out_dir: Path = Path(".kernellab/check"), seed: int | None = None,
          timeout: float | None = None, stress: bool = True, out=print) -> bool:
    """Solutions must score 100% and the untouched starter exactly 0, both with complete reports.

    The two targets are graded side by side, on one seed, each in a child process per usable core
    (the starter's grade ends long before the solutions', whose tests all run)."""
    import concurrent.futures
    wants = {"solutions": "full", "labs": "zero"}
    seed = plugin.new_seed() if seed is None else seed
    out(f"kernellab check: seed {seed} for both targets (replay with --seed {seed})")

    def one(target_name):
        results = Path(out_dir) / f"results-{target_name}.json"
        return target_name, results, grade(labs, target_name, results, seed, timeout,
                                           jobs=settings.usable_cores(), stress=stress, out=None)

    ok = True
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        for target_name, results, document in pool.map(one, wants):
            out(f"== {target_name} ==")
            out(plugin.score_table(document))
            out(f"report: {results}")
            want = wants[target_name]
            complete = bool(document["tests"]) and all(
                not t["output"].startswith("not run") for t in document["tests"])
            good = (document["score"] == document["max_score"] if want == "full"
                    else document["score"] == 0)
            if not (complete and good):
                ok = False
                out(f"CHECK FAILED: {target_name} should score {'100%' if want == 'full' else '0'}; "
                    "tests at fault:")
                for test in document["tests"]:
                    if (test["score"] != test["max_score"]) == (want == "full"):
                        out(f"  - {test['name']}")
    out("check passed: solutions 100%, starter 0" if ok else "check FAILED")
    return ok
