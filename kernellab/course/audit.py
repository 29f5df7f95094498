"""kernellab audits itself on a GPU: its occupancy calculator and its ptxas figures against the driver.

A laptop computes what a kernel uses (`kernellab.kernels.resources`, through ptxas) and how many
of its blocks an SM holds (`kernellab.occupancy`, the rules of cuda_occupancy.h). Both are only
worth teaching if the driver of a real GPU agrees, so on a GPU:

- `calculator_vs_driver(kernels)`: cuOccupancyMaxActiveBlocksPerMultiprocessor against the
  calculator fed the driver's registers and static shared memory, for every (kernel, carveout,
  max-dynamic attribute at its default and raised, dynamic shared size around each boundary,
  block size 1-1024); the kernels are `sweep_kernels()` (registers 16-255, some capped with
  max_registers; static shared memory 0-48 KiB) and every lab's;
- `resources_vs_driver(kernels, undeclared)`: ptxas's figures (through LTO-IR and PTX) against
  the driver's attributes, and the active blocks each implies, kernel by kernel.

`lab_kernels(labs)` lists the labs' kernels with their declared signatures (`SIGNATURES` in the
lab module, or an eager signature); `course_kernels()` walks every lab's declared kernels
(`protocol.declaration(NN).kernels`). Lab 06 runs the audit as two of its measurements and keeps
the records in data/reference/<gpu>/lab06.json (`calculator_vs_driver`, `resources_vs_driver`).
Each record carries the `provenance` its caller gives (kernellab.course.reference's). The driver
helpers (`cufunction`, `get_attribute`, `set_attribute`, `driver_blocks`) serve Lab 06's
occupancy probes too, and `ptx(kernels)` shows what the compiler made of a kernel, without a GPU
(Lab 06 counts the instructions of its compute probes' loop with it).
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from kernellab import occupancy as occ
from kernellab.gpu import device
from kernellab.kernels import driver, jit, ptxas, resources
from kernellab.show.progress import progress_bar

cuda = device.cuda()
from numba import float32  # noqa: E402  (after device.cuda(), which chooses GPU or simulator)


# --- talking to the driver (GPU only) ------------------------------------------------------------

def cufunction(kernel, signature_or_args):
    """numba-cuda's loaded function for one overload (its `.handle` is the CUkernel launches use)."""
    return driver.compiled_overload(kernel, signature_or_args)._codelibrary.get_cufunc()


