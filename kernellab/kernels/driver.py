"""What the CUDA driver itself says about a loaded kernel (GPU only): its active blocks per SM,
and its resources against the ptxas figures and the occupancy calculator.

These are the checks of kernellab's own models: `kernellab.occupancy` and
`kernellab.kernels.resources` must agree with what `driver_comparison` reads here.
"""

from __future__ import annotations

from kernellab import occupancy
from kernellab.gpu import device
from kernellab.kernels import jit, resources


def compiled_overload(kernel, signature_or_example_args=None):
    """The dispatcher's compiled kernel (numba-cuda's _Kernel) for a signature; GPU only."""
    if device.is_simulator():
        raise RuntimeError("compiled_overload needs a GPU: the simulator compiles nothing")
    jit.python_function(kernel)
    return kernel.compile(jit.numba_argtypes(kernel, signature_or_example_args))


def driver_active_blocks(kernel, signature, block_size: int, dynamic_shared: int = 0) -> int:
    """The driver's own answer (cuOccupancyMaxActiveBlocksPerMultiprocessor) for a Numba kernel
    compiled for `signature` (a signature string, numba types or example arguments); GPU only.
    Compare with `kernellab.kernels.resources.occupancy_of`, the calculator on its resources."""
    if device.is_simulator():
        raise RuntimeError("driver_active_blocks needs a GPU; the simulator has no occupancy API")
    cufunc = compiled_overload(kernel, signature)._codelibrary.get_cufunc()
    return int(device.cuda().current_context().get_active_blocks_per_multiprocessor(
        cufunc, block_size, dynamic_shared))


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
        driver = resources.kernel_resources(kernel, sig, method="driver")
        ptxas = resources.kernel_resources(kernel, sig, method="ptxas")
        other = resources.kernel_resources(kernel, sig, method="ptxas", lto=not ptxas.lto)
        blocks = {}
        for block in block_sizes:
            blocks[block] = {
                "driver": driver_active_blocks(kernel, sig, block, dynamic_shared),
                "calculator_driver_figures": occupancy.occupancy(
                    cc, block, driver.registers_per_thread, driver.static_shared_bytes,
                    dynamic_shared).active_blocks,
                "calculator_ptxas_figures": occupancy.occupancy(
                    cc, block, ptxas.registers_per_thread, ptxas.static_shared_bytes,
                    dynamic_shared).active_blocks,
            }
        same = ("registers_per_thread", "static_shared_bytes", "local_bytes")
        agree = (all(getattr(driver, f) == getattr(ptxas, f) for f in same)
                 and all(len(set(b.values())) == 1 for b in blocks.values()))
        rows.append({"kernel": jit.python_function(kernel).__qualname__, "signature": str(sig),
                     "driver": driver, "ptxas": ptxas, "ptxas_other_path": other,
                     "active_blocks": blocks, "agree": agree})
    return rows
