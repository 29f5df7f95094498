"""The student API: everything a lab file imports from kernellab, under names that do not move.

    from kernellab.lab import Ledger, jit   # first: importing kernellab chooses GPU or simulator
    from numba import cuda                  # ... before numba.cuda is first imported

A lab (labs/labNN_*.py, and a submission written from it) imports kernellab through this module
only. kernellab's rooms (ARCHITECTURE.md) may move from one release to the next; the names here
stay, so a lab started before an upgrade still imports after it. A name leaves only after a
release in which its old path warned (DeprecationWarning) and still worked: the previous
release's paths `kernellab.traffic`, `kernellab.resources`, `kernellab.graphs` and
`kernellab.device` do so now (`moved`).

| name | what it is |
|---|---|
| `is_simulator()`, `device_facts()` | the device mode, and the device's facts (the reference device's in the simulator) |
| `jit` | `numba.cuda.jit` that also takes the GPU-only options (`max_registers`, `lineinfo`, ...) in the simulator |
| `kernel_resources`, `Resources` | a kernel's registers, shared and local memory, as ptxas or the driver reports them |
| `Ledger` | the bytes a kernel is meant to move, which the tests meter against |
| `FLOAT32X4`, `load_float32x4`, `store_float32x4` | 16-byte vector loads and stores of float32 (four element accesses in the simulator) |
| `capture`, `GraphCache`, `CaptureError` | CUDA graphs of Numba kernels (Lab 08) |
| `Architecture`, `architecture`, `LIMITERS`, `UNLIMITED`, `shared_per_sm` | one compute capability's per-SM limits (Lab 06) |
| `scheduler` | the block-scheduler model of streams on SMs (Lab 07) |
"""

from __future__ import annotations

import warnings

from kernellab import scheduler
from kernellab.gpu import device
from kernellab.gpu.device import DeviceFacts
from kernellab.gpu.graphs import CaptureError, GraphCache, capture
from kernellab.gpu.timing import FLOAT32X4, load_float32x4, store_float32x4
from kernellab.gpu.traffic import Ledger
from kernellab.kernels.jit import jit
from kernellab.kernels.resources import Resources, kernel_resources
from kernellab.occupancy import LIMITERS, UNLIMITED, Architecture, architecture, shared_per_sm

__all__ = ["is_simulator", "device_facts", "DeviceFacts", "jit", "kernel_resources", "Resources",
           "Ledger", "FLOAT32X4", "load_float32x4", "store_float32x4", "capture", "GraphCache",
           "CaptureError", "Architecture", "architecture", "LIMITERS", "UNLIMITED", "shared_per_sm",
           "scheduler"]


def is_simulator() -> bool:
    """True in Numba's CUDA simulator (KERNELLAB_DEVICE=sim, or no GPU), False on a GPU."""
    return device.is_simulator()


def device_facts() -> DeviceFacts:
    """The device's facts (`sm_count`, `max_threads_per_block`, `cc`, ...); in the simulator, the
    reference device's (an H200 unless KERNELLAB_REFERENCE_DEVICE names another), and `simulated`
    says so."""
    return device.facts()


def moved(old: str, new: str) -> None:
    """Warn that the previous release's module `old` moved (`new`: what to import instead). Called
    from the deprecated module's body, once per process; the warning names the line that imported
    it (stacklevel 3: past the deprecated module, and warnings skips the import system's frames),
    so a student sees which line of their file to change."""
    warnings.warn(f"{old} is the previous release's path and goes in the next one: import "
                  f"{new} (kernellab.lab is the student API)", DeprecationWarning, stacklevel=3)


# The previous release's module paths that still import, each with what replaces it.
MOVED = {
    "kernellab.traffic": "Ledger from kernellab.lab",
    "kernellab.resources": "jit, kernel_resources and Resources from kernellab.lab",
    "kernellab.graphs": "capture, GraphCache and CaptureError from kernellab.lab",
}
