"""kernellab.gpu.checks: poison that says where a bad value came from (not graded)."""

import numpy as np
import pytest

from kernellab.gpu import checks, device


def float32_with_bits(bits: int) -> np.float32:
    return np.array(bits, np.uint32).view(np.float32)[()]


def failure(out, ref) -> str:
    with pytest.raises(AssertionError) as info:
        checks.assert_matches(out, ref, what="out")
    return str(info.value)


def test_the_output_poison_is_a_quiet_nan_with_its_own_payload():
    for dtype in (np.float16, np.float32, np.float64):
        value = checks.poison_value(dtype)
        assert value.dtype == dtype and np.isnan(value)
        assert value.tobytes() != np.array(np.nan, dtype).tobytes()       # not the default NaN
        assert np.array(value, dtype).view(f"u{np.dtype(dtype).itemsize}") \
            == checks.OUTPUT_POISON_BITS[np.dtype(dtype).itemsize]
    assert checks.poison_value(np.int32) == checks.POISON_INT


def test_poison_fills_floats_and_wide_signed_integers_only():
    assert np.isnan(checks.poison(np.zeros(3, np.float32))).all()
    assert (checks.poison(np.zeros(3, np.int64)) == checks.POISON_INT).all()
    assert (checks.poison(np.zeros(3, np.uint8)) == 0).all()


def test_each_origin_of_a_nan_is_named():
    ref = np.ones(6, np.float64)
    out = np.ones(6, np.float32)
    out[1] = checks.poison_value(np.float32)                # never written
    out[2] = float32_with_bits(0xFFFFFFFF) * np.float32(3)  # from shared poison, arithmetic kept it
    out[3] = -float32_with_bits(0xFFFFFFFF)                 # ... negated
    out[4] = np.float32(np.inf)                             # overflow
    with np.errstate(invalid="ignore"):
        out[5] = np.float32(np.inf) - np.float32(np.inf)    # invalid: the default NaN
    assert failure(out, ref) == (
        "out: 1 of 6 elements never written (still the output poison), the first at index (1,); "
        + checks.THREADS_PICTURE + "; 2 of 6 elements computed from shared memory no thread wrote "
        "(missing syncthreads or no fill?), the first at index (2,); 2 of 6 elements overflowed to "
        "inf/NaN (subtract the max before exp?), the first at index (4,)")


def test_integer_outputs_keep_their_poison():
    out = np.array([1, checks.POISON_INT], np.int32)
    assert failure(out, np.array([1, 2])) == ("out: 1 of 2 elements never written (still the "
                                              "output poison), the first at index (1,); " + checks.THREADS_PICTURE)


def test_wrong_values_report_the_worst_element():
    message = failure(np.array([1.0, 2.5], np.float32), np.array([1.0, 2.0]))
    assert "relative error" in message and "worst at index (1,)" in message


def test_a_new_gpu_array_is_filled_with_the_output_poison(monkeypatch):
    """On a GPU (not run here), checks.poisoned_allocations fills each new device array through
    numba-cuda's driver copy: the whole allocation, floats and wide signed integers only."""
    from types import SimpleNamespace
    from numba.cuda.cudadrv import driver
    copies = []
    monkeypatch.setattr(driver, "host_to_device", lambda dst, src, size: copies.append((src, size)))
    checks._fill_with_poison(SimpleNamespace(dtype=np.float32, size=5, alloc_size=24))
    checks._fill_with_poison(SimpleNamespace(dtype=np.int8, size=5, alloc_size=8))
    (host, size), = copies
    assert size == 24 and host.size == 6
    assert np.all(host.view(np.uint32) == checks.OUTPUT_POISON_BITS[4])



@pytest.mark.gpu
def test_gpu_arrays_and_pinned_host_arrays_start_poisoned():
    """On a GPU, inside poisoned_allocations, a new device array and a new page-locked host array
    (pinned_array, pinned_array_like) read the output poison until written, as in stress mode."""
    cuda = device.cuda()
    with checks.poisoned_allocations():
        arrays = [cuda.device_array(7, np.float32).copy_to_host(), cuda.pinned_array(5, np.float32),
                  cuda.pinned_array_like(np.zeros(3, np.float64))]
    for array in arrays:
        bits = array.view(np.uint32 if array.itemsize == 4 else np.uint64)
        assert np.all(bits == checks.OUTPUT_POISON_BITS[array.itemsize]), array
