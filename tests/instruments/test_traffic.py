"""Checks of the traffic instruments themselves (not graded): the ledger and the meter."""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.gpu.traffic import Ledger, meter

cuda = device.cuda()
simulator_only = pytest.mark.skipif(not device.is_simulator(),
                                    reason="the traffic meter counts loads in the simulator")


def unfused(n):
    """out = (x * 2) + 1 in two kernels, through one temporary."""
    return (Ledger("unfused")
            .add("scale", "x", reads=n).add("scale", "t", writes=n, temporary=True)
            .add("shift", "t", reads=n, temporary=True).add("shift", "out", writes=n))


def fused(n):
    return Ledger("fused").add("scale+shift", "x", reads=n).add("scale+shift", "out", writes=n)


def test_ledger_totals_per_op_and_per_array():
    ledger = unfused(10).add("shift", "mask", reads=10, itemsize=1)
    assert (ledger.bytes_read, ledger.bytes_written, ledger.total_bytes) == (90, 80, 170)
    assert ledger.by_op() == {"scale": 80, "shift": 90}
    per_array = ledger.by_array()
    assert (per_array["t"].reads, per_array["t"].writes, per_array["mask"].bytes_read) == (10, 10, 10)
    assert "total" in ledger.table() and "mask" in per_array.table()


def test_ratio_is_the_predicted_speedup():
    assert unfused(1000).ratio(fused(1000)) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no bytes"):
        unfused(10).ratio(Ledger("empty"))


def test_equality_ignores_op_names_and_order_but_not_counts():
    reordered = Ledger("other").add("b", "out", writes=7).add("a", "x", reads=7)
    assert fused(7) == reordered
    assert fused(7) != fused(8)
    assert Ledger.from_dict(unfused(5).as_dict()) == unfused(5)


def test_bad_entries_are_clear_errors():
    with pytest.raises(ValueError, match="reads"):
        Ledger().add("op", "x", reads=-1)
    with pytest.raises(ValueError, match="itemsize 4 and 2"):
        Ledger("mixed").add("a", "x", reads=1).add("b", "x", reads=1, itemsize=2).by_array()


@cuda.jit
def scale_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * np.float32(2.0)


@cuda.jit
def shift_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + np.float32(1.0)


