"""What a compiled Numba kernel uses per thread and per block: registers, shared memory, stack.

Two sources give the same figures:
- "driver" (GPU only): the loaded function's attributes, read through numba-cuda's dispatcher.
- "ptxas": compile the kernel exactly as numba-cuda's dispatcher does (same options, same
  PTX-or-LTO-IR path, same `sm_XXa` target, same nvJitLink link) and read the verbose
  `ptxas info` lines. Needs no GPU. shared/NOTES.md: through LTO-IR, numba-cuda's default when
  nvJitLink is present, these equalled what the H200 driver reported.

In the simulator, `@cuda.jit` gives a FakeCUDAKernel and `numba.cuda` cannot compile in-process,
so the ptxas figures come from a child process that imports the kernel's module with the real
`numba.cuda` (which compiles without a driver) and looks the kernel up by the name it has there.
Kernels must therefore be module-level functions of an importable file. One child answers a list
of requests, and answers are cached per (file and its mtime, kernel, signature, cc).

`jit(**options)` is `cuda.jit` that accepts the GPU-only options (`max_registers`, `lineinfo`,
`launch_bounds`, `lto`, `forceinline`) in the simulator too: it drops them there, and records
them on the kernel (`_kernellab_options`) in both modes; the child compiles with them.
"""

from __future__ import annotations

import base64
import dataclasses
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
from kernellab import occupancy as occ

GPU_ONLY_OPTIONS = ("max_registers", "lineinfo", "launch_bounds", "lto", "forceinline")
METHODS = ("auto", "driver", "ptxas")
_RESULT_MARK = "__kernellab_resources__ "


class KernelCompileError(ValueError):
    """The kernel did not compile; the message is Numba's first useful line."""


@dataclasses.dataclass(frozen=True)
class Resources:
    """Per-thread and per-block resources of one kernel compiled for one signature and cc."""

    registers_per_thread: int
    static_shared_bytes: int            # per block, as declared (without the driver's reservation)
    local_bytes: int                    # stack frame per thread (local arrays, spills)
    spill_stores_bytes: int | None      # ptxas only: the driver does not report spills
    spill_loads_bytes: int | None
    cc: tuple[int, int]
    source: str                         # "driver" or "ptxas"
    lto: bool | None = None             # ptxas: compiled through LTO-IR (True) or PTX (False)
    log: str = dataclasses.field(default="", repr=False, compare=False)  # ptxas: the linker's info log


# --- the jit decorator -------------------------------------------------------------------------

def jit(func_or_sig=None, **options):
    """`cuda.jit` that records its options on the kernel and, in the simulator, drops the options
    the simulator rejects (GPU_ONLY_OPTIONS) so a lab file runs unchanged in both modes.

        @jit(max_registers=32)
        def kernel(x, out): ...
    """
    cuda = device.cuda()
    recorded = dict(options)
    if device.is_simulator():
        options = {k: v for k, v in options.items() if k not in GPU_ONLY_OPTIONS}
    is_function = inspect.isfunction(func_or_sig)
    signatures = None if is_function or func_or_sig is None else func_or_sig

    def decorate(fn):
        kernel = cuda.jit(fn, **options) if signatures is None else cuda.jit(signatures, **options)(fn)
        kernel._kernellab_options = recorded
        if signatures is not None:
            kernel._kernellab_signatures = signatures if isinstance(signatures, list) else [signatures]
        return kernel

    return decorate(func_or_sig) if is_function else decorate


# --- finding kernels and their signatures ------------------------------------------------------

def _python_function(kernel):
    """The kernel's Python function; TypeError for anything but a (non-device) CUDA kernel."""
    device.setup()
    if device.is_simulator():
        from numba.cuda.simulator.kernel import FakeCUDAKernel as kernel_type
    else:
        from numba.cuda.dispatcher import CUDADispatcher as kernel_type
    if not isinstance(kernel, kernel_type):
        raise TypeError(f"{kernel!r} is not a Numba CUDA kernel (a function decorated with "
                        f"@cuda.jit); got {type(kernel).__name__}")
    is_device_function = kernel._device if device.is_simulator() else kernel.targetoptions.get("device")
    if is_device_function:
        raise TypeError(f"{kernel.py_func.__qualname__} is a device function (device=True): "
                        "only kernels have launch resources")
    return kernel.py_func


