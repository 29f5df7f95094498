"""Compiling a kernel exactly as numba-cuda's dispatcher does, and reading ptxas's report of it.

The kernel is built with numba-cuda's own `_Kernel` (same options, same PTX-or-LTO-IR path, same
`sm_XXa` target) and linked by nvJitLink with verbose output; `parse_ptxas_log` reads the
`ptxas info` lines. Needs no GPU. shared/NOTES.md: through LTO-IR, numba-cuda's default when
nvJitLink is present, these figures equalled what the H200 driver reported.

In the simulator `numba.cuda` cannot compile in-process, so a child process does it: it imports
the kernel's module with the real `numba.cuda` (which compiles without a driver), finds the kernel
by the name it has there (kernellab.kernels.jit.kernel_name), and answers a list of requests
(`child_request`) with one JSON line. A failure names the kernel, its argument types, Numba's
reason and the line of the kernel's file where the compile stopped.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

from kernellab.gpu import device
from kernellab.kernels import jit

_RESULT_MARK = "__kernellab_resources__ "


class KernelCompileError(ValueError):
    """The kernel did not compile; the message is Numba's first useful line."""


# --- saying why a compile failed, and where ------------------------------------------------------

def compile_failure(name, argtypes, exc, source_file: str = "") -> str:
    """One line: the kernel, its argument types, Numba's reason and, when the compile stopped in
    `source_file` (the kernel's own file), that file's line, wherever Numba's message points."""
    types = ", ".join(map(str, argtypes))
    line = _line_in_file(exc, source_file) if source_file else None
    if line is None:
        return f"{name}({types}) did not compile: {jit.first_useful_line(exc)}"
    reason = jit.first_useful_line(exc, with_location=False)
    return f"{name}({types}) did not compile: {reason} at {source_line(source_file, line, ', line ')}"


def _line_in_file(exc: BaseException, source_file: str) -> int | None:
    """The line of `source_file` the compiler was working on when it raised: Numba's typing and
    lowering frames hold the IR location (`loc`, or an instruction's `.loc`) of what they were
    doing; the innermost one in the kernel's file is the student's line."""
    wanted = os.path.realpath(source_file)
    found, tb = None, exc.__traceback__
    while tb is not None:
        for value in list(tb.tb_frame.f_locals.values()):
            loc = value if type(value).__name__ == "Loc" else getattr(value, "loc", None)
            filename = getattr(loc, "filename", None)
            if isinstance(filename, str) and isinstance(getattr(loc, "line", None), int) \
                    and os.path.realpath(filename) == wanted:
                found = loc.line
        tb = tb.tb_next
    return found


def source_line(path: str, line: int, separator: str = ":") -> str:
    """'labs/lab02_vertical_fusion.py:123: `y = x * 0.5`': the path as the student knows it
    (relative to the working directory when it is under it, else its folder and name) and the
    line's text."""
    shown = Path(path)
    try:
        shown = shown.resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        shown = Path(shown.parent.name) / shown.name     # a submission elsewhere: labs/labNN_*.py
    text = line_text(path, line)
    return f"{shown}{separator}{line}" + (f": `{text}`" if text is not None else "")


def line_text(path: str, line: int) -> str | None:
    """The stripped text of line `line` (from 1) of the file, None if it has no such line."""
    try:
        return Path(path).read_text().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return None


# --- compiling as numba-cuda's dispatcher does -----------------------------------------------------

def _arch_cc(cc: tuple[int, int]) -> tuple:
    """numba-cuda's link target: the device's cc, with the 'a' suffix from 9.0 on (sm_90a)."""
    return (cc[0], cc[1], "a" if tuple(cc) >= (9, 0) else "")