def get_attribute(cufunc, name: str) -> int:
    """A CU_FUNC_ATTRIBUTE_* of the kernel on this device."""
    from numba.cuda.cudadrv.driver import binding, driver
    attribute = getattr(binding.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
    return int(driver.cuKernelGetAttribute(attribute, cufunc.handle, cufunc.device.id))


def set_attribute(cufunc, name: str, value: int) -> int:
    """Set a CU_FUNC_ATTRIBUTE_* on the kernel for this device (as numba-cuda sets the carveout)
    and return the value the driver reads back."""
    from numba.cuda.cudadrv.driver import binding, driver
    attribute = getattr(binding.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
    driver.cuKernelSetAttribute(attribute, int(value), cufunc.handle, cufunc.device.id)
    return get_attribute(cufunc, name)


def driver_blocks(cufunc, block_size: int, dynamic_shared: int):
    """cuOccupancyMaxActiveBlocksPerMultiprocessor, or the error's name when the driver refuses."""
    from numba.cuda.cudadrv.driver import CudaAPIError
    try:
        return int(cuda.current_context().get_active_blocks_per_multiprocessor(
            cufunc, block_size, dynamic_shared))
    except CudaAPIError as exc:
        return f"error {getattr(exc.code, 'name', exc.code)}"


def _require_gpu(what: str) -> None:
    if device.is_simulator():
        raise RuntimeError(f"{what} asks a GPU's driver; the simulator has none (KERNELLAB_DEVICE=gpu)")


# --- what the compiler makes of a kernel, without a GPU ------------------------------------------

def ptx(kernels_and_signatures, cc=(9, 0)) -> list[str]:
    """The PTX numba-cuda compiles each (kernel, signature) to for `cc`; no GPU needed. In the
    simulator kernellab.kernels.ptxas's compile child compiles them all in one process (about
    20 s), so each kernel must be a module-level name of an importable module."""
    if not device.is_simulator():
        return [cuda.compile_ptx(kernel.py_func, sig, cc=tuple(cc))[0]
                for kernel, sig in kernels_and_signatures]
    requests = [dict(ptxas.child_request(kernel, jit.numba_argtypes(kernel, sig), tuple(cc), False),
                     return_ptx=True) for kernel, sig in kernels_and_signatures]
    answers = ptxas.run_child(requests)
    failed = [answer["error"] for answer in answers if "ok" not in answer]
    if failed:
        raise RuntimeError(f"the PTX compile child failed: {failed[0]}")
    return [answer["ok"]["ptx"] for answer in answers]


# --- the kernels it audits -----------------------------------------------------------------------

SWEEP_SIGNATURE = "void(float32[::1], float32[::1], int64)"
# (live floats, static shared bytes, max_registers): registers ~ live + 24 up to the 255 ceiling
SWEEP_KERNELS = (
    [(live, 0, None) for live in (1, 8, 24, 40, 56, 72, 104, 136, 200, 240)]
    + [(40, 0, cap) for cap in (16, 24, 32, 48, 56)]
    + [(8, shared, None) for shared in (1024, 10_000, 32 * 1024, 48 * 1024)]
    + [(72, 20 * 1024, None), (24, 40_000, 32)]
)


def sweep_kernel(live: int, shared_bytes: int = 0, max_registers: int | None = None):
    """(label, kernel) for a kernel that keeps `live` float32 values alive at once and declares
    `shared_bytes` of static shared memory. Written out as source: explicit scalars make the
    register count predictable (about live + 24), where a local array may stay in memory. Each
    gets its own name, which kernellab.kernels.jit's compile cache tells kernels apart by."""
    name = f"sweep_live{live}_shared{shared_bytes}_cap{max_registers or 'none'}"
    names = [f"v{j}" for j in range(live)]
    words = shared_bytes // 4
    lines = [f"def {name}(x, out, rounds):", "    i = cuda.grid(1)", "    n = x.size"]
    lines += [f"    {v} = x[(i + {j}) % n]" for j, v in enumerate(names)]
    lines += ["    for _ in range(rounds):"]
    lines += [f"        {v} = {v} * {names[(j + 1) % live]} + ONE" for j, v in enumerate(names)]
    if words:
        lines += [f"    tile = cuda.shared.array({words}, float32)",
                  f"    tile[cuda.threadIdx.x % {words}] = v0",
                  "    cuda.syncthreads()",
                  f"    v0 += tile[(cuda.threadIdx.x + 1) % {words}]"]
    lines += ["    if i < out.size:", f"        out[i] = {' + '.join(names)}"]
    namespace = {"cuda": cuda, "float32": float32, "ONE": np.float32(1.0)}
    exec("\n".join(lines), namespace)
    options = {} if max_registers is None else {"max_registers": max_registers}
    return name, jit.jit(**options)(namespace[name])


@functools.cache
def sweep_kernels() -> list[tuple]:
    """(label, kernel, signature) for every kernel of SWEEP_KERNELS (made once per process)."""
    return [(label, kernel, SWEEP_SIGNATURE)
            for label, kernel in (sweep_kernel(*spec) for spec in SWEEP_KERNELS)]


def lab_kernels(labs: dict) -> tuple[list, list]:
    """(label, kernel, signature) for each named lab kernel with a declared signature, and the
    labels of those that declare none (their resources need example arguments).

    labs: {lab number: (lab module, the names of its kernels)}; labels are "labNN.name"."""
    found, undeclared = [], []
    for number, (module, names) in sorted(labs.items()):
        for name in names:
            label = f"lab{number}.{name}"
            signatures = jit.declared_signatures(getattr(module, name))
            if signatures:
                found += [(label, getattr(module, name), sig) for sig in signatures]
            else:
                undeclared.append(label)
    return found, undeclared


def course_kernels() -> tuple[list, list]:
    """`lab_kernels` over every lab of the course (its solutions): the kernels each lab declares
    (`protocol.declaration(NN).kernels`)."""
    from kernellab.course import protocol, target
    labs = {}
    for number in target.labs():
        module = target.load(number, "solutions")
        labs[number] = (module, [k.name for k in protocol.declaration(number).kernels])
    return lab_kernels(labs)


# --- 1. the calculator against the driver ----------------------------------------------------------

CARVEOUTS = (-1, 0, 10, 25, 50, 100)
EVERY_BLOCK = range(1, 1025)
SOME_BLOCKS = sorted({1, 2, 31, 32, 33, 48, 63, 64, 65, 96, 127, 128, 129, 160, 192, 224, 255, 256,
                      257, 288, 320, 352, 384, 416, 448, 480, 511, 512, 513, 544, 576, 608, 640,
                      672, 704, 736, 768, 800, 832, 864, 896, 928, 960, 992, 1000, 1023, 1024})


def dynamic_values(static: int, max_dynamic: int, arch) -> list[int]:
    """Dynamic shared sizes around every boundary that matters for this kernel."""
    values = {0, 1, 1000, 4096 + 5, 12_000, 30_000, max_dynamic - 1, max_dynamic, max_dynamic + 1,
              arch.shared_per_block - static + 1, 60_000, 100_000, 150_000, 200_000}
    return sorted(v for v in values if 0 <= v <= arch.shared_per_block_optin - static + 1)


def calculator_vs_driver(kernels, provenance: dict, budget_s: float = 45.0) -> dict:
    """Every (kernel, carveout, max-dynamic attribute, dynamic shared, block size): the driver's
    active blocks per SM against the calculator fed the driver's registers and static shared.
    Stops after the kernel that passes `budget_s` (`complete` says whether all were swept)."""
    _require_gpu("calculator_vs_driver")
    arch = occ.architecture(device.facts().cc)
    started = time.perf_counter()
    total, agree, disagreements, per_kernel = 0, 0, [], []
    for label, kernel, signature in progress_bar(kernels, desc="calculator vs driver", unit="kernel"):
        try:
            summary, agreed, differ = sweep_one_kernel(label, kernel, signature, arch)
        except Exception as exc:  # one kernel that fails to build must not end the run
            per_kernel.append({"kernel": label, "error": f"{type(exc).__name__}: {exc}"})
            print(f"  {label}: ERROR {per_kernel[-1]['error'][:200]}")
            continue
        total, agree = total + summary["configurations"], agree + agreed
        disagreements += differ[:max(0, 200 - len(disagreements))]
        per_kernel.append(summary)
        if time.perf_counter() - started > budget_s:
            break
    seconds = time.perf_counter() - started
    print(f"calculator vs driver: {agree} of {total} configurations agree "
          f"({len(per_kernel)} kernels, {seconds:.0f} s)")
    for row in disagreements[:10]:
        print(f"  differs: {row}")
    return {"provenance": provenance, "configurations": total, "agree": agree,
            "kernels": per_kernel, "disagreements": disagreements, "seconds": seconds,
            "carveouts": list(CARVEOUTS), "complete": len(per_kernel) == len(kernels)}


def sweep_one_kernel(label, kernel, signature, arch) -> tuple[dict, int, list]:
    """One kernel's part of the sweep: (its summary, configurations agreeing, disagreements)."""
    found = resources.kernel_resources(kernel, signature, method="driver")
    cufunc = cufunction(kernel, signature)
    static, registers = found.static_shared_bytes, found.registers_per_thread
    original = {name: get_attribute(cufunc, name)
                for name in ("PREFERRED_SHARED_MEMORY_CARVEOUT", "MAX_DYNAMIC_SHARED_SIZE_BYTES")}
    checked, agree, disagreements = 0, 0, []
    for carveout in CARVEOUTS:
        carveout_read = set_attribute(cufunc, "PREFERRED_SHARED_MEMORY_CARVEOUT", carveout)
        for max_dynamic in sorted({arch.shared_per_block - static, arch.shared_per_block_optin - static}):
            max_read = set_attribute(cufunc, "MAX_DYNAMIC_SHARED_SIZE_BYTES", max_dynamic)
            for dynamic in dynamic_values(static, max_read, arch):
                full_sweep = carveout == -1 and dynamic in (0, max_read)
                for block in (EVERY_BLOCK if full_sweep else SOME_BLOCKS):
                    expected = occ.occupancy(arch, block, registers, static, dynamic, max_read,
                                             carveout).active_blocks
                    got = driver_blocks(cufunc, block, dynamic)
                    checked += 1
                    if got == expected:
                        agree += 1
                    else:
                        disagreements.append({
                            "kernel": label, "registers": registers, "static": static, "block": block,
                            "dynamic": dynamic, "max_dynamic": max_read, "carveout": carveout,
                            "carveout_read_back": carveout_read, "driver": got, "calculator": expected})
    for name, value in original.items():
        set_attribute(cufunc, name, value)
    summary = {"kernel": label, "registers": registers, "static_shared": static,
               "local_bytes": found.local_bytes, "configurations": checked, "agree": agree}
    return summary, agree, disagreements


# --- 2. ptxas's figures against the driver ----------------------------------------------------------

def _figures(found: resources.Resources) -> dict:
    return {k: v for k, v in dataclasses.asdict(found).items() if k != "log"}


def resources_vs_driver(kernels, undeclared, provenance: dict) -> dict:
    """ptxas's figures (what kernellab.kernels.resources computes on a laptop) against the driver's."""
    _require_gpu("resources_vs_driver")
    out = []
    for label, kernel, sig in kernels:
        try:
            (row,) = driver.driver_comparison([(kernel, sig)])
        except Exception as exc:  # one kernel that fails to build must not end the run
            out.append({"kernel": label, "signature": str(sig), "agree": False,
                        "error": f"{type(exc).__name__}: {exc}"})
            print(f"  {label:<44} ERROR {out[-1]['error'][:200]}")
            continue
        out.append({"kernel": label, "signature": str(sig), "agree": row["agree"],
                    "driver": _figures(row["driver"]), "ptxas": _figures(row["ptxas"]),
                    "ptxas_other_path": _figures(row["ptxas_other_path"]),
                    "active_blocks": {str(b): v for b, v in row["active_blocks"].items()}})
        print(f"  {label:<44} driver {row['driver'].registers_per_thread:>3} regs "
              f"{row['driver'].static_shared_bytes:>6} B  ptxas {row['ptxas'].registers_per_thread:>3} regs "
              f"{row['ptxas'].static_shared_bytes:>6} B  {'agree' if row['agree'] else 'DIFFER'}")
    agreeing = sum(r["agree"] for r in out)
    print(f"resources vs driver: {agreeing} of {len(out)} kernels agree; "
          f"{len(undeclared)} lab kernels declare no signature: {', '.join(undeclared) or 'none'}")
    return {"provenance": provenance, "kernels": out, "agree": agreeing, "undeclared": undeclared}
