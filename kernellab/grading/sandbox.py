"""Student code runs on a private copy: every grading path grades inside a `Workspace`.

`kernellab grade` (with or without `--root`), `grade --batch`, `kernellab check` and the
Gradescope bundle all go through `runner.grade`, which makes a Workspace for each submission: a
new temporary folder holding

- `course/`: a copy of the course parts the graded tests need (kernellab/, labs/ as given,
  experiments/, data/, tests/labs/, pyproject.toml, and solutions/ when the solutions are graded).
  Every child that runs student code (the import probe, the test children, the compile child)
  starts there, so `target.ROOT` in the child is this copy;
- `submission/labs/`: a copy of the submission's lab files (`--root`), graded in place of labs/;
- `scratch/`: the one folder the children may write: HOME, TMPDIR, the caches, the progress
  events, the tapes and logs.

Where the platform allows, a child sees nothing else to read or write (`protection()` picks the
strongest, and the grade's header names it):

| protection | where | what a child sees |
|---|---|---|
| `bwrap` | Linux with bubblewrap (as root, or where user namespaces are allowed) | its workspace (the copies read-only, scratch writable), the interpreter and its packages, the system's libraries, a private /tmp, no network; as root, no capability. No course folder, no solutions/, no other submission |
| `user` | Linux, the grader running as root, no bubblewrap | the machine, as a uid of its own that owns only its scratch: its copies are readable only by it (group), the course's solutions/ and the batch folder are closed to it (`closed`) while it runs, /tmp is shared |
| `copy` | anywhere else (macOS, Windows, no bubblewrap, or a uid that cannot run this Python) | anything the grading user can: only the submission's folder, parent and siblings are copies |

A wrapper that already runs the grader as an unprivileged user (the Gradescope bundle's
run_autograder) says so in KERNELLAB_SANDBOXED, and the grade's header names it. The workspace is
deleted when the grade ends. Whatever a child does, it cannot change a score: the judge decides
every test (kernellab.grading.runner); the protection keeps a submission from reading what it
should not (the solutions, other students' work) and from leaving anything behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from kernellab.course import target

COURSE_FOLDERS = ("kernellab", "labs", "experiments", "data", "tests/labs")
COURSE_FILES = ("pyproject.toml",)
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
PROTECTIONS = ("bwrap", "user", "copy")     # strongest first


class ProtectionError(ValueError):
    """The machine's protection is weaker than the one the instructor required."""


def require(kind: str | None) -> "Protection":
    """This machine's protection, or ProtectionError (one line) when `kind` (bwrap or user) is
    stronger than what it gives: `--require-protection` refuses to grade under anything weaker."""
    found = protection()
    if kind is None:
        return found
    if kind not in PROTECTIONS[:2]:
        raise ProtectionError(f"--require-protection takes bwrap or user, not {kind!r}")
    if PROTECTIONS.index(found.kind) > PROTECTIONS.index(kind):
        raise ProtectionError(f"--require-protection {kind}: this machine gives only "
                              f"{found.describe()}")
    return found

# The uids the children of a root grader run as: one per workspace, none with a passwd entry,
# so each owns only its own scratch folder (a submission cannot signal or read another's).
UID_RANGE = range(61000, 62000)
_uids = itertools.cycle(UID_RANGE)
_uid_lock = threading.Lock()


@dataclasses.dataclass(frozen=True)
class Protection:
    """How the children are kept from writing outside the copy, and in words why this one."""

    kind: str          # one of PROTECTIONS
    why: str

    def describe(self) -> str:
        return f"{self.kind} ({self.why})"


@functools.lru_cache(maxsize=1)
def protection() -> Protection:
    """The strongest protection this machine gives (see the module's table), probed once:
    bubblewrap where it starts and this Python runs inside it (with a uid of its own, as root);
    else a uid of its own where the grader runs as root and that uid can run this Python; else
    the private copy alone."""
    root = os.name == "posix" and os.geteuid() == 0
    if shutil.which("bwrap"):
        with tempfile.TemporaryDirectory(prefix="kernellab-probe-") as probe:
            scratch = Path(probe) / "scratch"
            scratch.mkdir()
            why = _python_fails({}, prefix=_bwrap_prefix(Path(probe), scratch))
        if why is None:
            return Protection("bwrap", "a child sees only its workspace, the interpreter and its "
                                       "packages, a private /tmp and no network")
        fallback = f"bubblewrap did not start: {why}"
    else:
        fallback = "bubblewrap is not installed"
    if root and shutil.which("setpriv"):
        why = _python_fails({}, prefix=_setpriv_prefix(UID_RANGE[-1]))
        if why is None:
            return Protection("user", "each workspace's children run as a uid of their own")
        fallback += f"; a uid of its own cannot run {sys.executable}: {why}"
    else:
        fallback += "; not running as root" if not root else "; no setpriv"
    outer = os.environ.get("KERNELLAB_SANDBOXED")    # a wrapper that protects already says how
    return Protection("copy", f"inside {outer}" if outer else
                      f"the submission's folder, parent and siblings are copies, the rest of this "
                      f"machine is not protected; {fallback}")


