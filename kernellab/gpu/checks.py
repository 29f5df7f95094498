"""Correctness checks shared by the graded tests, the bench harness and the tour.

The rules: compare against a float64 NumPy reference by relative error, on fresh random inputs
that are never zero, into outputs poisoned before the run, so an element nobody wrote shows up.

Poison says where a bad value came from. Outputs start as one quiet NaN (OUTPUT_POISON_BITS);
stress mode fills shared memory with 0xFF bytes, another NaN (SHARED_POISON_BITS). Arithmetic
on a NaN keeps its payload (x86 and ARM hardware propagate an operand's NaN, which is what the
simulator's NumPy scalars and Python floats compute with), while overflow and invalid operations
(exp of a large value, inf - inf, 0 * inf) give inf or the default NaN. So a NaN left in an
output tells apart: never written, computed from shared memory no thread wrote, or overflowed.
"""

from __future__ import annotations

import contextlib

import numpy as np

from kernellab.gpu import device, hooks

POISON_INT = -0x5A5A5A5A
# Where an output has elements never written: the picture of which thread wrote what (as text:
# gpu/ does not import the course).
THREADS_PICTURE = ("see which thread wrote what, as the lab's notebook draws it: from kernellab.course import "
                   'pictures; pictures.threads(pictures.trace("<lab number>", "<launcher>", <a tiny input>))')
SHARED_POISON_BYTE = 0xFF
# Per float width: the output poison's bits (a quiet NaN with a payload no arithmetic makes),
# and the shared-memory poison's (every byte SHARED_POISON_BYTE). Compared without the sign bit,
# which a negation flips.
_FLOAT_BITS = {2: np.uint16, 4: np.uint32, 8: np.uint64}
OUTPUT_POISON_BITS = {2: 0x7E5D, 4: 0x7FD0DEAD, 8: 0x7FFA1BD5A0DEAD00}
SHARED_POISON_BITS = {size: int.from_bytes(bytes([SHARED_POISON_BYTE]) * size, "little")
                      for size in _FLOAT_BITS}


def nonzero(rng: np.random.Generator, shape, dtype=np.float32, low=0.5, high=2.0):
    """Random values with |v| in [low, high) and a random sign: no zeros to hide a missed write."""
    magnitude = rng.uniform(low, high, size=shape)
    sign = rng.choice(np.array([-1.0, 1.0]), size=shape)
    return (magnitude * sign).astype(dtype)


def awkward_size(rng: np.random.Generator, block: int, low_blocks: int = 2, high_blocks: int = 6):
    """A size that is not a multiple of `block` (nor of 32): the last block is partly idle."""
    while True:
        n = int(rng.integers(low_blocks * block, high_blocks * block))
        if n % block and n % 32:
            return n