def resolve_kernel(spec: str):
    """The kernel named by "path/to/file.py:NAME" or "package.module:NAME", imported in this
    process's device mode (for the CLI: `kernellab occupancy labs/lab06_occupancy.py:KERNEL`)."""
    path_or_module, sep, name = spec.rpartition(":")
    if not sep or not path_or_module or not name:
        raise ValueError(f"kernel spec must look like 'labs/lab06_occupancy.py:KERNEL', not {spec!r}")
    if path_or_module.endswith(".py") or os.sep in path_or_module or "/" in path_or_module:
        module = _import_file(Path(path_or_module))
    else:
        module = importlib.import_module(path_or_module)
    kernel = module
    for part in name.split("."):
        kernel = getattr(kernel, part, None)
        if kernel is None:
            found = sorted(k for k, v in vars(module).items() if _is_kernel(v))
            raise ValueError(f"{module.__name__} has no {name!r}; "
                             f"its kernels: {', '.join(found) or 'none'}")
    _python_function(kernel)
    return kernel


def _is_kernel(value) -> bool:
    try:
        _python_function(value)
    except TypeError:
        return False
    return True


def _import_file(path: Path):
    """Import a .py file under its dotted name from the working directory (labs/x.py ->
    labs.x), so that the module is the one other imports get and the child can import it."""
    path = path.resolve()
    if not path.is_file():
        raise ValueError(f"no such file: {path}")
    cwd = Path.cwd().resolve()
    for root in [cwd] + [Path(p).resolve() for p in sys.path if p]:
        try:
            parts = path.with_suffix("").relative_to(root).parts
        except ValueError:
            continue
        if all(part.isidentifier() for part in parts):
            if str(root) not in sys.path and not (root == cwd and "" in sys.path):
                sys.path.insert(0, str(root))
            return importlib.import_module(".".join(parts))
    raise ValueError(f"{path} is not importable as a module from {cwd} or sys.path")


def _kernel_name(kernel) -> str:
    """The name the kernel is bound to in its module (two kernels may wrap one function),
    else its function's qualified name."""
    fn = _python_function(kernel)
    for name, value in vars(sys.modules.get(fn.__module__, object)).items():
        if value is kernel:
            return name
    return fn.__qualname__


def declared_signatures(kernel) -> list:
    """Signatures a kernel declares: its module's `SIGNATURES = {"name": "void(...)" or [...]}`
    entry, else those given to `jit("void(...)")`."""
    fn = _python_function(kernel)
    table = getattr(sys.modules.get(fn.__module__), "SIGNATURES", None) or {}
    declared = table.get(_kernel_name(kernel))
    if declared is None:
        declared = getattr(kernel, "_kernellab_signatures", None) or []
    return list(declared) if isinstance(declared, (list, tuple)) else [declared]


def _argtypes(kernel, signature_or_example_args) -> tuple:
    """Numba argument types from a signature string, a Signature, numba types or example values."""
    if signature_or_example_args is None:
        declared = declared_signatures(kernel)
        if not declared:
            fn = _python_function(kernel)
            raise ValueError(f"no signature given for {_kernel_name(kernel)}, and {fn.__module__} "
                             "declares none: pass one, or add SIGNATURES = {name: 'void(...)'} to it")
        signature_or_example_args = declared[0]
    if device.is_simulator():
        import numba
        from numba.core import sigutils, types
        typeof = numba.typeof
    else:
        from numba.cuda import types
        from numba.cuda.core import sigutils
        typeof = kernel.typeof_pyval
    sig = signature_or_example_args
    if isinstance(sig, str) or hasattr(sig, "return_type"):
        try:
            args, ret = sigutils.normalize_signature(sig)
        except Exception as exc:
            raise ValueError(f"bad signature {sig!r}: {_first_useful_line(exc)}") from None
        if ret not in (None, types.void, types.none):
            raise ValueError(f"bad signature {sig!r}: a kernel returns void, not {ret}")
        return tuple(args)
    if not isinstance(sig, (tuple, list)):
        raise TypeError("signature_or_example_args must be a signature string such as "
                        "'void(float32[::1])', numba types, or a tuple of example arguments; "
                        f"got {type(sig).__name__}")
    out = []
    for value in sig:
        if isinstance(value, types.Type):
            out.append(value)
            continue
        try:
            out.append(typeof(value))
        except Exception as exc:
            raise TypeError(f"cannot derive a Numba type from example argument {value!r} "
                            f"({type(value).__name__}): {_first_useful_line(exc)}") from None
    return tuple(out)