# What a child must be able to do: import the stack, and start this Python again (the compile
# child, a test's own subprocess). Seen on a CPU machine whose venv's base Python lies under a
# 0700 /root: started through setpriv, a uid of its own ran, but could not start sys.executable.
CHILD_PROBE = ("import subprocess, sys, numba, pytest; "
               "subprocess.run([sys.executable, '-c', 'import numba'], check=True)")


def _python_fails(options: dict, prefix: list[str] = ()) -> str | None:
    """None if this Python, started under `options` (subprocess keyword arguments) behind
    `prefix`, imports numba and pytest and can start itself again; else why not, in one line."""
    command = [*prefix, sys.executable, "-c", CHILD_PROBE]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/",
                              **options)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    lines = (done.stderr or done.stdout).strip().splitlines()
    return None if done.returncode == 0 else (lines[-1] if lines else f"exit {done.returncode}")


def _setpriv_prefix(uid: int) -> list[str]:
    """util-linux's setpriv, as the Gradescope bundle's run_autograder uses it: real, effective
    and saved ids all `uid`, no supplementary groups, no capabilities."""
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# What of /etc a Python child reads (the loader's cache, users and groups, time zone), and
# nothing else there (no /etc/shadow).
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf",
                "/etc/passwd", "/etc/group", "/etc/hosts", "/etc/localtime", "/etc/alternatives",
                "/etc/ssl", "/etc/ca-certificates")


def interpreter_folders() -> list[str]:
    """The folders this Python and its packages live in (the venv, the base installation), and
    nothing of the course's but its venv."""
    import site
    folders = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
               os.path.dirname(os.path.realpath(sys.executable)), *site.getsitepackages()}
    folders = {os.path.realpath(f) for f in folders if f and os.path.isdir(f)}
    return sorted(f for f in folders if not any(f != o and f.startswith(o + os.sep) for o in folders))


def _bwrap_prefix(workspace: Path, writable: Path) -> list[str]:
    """bubblewrap showing a child the system's libraries, the interpreter and its packages, and
    `workspace` (read-only but for `writable`), with a private /tmp and no network. As root the
    child keeps uid 0 with every capability dropped: it owns nothing it can see but scratch (a
    uid of its own in a user namespace would map back to root outside, and a uid of its own
    outside could not bind an interpreter under a 0700 /root)."""
    args = ["bwrap"]
    for folder in SYSTEM_FOLDERS + SYSTEM_FILES:
        if os.path.islink(folder):
            args += ["--symlink", os.readlink(folder), folder]
        elif os.path.exists(folder):
            args += ["--ro-bind", folder, folder]
    for folder in interpreter_folders():
        args += ["--ro-bind", folder, folder]
    gpu = os.path.exists("/dev/nvidiactl")
    args += ["--dev-bind", "/dev", "/dev"] if gpu else ["--dev", "/dev"]
    if gpu and os.path.isdir("/sys"):
        args += ["--ro-bind", "/sys", "/sys"]       # the CUDA driver reads the device's files
    args += ["--proc", "/proc", "--tmpfs", "/tmp",
             "--ro-bind", str(workspace), str(workspace), "--bind", str(writable), str(writable),
             "--unshare-all", "--die-with-parent", "--new-session"]
    if os.name == "posix" and os.geteuid() == 0:
        args += ["--cap-drop", "ALL"]
    return args + ["--"]


_closed: dict[Path, list] = {}      # folder -> [its mode before, how many grades hold it closed]
_closed_lock = threading.Lock()


@contextlib.contextmanager
def closed(*folders: Path):
    """Folders the children must not read (the course's solutions/, a batch of submissions),
    closed to every user but their owner while the block runs, where the protection is `user`
    (bubblewrap does not show them at all). Grades side by side share the closing: the last to
    end puts the folder's mode back."""
    if protection().kind != "user":
        yield
        return
    held = [Path(f).resolve() for f in folders if Path(f).is_dir()]
    with _closed_lock:
        for folder in held:
            entry = _closed.setdefault(folder, [folder.stat().st_mode & 0o7777, 0])
            entry[1] += 1
            os.chmod(folder, 0o700)
    try:
        yield
    finally:
        with _closed_lock:
            for folder in held:
                entry = _closed[folder]
                entry[1] -= 1
                if entry[1] == 0:
                    os.chmod(folder, _closed.pop(folder)[0])