def poison_value(dtype):
    """The output poison for `dtype`: a NaN with the OUTPUT_POISON_BITS payload for floats."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return POISON_INT
    bits = _FLOAT_BITS[dtype.itemsize]
    return np.array(OUTPUT_POISON_BITS[dtype.itemsize], dtype=bits).view(dtype)[()]


def poison(array: np.ndarray) -> np.ndarray:
    """Fill a host array with the output poison in place (floats and signed integers of 32 bits
    or more; narrower and unsigned integers and booleans have no value to spare: left alone)."""
    if array.dtype.kind == "f" or array.dtype.kind == "i" and array.dtype.itemsize >= 4:
        array[...] = poison_value(array.dtype)
    return array


def poisoned(shape, dtype=np.float32):
    """A device array full of the output poison (a NaN with its own payload for floats)."""
    cuda = device.cuda()
    return cuda.to_device(np.full(shape, poison_value(dtype), dtype=dtype))


@contextlib.contextmanager
def poisoned_allocations():
    """On a GPU, every device array allocated inside the block (`cuda.device_array`,
    `cuda.device_array_like`) and every page-locked host array (`cuda.pinned_array`,
    `cuda.pinned_array_like`) starts full of the output poison, as stress mode makes the
    simulator's (kernellab.gpu.stress): an output a launcher allocates itself (`out=None`) and a
    kernel or a copy leaves partly unwritten then reads "never written" on both machines, where
    fresh GPU and pinned memory is often zero. The device poison goes in through numba-cuda's
    driver copy, not the hooked `copy_to_device`, so a Timeline or a launch recorder sees no extra
    copy; the host poison is a NumPy fill. In the simulator this does nothing (stress mode poisons
    there, and a run without it stays plain)."""
    if device.is_simulator():
        yield
        return

    def allocate_poisoned(proceed, *args, **kwargs):
        array = proceed()
        _fill_with_poison(array)
        return array

    def pin_poisoned(proceed, *args, **kwargs):
        return poison(proceed())

    with hooks.subscribe(device_array=allocate_poisoned, device_array_like=allocate_poisoned,
                         pinned_array=pin_poisoned, pinned_array_like=pin_poisoned):
        yield


class Allocations(list):
    """The arrays allocated inside a block, in order."""


@contextlib.contextmanager
def pinned_allocations():
    """The page-locked host arrays (`cuda.pinned_array`, `cuda.pinned_array_like`) allocated
    inside the block: a graded test asks which of a lab's buffers are pinned without reaching
    into numba.cuda itself."""
    found = Allocations()

    def note(proceed, *args, **kwargs):
        array = proceed()
        found.append(array)
        return array

    with hooks.subscribe(pinned_array=note, pinned_array_like=note):
        yield found


def _fill_with_poison(array) -> None:
    """Write the output poison over a new GPU array's whole allocation (floats and signed integers
    of 32 bits or more, as `poison`; the others are left as allocated)."""
    dtype = np.dtype(array.dtype)
    if array.size == 0 or not (dtype.kind == "f" or dtype.kind == "i" and dtype.itemsize >= 4):
        return
    from numba.cuda.cudadrv import driver
    host = np.full(-(-array.alloc_size // dtype.itemsize), poison_value(dtype), dtype=dtype)
    driver.host_to_device(array, host, array.alloc_size)


def _nan_origins(out: np.ndarray, bad: np.ndarray) -> list[tuple[np.ndarray, str]]:
    """The elements of `bad` (non-finite where the reference is finite) split by where the value
    came from, each with the words that say so."""
    size = out.dtype.itemsize
    magnitude = (1 << (8 * size - 1)) - 1          # all bits but the sign
    bits = np.ascontiguousarray(out).view(_FLOAT_BITS[size]) & np.array(magnitude, _FLOAT_BITS[size])
    never_written = bad & (bits == OUTPUT_POISON_BITS[size] & magnitude)
    from_shared = bad & (bits == SHARED_POISON_BITS[size] & magnitude)
    overflowed = bad & ~never_written & ~from_shared
    return [(never_written, "never written (still the output poison)"),
            (from_shared, "computed from shared memory no thread wrote "
                          "(missing syncthreads or no fill?)"),
            (overflowed, "overflowed to inf/NaN (subtract the max before exp?)")]


def to_host(array) -> np.ndarray:
    return array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)


def relative_error(out, ref, scale=None) -> float:
    """||out - ref|| / ||scale|| in float64 (NaN if anything is NaN); `scale` defaults to ref."""
    out64 = np.asarray(out, dtype=np.float64)
    ref64 = np.asarray(ref, dtype=np.float64)
    norm = np.linalg.norm(np.asarray(ref64 if scale is None else scale, dtype=np.float64).ravel())
    return float(np.linalg.norm((out64 - ref64).ravel()) / (norm if norm else 1.0))


def assert_matches(out, ref, rtol=1e-5, what="output", scale=None):
    """Fail with a message a student can act on: shape, unwritten elements, worst element.
    `scale`: the magnitudes the error is measured against, where the result can cancel to near
    zero; for a sum of products, |a| @ |b| (a float32 dot product's rounding is bounded by k
    roundings of |a| . |b|, not of the result): a correct kernel then passes on every seed."""
    out = to_host(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        raise AssertionError(f"{what} has shape {out.shape}, the reference has {ref.shape}")
    if out.dtype.kind == "f":
        origins = _nan_origins(out, ~np.isfinite(out) & np.isfinite(ref))
    else:
        origins = [((out == POISON_INT) & (ref != POISON_INT),
                    "never written (still the output poison)")]
    problems = [f"{int(where.sum())} of {out.size} elements {words}, the first at index "
                f"{tuple(int(i) for i in np.argwhere(where)[0])}"
                for where, words in origins if where.any()]
    if origins[0][0].any():                        # origins[0]: the elements never written
        problems.insert(1, THREADS_PICTURE)
    if problems:
        raise AssertionError(f"{what}: " + "; ".join(problems))
    error = relative_error(out, ref, scale)
    if not error <= rtol:
        worst = np.unravel_index(np.argmax(np.abs(out.astype(np.float64) - ref)), out.shape)
        worst = tuple(int(i) for i in worst)
        raise AssertionError(f"{what} differs from the NumPy reference: relative error "
                             f"{error:.3g} > {rtol:g}; worst at index {worst}: got {out[worst]!r}, "
                             f"expected {ref[worst]!r}")


def assert_launched(log, kernel: str, count: int | None = None):
    """The work must happen in a kernel: a host-side answer does not count."""
    seen = log.count(kernel)
    if count is None and seen == 0 or count is not None and seen != count:
        want = "at least one launch" if count is None else f"exactly {count} launch(es)"
        raise AssertionError(f"expected {want} of {kernel}, saw "
                             f"{log.names() or 'no kernel launches at all'}")
