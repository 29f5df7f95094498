"""Correctness checks shared by the graded tests, the bench harness and the tour.

The rules: compare against a float64 NumPy reference by relative error, on fresh random inputs
that are never zero, into outputs poisoned before the run, so an element nobody wrote shows up.
"""

from __future__ import annotations

import numpy as np

from . import device

POISON_FLOAT = np.nan
POISON_INT = -0x5A5A5A5A


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
    return POISON_FLOAT if np.dtype(dtype).kind == "f" else POISON_INT


def poisoned(shape, dtype=np.float32):
    """A device array full of poison (NaN for floats)."""
    cuda = device.cuda()
    return cuda.to_device(np.full(shape, poison_value(dtype), dtype=dtype))


def to_host(array) -> np.ndarray:
    return array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)


def relative_error(out, ref) -> float:
    """||out - ref|| / ||ref|| in float64 (NaN if anything is NaN)."""
    out64 = np.asarray(out, dtype=np.float64)
    ref64 = np.asarray(ref, dtype=np.float64)
    scale = np.linalg.norm(ref64.ravel())
    return float(np.linalg.norm((out64 - ref64).ravel()) / (scale if scale else 1.0))


def assert_matches(out, ref, rtol=1e-5, what="output"):
    """Fail with a message a student can act on: shape, unwritten elements, worst element."""
    out = to_host(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        raise AssertionError(f"{what} has shape {out.shape}, the reference has {ref.shape}")
    if np.asarray(out).dtype.kind == "f":
        unwritten = np.isnan(out) & ~np.isnan(ref)
    else:
        unwritten = (out == POISON_INT) & (ref != POISON_INT)
    if unwritten.any():
        first = tuple(int(i) for i in np.argwhere(unwritten)[0])
        raise AssertionError(f"{what}: {int(unwritten.sum())} of {out.size} elements were never "
                             f"written (still poison), the first at index {first}")
    error = relative_error(out, ref)
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