def _free_uid() -> int:
    with _uid_lock:
        for _ in UID_RANGE:
            uid = next(_uids)
            try:
                pwd.getpwuid(uid)
            except KeyError:
                return uid
    raise RuntimeError(f"no free uid in {UID_RANGE.start}-{UID_RANGE.stop - 1} for the grader")


class Workspace:
    """A private copy of the course and of one submission, and how to start children in it."""

    def __init__(self, submission: Path | None = None, solutions: bool = False):
        """Copy the course being graded from and, where given, the lab files of `submission` (a
        folder of labNN_*.py files). With `solutions`, the solutions are copied too
        (`kernellab check`)."""
        source = target.ROOT
        self.protection = protection()
        self.root = Path(tempfile.mkdtemp(prefix="kernellab-workspace-"))
        try:
            self.course = self.root / "course"
            self.scratch = self.root / "scratch"
            parts = COURSE_FOLDERS + (("solutions",) if solutions else ())
            for folder in parts:
                if (source / folder).is_dir():
                    shutil.copytree(source / folder, self.course / folder, ignore=IGNORED)
            for name in COURSE_FILES:
                if (source / name).is_file():
                    shutil.copy2(source / name, self.course / name)
            self.labs_dir = None
            if submission is not None:
                self.labs_dir = self.root / "submission" / "labs"
                self.labs_dir.mkdir(parents=True)
                for path in sorted(Path(submission).glob("*.py")):
                    if path.is_file():
                        shutil.copy2(path, self.labs_dir / path.name)
            self.scratch.mkdir()
            self.uid = None
            self._lock_down()
        except BaseException:
            self.close()
            raise

    def _lock_down(self):
        """Copies writable by the grader alone; where the children run as a uid of their own,
        readable by that uid's group alone, and scratch owned by it."""
        if self.protection.kind == "user":
            self.uid = _free_uid()
        group = self.uid if self.uid is not None else -1
        for folder, dirs, files in os.walk(self.root):
            if group != -1:
                os.chown(folder, 0, group)
            os.chmod(folder, 0o750 if group != -1 else 0o755)
            for name in files:
                path = os.path.join(folder, name)
                if group != -1:
                    os.chown(path, 0, group)
                os.chmod(path, 0o640 if group != -1 else 0o644)
        os.chmod(self.root, 0o710 if group != -1 else 0o711)   # its uid may pass through, not list
        if self.uid is not None:
            os.chown(self.scratch, self.uid, self.uid)
            os.chmod(self.scratch, 0o700)

    def env(self, env: dict) -> dict:
        """`env` with HOME, TMPDIR and the caches in scratch (nothing of the user's is reached
        through them)."""
        scratch = str(self.scratch)
        return {**env, "HOME": scratch, "TMPDIR": scratch, "XDG_CACHE_HOME": scratch,
                "NUMBA_CACHE_DIR": os.path.join(scratch, "numba"),
                "MPLCONFIGDIR": os.path.join(scratch, "matplotlib")}

    def command(self, args: list[str]) -> list[str]:
        """`args` behind this workspace's protection."""
        prefix = {"user": lambda: _setpriv_prefix(self.uid),
                  "bwrap": lambda: _bwrap_prefix(self.root, self.scratch)
                  }.get(self.protection.kind, list)
        return prefix() + list(args)

    def options(self, env: dict) -> dict:
        """subprocess keyword arguments for a child that runs student code."""
        return {"cwd": str(self.course), "env": self.env(env)}

    def popen(self, args: list[str], env: dict, **kwargs) -> subprocess.Popen:
        return subprocess.Popen(self.command(args), **self.options(env), **kwargs)

    def run(self, args: list[str], env: dict, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(args), **self.options(env), **kwargs)

    def close(self):
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Workspace":
        return self

    def __exit__(self, *exc):
        self.close()


class InPlace:
    """The course as it is, for code the instructor wrote (the mutants of the solutions): the
    children start in the course folder and write into `scratch`; no copy, no protection."""

    protection = Protection("none", "instructor code, run in the course folder")

    def __init__(self, scratch: Path):
        self.course, self.scratch, self.labs_dir = target.ROOT, Path(scratch), None

    def command(self, args):
        return list(args)

    def options(self, env: dict) -> dict:
        return {"cwd": str(self.course), "env": env}

    popen = Workspace.popen
    run = Workspace.run