def compile_and_link(fn, argtypes, targetoptions, lto, lineinfo=False, figures_optional=False):
    """Build the kernel with numba-cuda's own _Kernel (what CUDADispatcher.compile builds), then
    link its code as CUDACodeLibrary.get_cubin does, with verbose output added.
    Returns (figures, link log, whether it went through LTO-IR, the code library). With
    `figures_optional` (the grader's compile check asks only whether it compiles and links), a
    link log without ptxas's figures gives figures None instead of an error: on the H200, under a
    GPU-mode grader, the canary's log held only "8 bytes gmem" although it linked (CUDA's JIT
    cache holding the code drops the figures: the compile child turns it off, `_child_env`)."""
    from cuda.core import Linker
    from numba.cuda.cudadrv import driver as cudadrv
    from numba.cuda.dispatcher import _Kernel

    options = dict(targetoptions)
    if lto is not None:
        options["lto"] = lto
    if lineinfo:
        options["lineinfo"] = True
    kernel = _Kernel(fn, argtypes, **options)
    library = kernel._codelibrary
    arch = library._ensure_cc(None)
    staged = cudadrv._Linker(max_registers=library._max_registers, cc=arch, lto=library._lto)
    library._link_all(staged, arch, ignore_nonlto=False)
    link_options = staged._get_linker_options(ptx=False)
    link_options.verbose = True
    linker = Linker(*staged._object_codes, options=link_options)
    try:
        linker.link("cubin")
        log = linker.get_info_log()
    finally:
        linker.close()
    try:
        figures = parse_ptxas_log(log, library._entry_name)
    except KernelCompileError:
        if not figures_optional:
            raise
        figures = None
    return figures, log, bool(library._lto), library