# --- resources -----------------------------------------------------------------------------------

_CACHE: dict = {}


def kernel_resources(kernel, signature_or_example_args=None, cc=None, *, method: str = "auto",
                     lto: bool | None = None) -> Resources:
    """Registers, static shared memory, stack frame and spills of `kernel` compiled for a signature.

    signature_or_example_args: "void(float32[::1], ...)", numba types, a tuple of example
    arguments, or None for the kernel's declared signature (`declared_signatures`).
    cc: the target (any spelling occupancy accepts); default the device's (in the simulator, the
    reference device's). method: "driver" (GPU, the device's cc only), "ptxas", or "auto" (driver
    where it can, else ptxas). lto (ptxas): None compiles as the kernel's dispatcher would
    (numba-cuda uses LTO-IR when nvJitLink is present); True/False forces LTO-IR / PTX.
    """
    return kernel_resources_batch([(kernel, signature_or_example_args)], cc, method=method, lto=lto)[0]


def kernel_resources_batch(kernels_and_signatures, cc=None, *, method: str = "auto",
                           lto: bool | None = None) -> list[Resources]:
    """`kernel_resources` for several (kernel, signature) pairs with at most one child process.
    Every answer, failures included, is cached before the first failure is raised."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    target = occ.architecture(cc).cc if cc is not None else tuple(device.facts().cc)
    on_device = not device.is_simulator() and target == tuple(device.facts().cc)
    if method == "driver" and not on_device:
        where = "the simulator" if device.is_simulator() else f"cc {target[0]}.{target[1]} on this GPU"
        raise RuntimeError(f"method='driver' needs a GPU of the requested cc; not available in {where}")
    use_driver = method == "driver" or (method == "auto" and on_device and lto is None)

    keys, pending = [], {}
    for kernel, sig in kernels_and_signatures:
        fn, name = _python_function(kernel), _kernel_name(kernel)
        argtypes = _argtypes(kernel, sig)
        options = repr(sorted({**getattr(kernel, "targetoptions", {}),
                               **(getattr(kernel, "_kernellab_options", None) or {})}.items()))
        key = (_source_stamp(fn), fn.__module__, name, str(argtypes), options, target,
               "driver" if use_driver else lto)
        keys.append(key)
        if key in _CACHE or key in pending:
            continue
        if use_driver:
            _CACHE[key] = _guarded(name, argtypes, _driver_resources, kernel, argtypes, target)
        elif on_device:
            _CACHE[key] = _guarded(name, argtypes, _ptxas_in_process, fn, kernel.targetoptions,
                                   argtypes, target, lto)
        else:
            pending[key] = _child_request(fn, name, argtypes, target, lto)
    if pending:
        for key, answer in zip(pending, _run_child(list(pending.values()))):
            _CACHE[key] = _from_answer(answer)
    results = [_CACHE[key] for key in keys]
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


def _guarded(name, argtypes, work, *args):
    """work(*args), or the exception it raised, as the cache keeps it."""
    try:
        return work(*args)
    except Exception as exc:  # Numba's errors: report the first useful line, not the traceback
        return KernelCompileError(_compile_failure(name, argtypes, exc))


def _compile_failure(name, argtypes, exc, source_file: str = "") -> str:
    """One line: the kernel, its argument types, Numba's reason and, when the compile stopped in
    `source_file` (the kernel's own file), that file's line, wherever Numba's message points."""
    types = ", ".join(map(str, argtypes))
    line = _line_in_file(exc, source_file) if source_file else None
    if line is None:
        return f"{name}({types}) did not compile: {_first_useful_line(exc)}"
    reason = _first_useful_line(exc, with_location=False)
    return f"{name}({types}) did not compile: {reason} at {_source_line(source_file, line, ', line ')}"


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


def _source_line(path: str, line: int, separator: str = ":") -> str:
    """'labs/lab02_vertical_fusion.py:123: `y = x * 0.5`': the path as the student knows it
    (relative to the working directory when it is under it) and the line's text."""
    shown = Path(path)
    try:
        shown = shown.resolve().relative_to(Path.cwd().resolve())
    except (ValueError, OSError):
        pass
    text = _line_text(path, line)
    return f"{shown}{separator}{line}" + (f": `{text}`" if text is not None else "")


def _line_text(path: str, line: int) -> str | None:
    try:
        return Path(path).read_text().splitlines()[line - 1].strip()
    except (OSError, IndexError):
        return None


def _source_stamp(fn) -> tuple:
    try:
        path = inspect.getsourcefile(fn) or ""
        return path, os.stat(path).st_mtime_ns
    except (TypeError, OSError):
        return "", 0


def compiled_overload(kernel, signature_or_example_args=None):
    """The dispatcher's compiled kernel (numba-cuda's _Kernel) for a signature; GPU only."""
    if device.is_simulator():
        raise RuntimeError("compiled_overload needs a GPU: the simulator compiles nothing")
    _python_function(kernel)
    return kernel.compile(_argtypes(kernel, signature_or_example_args))


def _driver_resources(kernel, argtypes, target) -> Resources:
    overload = kernel.compile(argtypes)
    return Resources(
        registers_per_thread=int(overload.regs_per_thread),
        static_shared_bytes=int(overload.shared_mem_per_block),
        local_bytes=int(overload.local_mem_per_thread),
        spill_stores_bytes=None,
        spill_loads_bytes=None,
        cc=target,
        source="driver",
    )


def _ptxas_in_process(fn, targetoptions, argtypes, target, lto) -> Resources:
    figures, log, used_lto, _ = _compile_and_link(fn, argtypes, targetoptions, lto)
    return Resources(**figures, cc=target, source="ptxas", lto=used_lto, log=log)


def occupancy_of(kernel, signature_or_example_args, block_size: int, dynamic_shared: int = 0,
                 cc=None, *, carveout: int | None = None) -> occ.Occupancy:
    """The occupancy calculator's answer for this kernel's resources at `block_size`.
    carveout None uses the kernel's own `shared_memory_carveout` option (default -1)."""
    found = kernel_resources(kernel, signature_or_example_args, cc)
    if carveout is None:
        carveout = _carveout_option(kernel)
    return occ.occupancy(found.cc, block_size, found.registers_per_thread, found.static_shared_bytes,
                         dynamic_shared, carveout=carveout)


def _carveout_option(kernel) -> int:
    """numba-cuda's shared_memory_carveout option as a percentage (-1: the driver default)."""
    options = getattr(kernel, "_kernellab_options", None) or getattr(kernel, "targetoptions", {})
    value = options.get("shared_memory_carveout")
    named = {"default": -1, "maxl1": 0, "maxshared": 100}
    if value is None:
        return -1
    if isinstance(value, str):
        return named[value.lower()]
    return int(value)


# --- compiling as numba-cuda's dispatcher does -----------------------------------------------------

def _arch_cc(cc: tuple[int, int]) -> tuple:
    """numba-cuda's link target: the device's cc, with the 'a' suffix from 9.0 on (sm_90a)."""
    return (cc[0], cc[1], "a" if tuple(cc) >= (9, 0) else "")


def _compile_and_link(fn, argtypes, targetoptions, lto, lineinfo=False):
    """Build the kernel with numba-cuda's own _Kernel (what CUDADispatcher.compile builds), then
    link its code as CUDACodeLibrary.get_cubin does, with verbose output added.
    Returns (figures, link log, whether it went through LTO-IR, the code library)."""
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
    return parse_ptxas_log(log, library._entry_name), log, bool(library._lto), library


_PROPERTIES = re.compile(r"(?:Compiling entry function|Function properties for) '?([^'\s:]+)'?")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
_LINKED = re.compile(r"^info\s*: used (\d+) registers.*?(\d+) stack, (\d+) bytes smem")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str, entry: str) -> dict:
    """Resources of function `entry` from a verbose link log.

    ptxas prints, per function, "N bytes stack frame, S bytes spill stores, L bytes spill loads"
    and "Used R registers, ..., M bytes smem". Compiled from PTX (not LTO-IR), numba's shared
    arrays are module-level symbols that ptxas does not charge to the function; nvJitLink's own
    summary after the link ("used R registers, ..., M bytes smem") then gives the shared size.
    Caution: for sm_90a that summary says 2048 bytes for a 1 KiB array where ptxas, through
    LTO-IR, says 1024; `driver_comparison` on a GPU shows which the driver agrees with.
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
        raise KernelCompileError(f"no ptxas figures for {entry} in the link log:\n{log.strip()}")
    figures.setdefault("local_bytes", 0)
    figures.setdefault("spill_stores_bytes", 0)
    figures.setdefault("spill_loads_bytes", 0)
    if figures.get("static_shared_bytes") is None:
        figures["static_shared_bytes"] = 0
    return figures


def _first_useful_line(exc: BaseException, with_location: bool = True) -> str:
    """Numba's errors open with 'Failed in cuda mode pipeline ...' and colour codes; keep the
    first line that says what went wrong, and (with_location) the source location when the
    message has one."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    useful = [ln for ln in lines if not ln.startswith(("Failed in ", "During: "))]
    where = next((ln for ln in lines if ln.startswith("File ") and ", line " in ln), "")
    if not where:  # lowering errors say 'During: lowering "..." at <file> (LINE)'
        match = next((re.search(r" at (\S+) \((\d+)\)$", ln) for ln in lines
                      if ln.startswith("During: lowering")), None)
        where = f"File {match.group(1)}, line {match.group(2)}" if match else ""
    first = useful[0] if useful else (lines[0] if lines else type(exc).__name__)
    if first.startswith("NRT required") or "build_map" in first or "build_set" in first:
        first += " (lists, dicts and sets need Numba's runtime, which GPU kernels don't have)"
    if first.endswith(":") and len(useful) > 1:       # "No implementation ... for signature:"
        first = f"{first} {useful[1].lstrip('> ')}"
    location = f" ({where.rstrip(':')})" if with_location and where and where != first else ""
    return f"{type(exc).__name__}: {first}{location}"


