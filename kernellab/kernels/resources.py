"""What a compiled Numba kernel uses per thread and per block: registers, shared memory, stack.

Two sources give the same figures:
- "driver" (GPU only): the loaded function's attributes, read through numba-cuda's dispatcher.
- "ptxas": compile the kernel exactly as numba-cuda's dispatcher does and read ptxas's verbose
  report (kernellab.kernels.ptxas). Needs no GPU: in the simulator one child process compiles
  a whole batch.

Answers, failures included, are cached per kernel file and mtime, kernel, signature, options and
cc (kernellab.kernels.jit.compile_key), so asking again costs nothing.
"""

from __future__ import annotations

import dataclasses

from kernellab import occupancy
from kernellab.gpu import device
from kernellab.kernels import jit, ptxas

METHODS = ("auto", "driver", "ptxas")


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


def kernel_resources(kernel, signature_or_example_args=None, cc=None, *, method: str = "auto",
                     lto: bool | None = None) -> Resources:
    """Registers, static shared memory, stack frame and spills of `kernel` compiled for a signature.

    signature_or_example_args: "void(float32[::1], ...)", numba types, a tuple of example
    arguments, or None for the kernel's declared signature (`jit.declared_signatures`).
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
    target = occupancy.architecture(cc).cc if cc is not None else tuple(device.facts().cc)
    on_device = not device.is_simulator() and target == tuple(device.facts().cc)
    if method == "driver" and not on_device:
        where = "the simulator" if device.is_simulator() else f"cc {target[0]}.{target[1]} on this GPU"
        raise RuntimeError(f"method='driver' needs a GPU of the requested cc; not available in {where}")
    use_driver = method == "driver" or (method == "auto" and on_device and lto is None)

    keys, pending = [], {}
    for kernel, sig in kernels_and_signatures:
        fn, name = jit.python_function(kernel), jit.kernel_name(kernel)
        argtypes = jit.numba_argtypes(kernel, sig)
        key = jit.compile_key(kernel, argtypes, target, "driver" if use_driver else lto)
        keys.append(key)
        if key in jit.CACHE or key in pending:
            continue
        if use_driver:
            jit.CACHE[key] = _guarded(name, argtypes, _driver_resources, kernel, argtypes, target)
        elif on_device:
            jit.CACHE[key] = _guarded(name, argtypes, _ptxas_in_process, fn,
                                      getattr(kernel, "targetoptions", {}), argtypes, target, lto)
            if _cache_hid_the_figures(jit.CACHE[key]):
                pending[key] = ptxas.child_request(kernel, argtypes, target, lto)
        else:
            pending[key] = ptxas.child_request(kernel, argtypes, target, lto)
    if pending:
        for key, answer in zip(pending, ptxas.run_child(list(pending.values()))):
            jit.CACHE[key] = _from_answer(answer)
    results = [jit.CACHE[key] for key in keys]
    for result in results:
        if isinstance(result, Exception):
            raise result
    return results


def _guarded(name, argtypes, work, *args):
    """work(*args), or the exception it raised, as the cache keeps it."""
    try:
        return work(*args)
    except Exception as exc:  # Numba's errors: report the first useful line, not the traceback
        return ptxas.KernelCompileError(ptxas.compile_failure(name, argtypes, exc))


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


def _cache_hid_the_figures(result) -> bool:
    """A link in this process that printed no ptxas figures: CUDA's JIT cache held the code (a
    kernel this process already ran). The compile child, whose cache is off, is asked instead."""
    return isinstance(result, ptxas.KernelCompileError) and ptxas.NO_FIGURES in str(result)


def _ptxas_in_process(fn, targetoptions, argtypes, target, lto) -> Resources:
    figures, log, used_lto, _ = ptxas.compile_and_link(fn, argtypes, targetoptions, lto)
    return Resources(**figures, cc=target, source="ptxas", lto=used_lto, log=log)


def _from_answer(answer: dict):
    """The child's answer as the cache keeps it: Resources, or the exception to raise."""
    if "error" in answer:
        return (ValueError if answer["kind"] == "lookup" else ptxas.KernelCompileError)(answer["error"])
    figures = answer["ok"]
    return Resources(**figures["figures"], cc=tuple(figures["cc"]), source="ptxas",
                     lto=figures["lto"], log=figures["log"])


def occupancy_of(kernel, signature_or_example_args, block_size: int, dynamic_shared: int = 0,
                 cc=None, *, carveout: int | None = None) -> occupancy.Occupancy:
    """The occupancy calculator's answer for this kernel's resources at `block_size`.
    carveout None uses the kernel's own `shared_memory_carveout` option (default -1)."""
    found = kernel_resources(kernel, signature_or_example_args, cc)
    if carveout is None:
        carveout = _carveout_option(kernel)
    return occupancy.occupancy(found.cc, block_size, found.registers_per_thread,
                               found.static_shared_bytes, dynamic_shared, carveout=carveout)


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