_PROPERTIES = re.compile(r"(?:Compiling entry function|Function properties for) '?([^'\s:]+)'?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
_LINKED = re.compile(r"^info\s*: used (\d+) registers.*?(\d+) stack, (\d+) bytes smem")
_SMEM = re.compile(r"(\d+) bytes smem")


NO_FIGURES = "no ptxas figures"   # how a link log without the entry's figures is reported


def parse_ptxas_log(log: str, entry: str) -> dict:
    """Resources of function `entry` from a verbose link log.

    ptxas prints, per function, "N bytes stack frame, S bytes spill stores, L bytes spill loads"
    and "Used R registers, ..., M bytes smem". Compiled from PTX (not LTO-IR), numba's shared
    arrays are module-level symbols that ptxas does not charge to the function; nvJitLink's own
    summary after the link ("used R registers, ..., M bytes smem") then gives the shared size.
    Caution: for sm_90a that summary says 2048 bytes for a 1 KiB array where ptxas, through
    LTO-IR, says 1024; `kernellab.kernels.driver.driver_comparison` on a GPU shows which the
    driver agrees with.
    """
    current, figures = None, {}
    for line in log.splitlines():
        match = _PROPERTIES.search(line)
        if match:
            current = match.group(1)
        if current != entry:
            continue
        if (match := _FRAME.search(line)):
            figures["local_bytes"], figures["spill_stores_bytes"], figures["spill_loads_bytes"] = \
                map(int, match.groups())
        elif (match := _USED.search(line)):
            figures["registers_per_thread"] = int(match.group(1))
            smem = _SMEM.search(match.group(2))
            figures["static_shared_bytes"] = int(smem.group(1)) if smem else None
        elif (match := _LINKED.search(line)) and figures.get("static_shared_bytes") is None:
            figures["static_shared_bytes"] = int(match.group(3))
    if "registers_per_thread" not in figures:
        raise KernelCompileError(f"{NO_FIGURES} for {entry} in the link log:\n{log.strip()}")
    figures.setdefault("local_bytes", 0)
    figures.setdefault("spill_stores_bytes", 0)
    figures.setdefault("spill_loads_bytes", 0)
    if figures.get("static_shared_bytes") is None:
        figures["static_shared_bytes"] = 0
    return figures


# --- the child process -----------------------------------------------------------------------------

def child_request(kernel, argtypes, cc: tuple[int, int], lto: bool | None) -> dict:
    """A JSON-able request for the compile child. Optional keys a caller may add: `lineinfo`
    (compile with line info, device functions too), `return_ptx` (the answer carries the PTX) and
    `figures_optional` (no ptxas figures in the log is not an error)."""
    fn = jit.python_function(kernel)
    source, _ = jit.source_stamp(fn)
    return {
        "module": fn.__module__,
        "file": source,
        "name": jit.kernel_name(kernel),
        "qualname": fn.__qualname__,
        "argtypes": base64.b64encode(pickle.dumps(tuple(argtypes))).decode(),
        "cc": list(cc),
        "lto": lto,
    }


# kernellab/__init__ picks the device mode on import, and without a driver it would pick the
# simulator; the child must compile with the real numba.cuda, so it loads kernellab.gpu.device first
# and tells it "gpu" (and the parent's device facts) before anything imports kernellab.
_CHILD_BOOTSTRAP = r"""
import importlib.util, json, sys
payload = json.loads(sys.stdin.readline())
sys.path[:0] = [p for p in payload["paths"] if p not in sys.path]
spec = importlib.util.spec_from_file_location("kernellab.gpu.device", payload["device_py"])
dev = importlib.util.module_from_spec(spec)
sys.modules["kernellab.gpu.device"] = dev
spec.loader.exec_module(dev)
facts = dev.DeviceFacts(**dict(payload["facts"], cc=tuple(payload["facts"]["cc"])))
dev.mode = lambda: "gpu"
dev.facts = lambda: facts
import kernellab.gpu
kernellab.gpu.device = dev   # a module found in sys.modules is not set on its package by import
from kernellab.kernels import ptxas
if "requests" in payload:
    ptxas.serve(payload["requests"])
else:
    ptxas.serve_lines(sys.stdin, payload["lineinfo"])
"""


CHILD_TIMEOUT = 900   # seconds a compile child may take over one batch of requests


def _child_payload(course: Path | None = None, **what) -> str:
    """The child's start: this process's import path and device facts. `course`: a copy of the
    course (a grading workspace) whose kernellab the child imports first, since a child that
    runs as another user may not be able to read this one's."""
    paths, device_py = [p for p in sys.path if isinstance(p, str)], Path(device.__file__).resolve()
    if course is not None and (Path(course) / "kernellab" / "gpu" / "device.py").is_file():
        paths, device_py = [str(course), *paths], Path(course) / "kernellab" / "gpu" / "device.py"
    return json.dumps({"paths": paths, "device_py": str(device_py),
                       "facts": dataclasses.asdict(device.facts()), **what})


def _child_env() -> dict:
    """The compile child compiles for real, with CUDA's JIT cache off: a link whose code the cache
    already holds prints no ptxas figures. On an H100 (2026-12-07) the child's log held none for
    Lab 06's linear_relu_kernel once the same code had been compiled on the GPU under the same
    HOME, and held them with CUDA_CACHE_DISABLE=1."""
    return dict(os.environ, NUMBA_ENABLE_CUDASIM="0", KERNELLAB_DEVICE="gpu", CUDA_CACHE_DISABLE="1")


def run_child(requests: list[dict]) -> list[dict]:
    """Compile every request in one child process; one answer per request: {"ok": {"figures",
    "cc", "lto", "log"[, "ptx"]}} or {"kind": "lookup" | "compile", "error": one line}."""
    proc = subprocess.run([sys.executable, "-c", _CHILD_BOOTSTRAP], input=_child_payload(requests=requests),
                          capture_output=True, text=True, env=_child_env(), timeout=CHILD_TIMEOUT)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT_MARK):
            return json.loads(line[len(_RESULT_MARK):])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    raise RuntimeError(f"the compile child process failed (exit {proc.returncode}):\n{tail}")


def _forward_lines(stream, lines) -> None:
    """Every line of a child's output into a queue, then None at its end."""
    for line in stream:
        lines.put(line)
    lines.put(None)