# --- the child process -----------------------------------------------------------------------------

def _child_request(fn, name, argtypes, target, lto) -> dict:
    source, _ = _source_stamp(fn)
    return {
        "module": fn.__module__,
        "file": source,
        "name": name,
        "qualname": fn.__qualname__,
        "argtypes": base64.b64encode(pickle.dumps(argtypes)).decode(),
        "cc": list(target),
        "lto": lto,
    }


def _from_answer(answer: dict):
    if "error" in answer:
        return (ValueError if answer["kind"] == "lookup" else KernelCompileError)(answer["error"])
    figures = answer["ok"]
    return Resources(**figures["figures"], cc=tuple(figures["cc"]), source="ptxas",
                     lto=figures["lto"], log=figures["log"])


# kernellab/__init__ picks the device mode on import, and without a driver it would pick the
# simulator; the child must compile with the real numba.cuda, so it loads kernellab.gpu.device first
# and tells it "gpu" (and the parent's device facts) before anything imports kernellab.
_CHILD_BOOTSTRAP = r"""
import importlib.util, json, sys
payload = json.loads(sys.stdin.read())
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
from kernellab.kernels import resources
resources._serve(payload["requests"])
"""


def _run_child(requests: list[dict]) -> list[dict]:
    payload = {
        "paths": [p for p in sys.path if isinstance(p, str)],
        "device_py": str(Path(device.__file__).resolve()),
        "facts": dataclasses.asdict(device.facts()),
        "requests": requests,
    }
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0", KERNELLAB_DEVICE="gpu")
    proc = subprocess.run([sys.executable, "-c", _CHILD_BOOTSTRAP], input=json.dumps(payload),
                          capture_output=True, text=True, env=env, timeout=900)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT_MARK):
            return json.loads(line[len(_RESULT_MARK):])
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
    raise RuntimeError(f"the compile child process failed (exit {proc.returncode}):\n{tail}")


