"""Stress mode for the simulator: blocks in shuffled order, threads started in shuffled order,
the interpreter switching threads every few microseconds, shared memory and the arrays a lab
allocates itself full of poison.

The simulator normally runs block 0, then block 1, ..., and the GIL lets each Python thread run
for 5 ms at a time, so code that depends on block order or lacks a `syncthreads` often passes.
A GPU promises neither order nor lockstep; in stress mode the simulator doesn't either.
"""

from __future__ import annotations

import random
import sys
import threading
import traceback
import types

import numpy as np

from kernellab.gpu import checks, device

_allocation_lock = threading.Lock()
SWITCH_INTERVAL = 2e-6   # seconds between forced thread switches (Python's default is 5e-3)


class _ShuffledNumpy(types.ModuleType):
    """numpy, except that ndindex (how the simulator walks blocks and threads) is shuffled."""

    def __init__(self, rng: random.Random):
        super().__init__("numpy")
        self._rng = rng

    def __getattr__(self, name):
        return getattr(np, name)

    def ndindex(self, *shape):
        points = list(np.ndindex(*shape))
        self._rng.shuffle(points)
        return points


def enable(seed: int) -> None:
    """Turn stress mode on for the rest of the process (simulator only)."""
    if not device.is_simulator():
        raise RuntimeError("stress mode reorders the simulator's blocks; a GPU needs no help")
    device.cuda()
    from numba.cuda.simulator import kernel
    kernel.np = _ShuffledNumpy(random.Random(seed))
    _start_blocks_together(kernel.BlockThread)
    _poison_shared_memory(kernel)
    _poison_new_arrays()
    sys.setswitchinterval(SWITCH_INTERVAL)


def _poison_new_arrays() -> None:
    """Make the simulator's device_array (and device_array_like, mapped_array, which call it),
    pinned_array and managed_array return arrays full of the output poison.

    They return uninitialised NumPy memory, often zeros, so an output a launcher allocates
    itself (`out=None`) and a kernel leaves partly unwritten holds garbage; on a GPU too. Full
    of poison, the missed elements read "never written".
    """
    import numba.cuda
    from numba.cuda import simulator
    from numba.cuda.simulator.cudadrv import devicearray

    def poisoning(allocate):
        def allocate_poisoned(*args, **kwargs):
            array = allocate(*args, **kwargs)
            checks.poison(getattr(array, "_ary", array))
            return array
        return allocate_poisoned

    for name in ("device_array", "pinned_array", "managed_array"):
        original = getattr(devicearray, name)
        replacement = poisoning(original)
        for module in (devicearray, simulator, numba.cuda):
            if getattr(module, name, None) is original:
                setattr(module, name, replacement)


def _poison_shared_memory(kernel) -> None:
    """Give every block shared memory full of SHARED_POISON_BYTE bytes (for floats the NaN
    checks.assert_matches recognises, -1 for integers).

    The simulator allocates a launch's shared arrays once and hands the same memory to every
    block, so a block that reads before anyone wrote sees the previous block's values, which
    are often right. On a GPU it sees garbage.
    """
    from numba.cuda import types as numba_types
    from numba.cuda.np import numpy_support
    from numba.cuda.simulator import kernelapi
    original_array, original_run = kernelapi.FakeCUDAShared.array, kernel.BlockManager.run

    def array(self, shape, dtype, alignment=None):
        if shape == 0:  # dynamic shared memory: one buffer, poisoned per block in run()
            return original_array(self, shape, dtype, alignment)
        if alignment is not None:
            raise RuntimeError("Array alignment is not supported in cudasim")
        if isinstance(dtype, numba_types.Type):
            dtype = numpy_support.as_dtype(dtype)
        # Like the simulator, one allocation per source line of the kernel; the caller is
        # found here (a wrapper must not become "the line"), and under a lock, since threads
        # switch every few microseconds now.
        caller = traceback.extract_stack(sys._getframe(1), limit=1)[0][0:2]
        with _allocation_lock:
            result = self._allocations.get(caller)
            if result is None:
                result = np.empty(shape, dtype)
                result.view(np.uint8).fill(checks.SHARED_POISON_BYTE)
                self._allocations[caller] = result
        return result

    def run(self, grid_point, *args):
        shared = kernel._get_kernel_context()._shared
        for allocation in shared._allocations.values():
            allocation.view(np.uint8).fill(checks.SHARED_POISON_BYTE)
        shared._dynshared.view(np.uint8).fill(checks.SHARED_POISON_BYTE)
        return original_run(self, grid_point, *args)

    kernelapi.FakeCUDAShared.array, kernel.BlockManager.run = array, run


def _start_blocks_together(thread_class) -> None:
    """Hold every thread of a block until all of them exist, then release them at once.

    The simulator starts a block's threads one after another, so thread 0 often finishes
    before thread 63 begins: a missing syncthreads then goes unseen. On a GPU the whole block
    is resident together, and so it is here.
    """
    original_start, original_run = thread_class.start, thread_class.run

    def start(self):
        manager = self._manager
        if not hasattr(manager, "_kernellab_go"):
            manager._kernellab_go = threading.Event()
            manager._kernellab_pending = int(np.prod(manager._block_dim))
        original_start(self)
        manager._kernellab_pending -= 1
        if manager._kernellab_pending == 0:
            manager._kernellab_go.set()

    def run(self):
        self._manager._kernellab_go.wait()
        original_run(self)

    thread_class.start, thread_class.run = start, run