class CompileServer:
    """One compile child kept for many batches of requests (numba imports once, and it can start
    while the caller does other work): `ask(requests)` answers as `run_child` does. A child that
    dies or stalls is reported as a RuntimeError and replaced at the next `ask`. `lineinfo`:
    every request compiles with line info (device functions keep their own lines)."""

    def __init__(self, lineinfo: bool = False, sandbox=None):
        """`sandbox`, where given, starts the child: it has `command(args)` and `options(env)`
        (the subprocess keyword arguments), as kernellab.grading.sandbox's workspaces do, for
        a child that loads student code."""
        import threading
        self.lineinfo, self._lock, self._proc = lineinfo, threading.Lock(), None
        self.sandbox = sandbox

    def start(self) -> "CompileServer":
        import queue
        import tempfile
        import threading
        with self._lock:
            if self._proc is None:
                self._stderr = tempfile.TemporaryFile(mode="w+")
                args, options = [sys.executable, "-c", _CHILD_BOOTSTRAP], {"env": _child_env()}
                if self.sandbox is not None:
                    args, options = self.sandbox.command(args), self.sandbox.options(_child_env())
                self._proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=self._stderr, text=True, **options)
                self._proc.stdin.write(_child_payload(getattr(self.sandbox, "course", None),
                                                      lineinfo=self.lineinfo) + "\n")
                self._proc.stdin.flush()
                self._lines = queue.Queue()
                threading.Thread(target=_forward_lines, args=(self._proc.stdout, self._lines), daemon=True).start()
        return self

    def ask(self, requests: list[dict]) -> list[dict]:
        import queue
        self.start()
        with self._lock:
            try:
                self._proc.stdin.write(json.dumps(requests) + "\n")
                self._proc.stdin.flush()
                while (line := self._lines.get(timeout=CHILD_TIMEOUT)) is not None:
                    if line.startswith(_RESULT_MARK):
                        return json.loads(line[len(_RESULT_MARK):])
                why = f"exit {self._proc.wait()}"
            except (OSError, queue.Empty) as exc:
                why = "no answer within its time" if isinstance(exc, queue.Empty) else str(exc)
            self._stderr.seek(0)
            tail = "\n".join(self._stderr.read().strip().splitlines()[-15:])
            self._stop()
        raise RuntimeError(f"the compile child process failed ({why}):\n{tail}")

    def _stop(self):
        if self._proc is not None:
            self._proc.kill()
            self._proc.wait()
            self._stderr.close()
            self._proc = None

    def close(self):
        with self._lock:
            if self._proc is not None:
                self._proc.stdin.close()
                try:
                    self._proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
                self._stop()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()


class _CompileTarget:
    """Stands in for the current device while the child compiles: numba-cuda asks it for the cc."""

    id = 0
    compute_capability = (9, 0)


def serve(requests: list[dict]) -> None:
    """The child's work: compile every request and print one JSON answer list."""
    if requests:
        _CompileTarget.compute_capability = tuple(requests[0]["cc"])
    _compile_without_a_device(device_lineinfo=any(r.get("lineinfo") for r in requests))
    _answer_all(requests)


def serve_lines(lines, lineinfo: bool) -> None:
    """A CompileServer's child: one JSON list of requests per line, one answer line each."""
    _compile_without_a_device(device_lineinfo=lineinfo)
    for line in lines:
        _answer_all(json.loads(line))


def _answer_all(requests: list[dict]) -> None:
    answers = []
    for request in requests:
        _CompileTarget.compute_capability = tuple(request["cc"])
        answers.append(_answer(request))
    print(_RESULT_MARK + json.dumps(answers), flush=True)