class _CompileTarget:
    """Stands in for the current device while the child compiles: numba-cuda asks it for the cc."""

    id = 0
    compute_capability = (9, 0)


def _serve(requests: list[dict]) -> None:
    """The child's work: compile every request and print one JSON answer list."""
    if requests:
        _CompileTarget.compute_capability = tuple(requests[0]["cc"])
    _compile_without_a_device(device_lineinfo=any(r.get("lineinfo") for r in requests))
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
                                           f"{_first_useful_line(exc)}"}
    argtypes = pickle.loads(base64.b64decode(request["argtypes"]))
    source_file = inspect.getsourcefile(kernel.py_func) or ""
    try:
        figures, log, used_lto, library = _compile_and_link(
            kernel.py_func, argtypes, kernel.targetoptions, request["lto"],
            lineinfo=request.get("lineinfo", False))
    except Exception as exc:
        return {"kind": "compile", "error": _compile_failure(request["name"], argtypes, exc,
                                                             source_file)}
    if request.get("float32_only"):
        ptx = library.get_asm_str(cc=library._ensure_cc(None))
        found = float64_arithmetic(ptx)
        if found:
            return {"kind": "precision", "error": _float64_message(request["name"], found)}
    return {"ok": {"figures": figures, "cc": request["cc"], "lto": used_lto, "log": log}}


