"""Which kernel, compiled from what: the `jit` decorator, finding kernels and their signatures,
and the cache of what their compiles gave.

`jit(**options)` is `cuda.jit` that accepts the GPU-only options (`max_registers`, `lineinfo`,
`launch_bounds`, `lto`, `forceinline`) in the simulator too: it drops them there, and records
them on the kernel (`_kernellab_options`) in both modes; the compile child (kernellab.kernels.ptxas)
compiles with them.

Kernels are looked up by the name they have in their module, because the compile child finds
them that way: they must be module-level functions of an importable file. A compile's answer is
cached per `compile_key`: the kernel's file and its mtime, its name, signature, options and cc.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
from pathlib import Path

from kernellab.gpu import device

GPU_ONLY_OPTIONS = ("max_registers", "lineinfo", "launch_bounds", "lto", "forceinline")


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

def python_function(kernel):
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
    python_function(kernel)
    return kernel


def _is_kernel(value) -> bool:
    try:
        python_function(value)
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


def kernel_name(kernel) -> str:
    """The name the kernel is bound to in its module (two kernels may wrap one function),
    else its function's qualified name."""
    fn = python_function(kernel)
    for name, value in vars(sys.modules.get(fn.__module__, object)).items():
        if value is kernel:
            return name
    return fn.__qualname__


def declared_signatures(kernel) -> list:
    """Signatures a kernel declares: its module's `SIGNATURES = {"name": "void(...)" or [...]}`
    entry, else those given to `jit("void(...)")`."""
    fn = python_function(kernel)
    table = getattr(sys.modules.get(fn.__module__), "SIGNATURES", None) or {}
    declared = table.get(kernel_name(kernel))
    if declared is None:
        declared = getattr(kernel, "_kernellab_signatures", None) or []
    return list(declared) if isinstance(declared, (list, tuple)) else [declared]


def numba_argtypes(kernel, signature_or_example_args) -> tuple:
    """Numba argument types from a signature string, a Signature, numba types or example values;
    None is the kernel's first declared signature."""
    if signature_or_example_args is None:
        declared = declared_signatures(kernel)
        if not declared:
            fn = python_function(kernel)
            raise ValueError(f"no signature given for {kernel_name(kernel)}, and {fn.__module__} "
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
            raise ValueError(f"bad signature {sig!r}: {first_useful_line(exc)}") from None
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
                            f"({type(value).__name__}): {first_useful_line(exc)}") from None
    return tuple(out)


def first_useful_line(exc: BaseException, with_location: bool = True) -> str:
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


# --- the cache -----------------------------------------------------------------------------------

CACHE: dict = {}
"""compile_key -> what that compile gave (its figures, or the exception it raised), for the life
of the process: a notebook that asks again gets the answer without a second child process."""


def source_stamp(fn) -> tuple[str, int]:
    """The function's source file and that file's mtime (a changed file is a different kernel)."""
    try:
        path = inspect.getsourcefile(fn) or ""
        return path, os.stat(path).st_mtime_ns
    except (TypeError, OSError):
        return "", 0


def compile_key(kernel, argtypes, cc: tuple[int, int], how) -> tuple:
    """Everything a compile's answer depends on: the kernel's file and mtime, module, name and closure,
    argument types, options (numba's and those `jit` recorded), target cc, and `how` it was
    compiled (the source of the figures and the PTX/LTO-IR path)."""
    fn = python_function(kernel)
    options = repr(sorted({**getattr(kernel, "targetoptions", {}),
                           **(getattr(kernel, "_kernellab_options", None) or {})}.items()))
    return (source_stamp(fn), fn.__module__, kernel_name(kernel), closure_values(fn), str(argtypes),
            options, cc, how)


def closure_values(fn) -> tuple:
    """The constants a kernel factory closed over (two kernels of one factory share a name: a
    block size or a trip count in the closure is what tells them apart)."""
    return tuple(repr(cell.cell_contents) for cell in fn.__closure__ or ())