def _compile_without_a_device(device_lineinfo: bool = False) -> None:
    """Point numba-cuda's two device queries in the compile path at _CompileTarget, and defer
    kernels declared with an eager signature (whose compile would also load them on a GPU).
    device_lineinfo: device functions keep their own lines when inlined into a kernel compiled
    with line info (the grader's check names the line inside the device function)."""
    import numba.cuda
    from numba.cuda import codegen, dispatcher
    from numba.cuda.core import sigutils

    dispatcher.get_current_device = lambda: _CompileTarget
    original = codegen.CUDACodeLibrary._ensure_cc
    codegen.CUDACodeLibrary._ensure_cc = lambda self, cc: (
        original(self, cc) if cc is not None else _arch_cc(_CompileTarget.compute_capability))
    real_jit = numba.cuda.jit

    def lazy_jit(func_or_sig=None, device=False, **options):
        eager = sigutils.is_signature(func_or_sig) or isinstance(func_or_sig, list)
        if device and device_lineinfo:
            options.setdefault("lineinfo", True)
        if device or not eager:
            return real_jit(func_or_sig, device=device, **options)

        def decorate(fn):
            kernel = real_jit(fn, **options)
            kernel._kernellab_signatures = func_or_sig if isinstance(func_or_sig, list) else [func_or_sig]
            return kernel
        return decorate

    numba.cuda.jit = lazy_jit


def _answer(request: dict) -> dict:
    try:
        kernel = _find_kernel(request)
    except Exception as exc:
        where = request["file"] or request["module"]
        return {"kind": "lookup", "error": f"cannot load kernel {request['name']} from {where}: "
                                           f"{jit.first_useful_line(exc)}"}
    argtypes = pickle.loads(base64.b64decode(request["argtypes"]))
    source_file = inspect.getsourcefile(kernel.py_func) or ""
    try:
        figures, log, used_lto, library = compile_and_link(
            kernel.py_func, argtypes, kernel.targetoptions, request["lto"],
            lineinfo=request.get("lineinfo", False),
            figures_optional=request.get("figures_optional", False))
    except Exception as exc:
        return {"kind": "compile", "error": compile_failure(request["name"], argtypes, exc,
                                                            source_file)}
    ok = {"figures": figures, "cc": request["cc"], "lto": used_lto, "log": log}
    if request.get("return_ptx"):
        ok["ptx"] = library.get_asm_str(cc=library._ensure_cc(None))
    return {"ok": ok}


_LOADED: dict[tuple, object] = {}     # (file, a hash of its text, module name, cc) -> its module


def _module_from_file(path: str, name: str):
    """The module in `path`, executed once per version of the file and target: its kernels then
    share their device functions' compiles (a lab's reductions, say), where a fresh module per
    kernel compiled each device function again for every kernel that calls it (the grader's
    compile check of a whole submission took 24 s of a 2-core machine's CPU that way, 12 s so)."""
    name = name if name != "__main__" else "_kernellab_kernel_source"
    key = (path, hashlib.sha256(Path(path).read_bytes()).hexdigest(), name,
           _CompileTarget.compute_capability)
    if key not in _LOADED:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        _LOADED[key] = module
    sys.modules[name] = _LOADED[key]
    return _LOADED[key]


def _find_kernel(request: dict):
    """Load the kernel's module from its file (the grader's copy of a submission may shadow a
    module of the same name), else by name, and find the dispatcher."""
    from numba.cuda.dispatcher import CUDADispatcher

    if request["file"] and Path(request["file"]).is_file():
        module = _module_from_file(request["file"], request["module"])
    elif request["module"] != "__main__":
        module = importlib.import_module(request["module"])
    else:
        raise ValueError("the kernel must be defined in a .py file (not a notebook cell)")
    found = module
    for part in request["name"].split("."):
        found = getattr(found, part, None)
    if isinstance(found, CUDADispatcher):
        return found
    if "<locals>" in request["qualname"]:
        raise ValueError("the kernel must be defined at module level, not inside a function")
    raise ValueError(f"{module.__name__} has no kernel {request['name']}")