def _find_kernel(request: dict):
    """Load the kernel's module from its file (the grader's copy of a submission may shadow a
    module of the same name), else by name, and find the dispatcher."""
    from numba.cuda.dispatcher import CUDADispatcher

    if request["file"] and Path(request["file"]).is_file():
        name = request["module"] if request["module"] != "__main__" else "_kernellab_kernel_source"
        spec = importlib.util.spec_from_file_location(name, request["file"])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
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


# --- the grader's compile check ---------------------------------------------------------------------

GPU_CHECK_CC = (8, 0)   # a real target every kernel in the course must compile for


def compile_request(kernel, argtypes, cc=GPU_CHECK_CC) -> dict:
    """A JSON-able request to compile `kernel` for `argtypes` in the compile child, with line
    info (through PTX, whose `.loc` lines the checks read), and checked for float64 arithmetic
    when it is a float32 kernel (`is_float32_kernel`)."""
    request = _child_request(_python_function(kernel), _kernel_name(kernel), tuple(argtypes),
                             occ.architecture(cc).cc, False)
    request.update(lineinfo=True, float32_only=is_float32_kernel(kernel, argtypes))
    return request


def _float_types(argtypes) -> set[str]:
    """The float types among a signature's arguments, scalars and array elements alike."""
    found = set()
    for argtype in argtypes:
        name = str(getattr(argtype, "dtype", argtype))
        if name.startswith("float"):
            found.add(name)
    return found


def is_float32_kernel(kernel, argtypes) -> bool:
    """A kernel whose float arguments are all float32, as launched and as its lab declares it
    (`SIGNATURES`): its arithmetic must stay float32. A kernel declared or launched with a
    float64 argument (Lab 01's `scale`, Lab 08's coefficients) may compute in float64."""
    declared = [_argtypes(kernel, sig) for sig in declared_signatures(kernel)]
    return all(_float_types(types) == {"float32"} for types in [tuple(argtypes), *declared])


_LOC = re.compile(r"^\s*\.loc\s+(\d+)\s+(\d+)\s+\d+")
_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]+)"', re.MULTILINE)
_OPCODE = re.compile(r"^\s*(?:@!?%p\d+\s+)?([a-z][a-z0-9]*(?:\.[a-z0-9]+)+)\s")


@dataclasses.dataclass(frozen=True)
class Float64Use:
    """The first float64 instruction of a kernel's PTX and the source line it came from."""

    instruction: str
    file: str | None
    line: int | None


def float64_arithmetic(ptx: str) -> Float64Use | None:
    """The first instruction that computes in float64 (add/mul/fma/div/selp/setp/max/cvt into
    or out of .f64, ...), with the file and line of the `.loc` before it; None if there is none.
    Loads, stores and moves are not arithmetic: a float32 kernel has none of .f64 anyway."""
    files = dict(_FILE.findall(ptx))
    where = (None, None)
    for text in ptx.splitlines():
        if (loc := _LOC.match(text)):
            where = (files.get(loc.group(1)), int(loc.group(2)))
            continue
        opcode = _OPCODE.match(text)
        if opcode is None:
            continue
        parts = opcode.group(1).split(".")
        if "f64" in parts and parts[0] not in ("ld", "st", "mov"):
            file, line = where
            return Float64Use(" ".join(text.split()).rstrip(";"), file, line or None)
    return None


def _float64_message(kernel_name: str, found: Float64Use) -> str:
    advice = "write float32(0.0) or a float32 variable"
    if found.file is None or found.line is None:
        return (f"lab kernel `{kernel_name}` computes in float64 (its first float64 instruction: "
                f"`{found.instruction}`); {advice}")
    function = _function_at(found.file, found.line)
    name = function[0] if function else kernel_name
    message = f"lab kernel `{name}` computes in float64 at {_source_line(found.file, found.line)}"
    started = _float_literal_start(function, found.line) if function else None
    if started:
        variable, line = started
        message += f" (`{variable}` starts as a float64 at line {line}: `{_line_text(found.file, line)}`)"
    return f"{message}; {advice}"