def two_launches(x, out):
    temporary = cuda.device_array_like(x)
    scale_kernel[(x.size + 31) // 32, 32](x, temporary)
    shift_kernel[(x.size + 31) // 32, 32](temporary, out)
    return out


@simulator_only
def test_meter_counts_named_and_temporary_arrays_and_the_ledger_agrees(rng):
    x = checks.nonzero(rng, 45)
    d_x, out = cuda.to_device(x), checks.poisoned(45)
    with meter(x=d_x, out=out) as traffic:
        two_launches(d_x, out)
    assert (traffic["x"].reads, traffic["out"].writes, traffic["out"].reads) == (45, 45, 0)
    temporaries = [t for name, t in traffic.items() if name.startswith("temp")]
    assert [(t.reads, t.writes) for t in temporaries] == [(45, 45)]
    unfused(45).check_against(traffic)
    checks.assert_matches(out, 2.0 * x.astype(np.float64) + 1.0, rtol=1e-6)


@simulator_only
def test_a_disagreement_names_the_array_and_both_counts(rng):
    d_x, out = cuda.to_device(checks.nonzero(rng, 45)), checks.poisoned(45)
    with meter(x=d_x, out=out) as traffic:
        two_launches(d_x, out)
    with pytest.raises(AssertionError) as failure:
        fused(45).check_against(traffic)       # forgets the temporary
    message = str(failure.value)
    assert "the meter saw 1 unnamed arrays [(45, 45, 4)]" in message and "declared:" in message
    wrong = Ledger("wrong").add("op", "x", reads=90).add("op", "out", writes=45)
    wrong.add("op", "t", reads=45, writes=45, temporary=True)
    problems = wrong.differences(traffic)
    assert problems == ["x: declared 90 reads, 0 writes of 4 B; measured 45 reads, 0 writes of 4 B"]
    missing = Ledger("missing").add("op", "y", reads=1)
    assert any("the meter saw no array of that name" in p for p in missing.differences(traffic))


@cuda.jit
def every_atomic_kernel(ints, floats, shared_sum):
    """Thread 0 does each atomic the simulator offers once, each on its own element."""
    scratch = cuda.shared.array(1, np.float32)
    if cuda.threadIdx.x == 0:
        scratch[0] = 0
        cuda.atomic.add(ints, 0, 5)
        cuda.atomic.sub(ints, 1, 5)
        cuda.atomic.and_(ints, 2, 6)
        cuda.atomic.or_(ints, 3, 6)
        cuda.atomic.xor(ints, 4, 6)
        cuda.atomic.inc(ints, 5, 100)
        cuda.atomic.dec(ints, 6, 100)
        cuda.atomic.exch(ints, 7, 9)
        cuda.atomic.max(ints, 8, 9)
        cuda.atomic.min(ints, 9, -9)
        cuda.atomic.cas(ints, 10, 3, 9)
        cuda.atomic.compare_and_swap(ints[11:], 3, 9)
        cuda.atomic.add(floats, 0, 1.5)
        cuda.atomic.max(floats, 1, 9.5)
        cuda.atomic.nanmax(floats, 2, 9.5)
        cuda.atomic.nanmin(floats, 3, -9.5)
        cuda.atomic.add(scratch, 0, 2.0)      # shared memory: not global traffic
        shared_sum[0] = scratch[0]


@simulator_only
def test_an_atomic_is_one_read_and_one_write_whatever_the_simulator_does():
    ints = cuda.to_device(np.full(12, 3, np.int32))
    floats = cuda.to_device(np.full(4, 3.0, np.float32))
    shared_sum = cuda.to_device(np.zeros(1, np.float32))
    with meter(ints=ints, floats=floats, shared_sum=shared_sum) as traffic:
        every_atomic_kernel[1, 32](ints, floats, shared_sum)
    assert (traffic["ints"].reads, traffic["ints"].writes) == (12, 12)
    assert (traffic["floats"].reads, traffic["floats"].writes) == (4, 4)
    assert (traffic["shared_sum"].reads, traffic["shared_sum"].writes) == (0, 1)
    assert ints.copy_to_host().tolist() == [8, -2, 2, 7, 5, 4, 2, 9, 9, -9, 9, 9]
    assert floats.copy_to_host().tolist() == [4.5, 9.5, 9.5, -9.5]
    assert shared_sum.copy_to_host()[0] == 2.0
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic
    assert FakeCUDAAtomic.add.__name__ == "add"     # outside the meter, the simulator's own again


def test_compulsory_bytes_leave_out_the_rereads_a_cache_serves():
    rows, cols = 4, 8
    ledger = (Ledger("layernorm").add("ln", "x", reads=rows * cols).add("ln", "gamma", reads=rows * cols)
              .add("ln", "out", writes=rows * cols))
    marked = ledger.with_distinct("gamma", cols)
    assert marked.total_bytes == ledger.total_bytes == 3 * rows * cols * 4
    assert ledger.compulsory_bytes == ledger.total_bytes
    assert marked.compulsory_bytes == (2 * rows * cols + cols) * 4
    assert marked == ledger, "the same requests: the meter's check is unchanged"
    assert Ledger.from_dict(marked.as_dict()).compulsory_bytes == marked.compulsory_bytes
    with pytest.raises(ValueError, match="0 <= distinct <= reads"):
        Ledger().add("op", "a", reads=2, distinct=3)


def test_a_thread_left_running_by_an_earlier_launch_is_not_counted():
    """A kernel that raised leaves its block's other threads behind; what they touch once a later
    test's meter is open is not that test's traffic (it once blamed a student's correct kernel
    for 'temp6 (113,)' arrays the earlier test had allocated)."""
    import threading
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray
    cuda = device.cuda()
    leftover = FakeWithinKernelCUDAArray(cuda.to_device(np.zeros(113, np.float32)))
    mine = FakeWithinKernelCUDAArray(cuda.to_device(np.zeros(4, np.float32)))
    go, done = threading.Event(), threading.Event()

    def straggler():
        go.wait()
        leftover[5] = 1.0
        done.set()
    thread = threading.Thread(target=straggler)
    thread.start()                                  # running before the meter opens
    with meter() as counted:
        go.set()
        done.wait(5)
        mine[1] = 2.0
    thread.join()
    assert [(t.name, t.writes) for t in counted.values()] == [("temp0 (4,) float32", 1)]