_AUGMENTED = re.compile(r"^\s*(\w+)(?:\[[^\]]*\])?\s*[-+*/]=")
_LITERAL_START = r"^\s*{}\s*=\s*[-+]?(\d+\.\d*|\.\d+|\d+(\.\d*)?[eE][-+]?\d+)\s*(#.*)?$"


def _float_literal_start(function, line: int):
    """For `acc += ...` at `line`: the variable and the earlier line of the function that set it
    to a bare float literal (`acc = 0.0`), the float64 the sum inherits; else None."""
    _, start, lines = function
    augmented = _AUGMENTED.match(lines[line - start])
    if augmented is None:
        return None
    literal = re.compile(_LITERAL_START.format(re.escape(augmented.group(1))))
    for number in range(line - 1, start - 1, -1):
        if literal.match(lines[number - start]):
            return augmented.group(1), number
    return None


def _function_at(path: str, line: int):
    """(name, first line, source lines) of the function (kernel or device function) whose source
    holds `path`:`line`, among the modules loaded from that file; None if none does."""
    wanted = os.path.realpath(path)
    for module in list(sys.modules.values()):
        if os.path.realpath(getattr(module, "__file__", None) or "") != wanted:
            continue
        for value in list(vars(module).values()):
            fn = getattr(value, "py_func", value)
            if not inspect.isfunction(fn) or os.path.realpath(fn.__code__.co_filename) != wanted:
                continue
            try:
                lines, start = inspect.getsourcelines(fn)
            except (OSError, TypeError):
                continue
            if start <= line < start + len(lines):
                return fn.__name__, start, lines
    return None


def gpu_compile_errors(requests: list[dict]) -> list[str | None]:
    """Compile and link each request for a real GPU in one child: None if it did, else why not.

    The simulator runs Python that no GPU compiles (lists, dicts, most NumPy calls); this is
    what catches it, naming the kernel, its argument types and the offending line. A float32
    kernel (`compile_request` marks it) that computes in float64 fails too, naming the line.
    """
    if not requests:
        return []
    return [None if "ok" in answer else answer["error"] for answer in _run_child(requests)]


# --- checks for a GPU ------------------------------------------------------------------------------

def driver_comparison(kernels_and_signatures, block_sizes=(32, 64, 128, 256, 512, 1024),
                      dynamic_shared: int = 0) -> list[dict]:
    """On a GPU: for each (kernel, signature), the driver's resources against the ptxas figures
    (compiled as the dispatcher does, and through the other of PTX / LTO-IR), and the driver's
    active blocks per SM against the calculator fed either set of figures. One dict per kernel;
    `agree` is True when the default ptxas figures and every occupancy agree with the driver."""
    if device.is_simulator():
        raise RuntimeError("driver_comparison needs a GPU (KERNELLAB_DEVICE=gpu)")
    cc = tuple(device.facts().cc)
    rows = []
    for kernel, sig in kernels_and_signatures:
        driver = kernel_resources(kernel, sig, method="driver")
        ptxas = kernel_resources(kernel, sig, method="ptxas")
        other = kernel_resources(kernel, sig, method="ptxas", lto=not ptxas.lto)
        blocks = {}
        for block in block_sizes:
            blocks[block] = {
                "driver": occ.driver_active_blocks(kernel, sig, block, dynamic_shared),
                "calculator_driver_figures": occ.occupancy(
                    cc, block, driver.registers_per_thread, driver.static_shared_bytes,
                    dynamic_shared).active_blocks,
                "calculator_ptxas_figures": occ.occupancy(
                    cc, block, ptxas.registers_per_thread, ptxas.static_shared_bytes,
                    dynamic_shared).active_blocks,
            }
        same = ("registers_per_thread", "static_shared_bytes", "local_bytes")
        agree = (all(getattr(driver, f) == getattr(ptxas, f) for f in same)
                 and all(len(set(b.values())) == 1 for b in blocks.values()))
        rows.append({"kernel": _python_function(kernel).__qualname__, "signature": str(sig),
                     "driver": driver, "ptxas": ptxas, "ptxas_other_path": other,
                     "active_blocks": blocks, "agree": agree})
    return rows
