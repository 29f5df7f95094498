"""The staged softmax (Lab 05's solution side, the issue-13 target): correct in the simulator on
both of its load paths (whole bursts and the row's ragged end), on rows shorter than the block,
far from zero, and within the fused form's budget of one read and one write per element."""

import numpy as np
import pytest

from kernellab.course import target
from kernellab.gpu import checks, device
from kernellab.gpu.launches import record_launches
from kernellab.gpu.traffic import meter

cuda = device.cuda()
lab = target.load("05", "solutions")


@pytest.mark.parametrize("rows, cols, block, burst", [
    (2, 300, 32, 8),     # one whole burst per thread (256 columns), then the ragged end
    (2, 512, 32, 8),     # whole bursts only
    (3, 77, 32, 16),     # the ragged path only
    (2, 1, 32, 8),       # one value: 31 threads see none (their (max, sum) pairs are idle)
    (2, 40, 64, 2),      # fewer values than threads, across two warps
])
def test_staged_softmax_matches_numpy(rng, rows, cols, block, burst):
    x = checks.nonzero(rng, (rows, cols)) * np.float32(60.0)     # exp overflows without the max
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        lab.softmax_staged(cuda.to_device(x), out=out, block=block, burst=burst)
    assert launches.names() == ["softmax_staged_kernel"] and launches[0].block == (block, 1, 1), launches
    checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5, what=f"staged {rows}x{cols}")


@pytest.mark.skipif(not device.is_simulator(), reason="the traffic meter counts loads in the simulator")
def test_staged_softmax_reads_once_and_writes_once(rng):
    x = checks.nonzero(rng, (2, 300))
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out) as traffic:
        lab.softmax_staged(d_x, out=out, block=32)
    lab.softmax_ledger(2, 300, "fused", 32).check_against(traffic)


def test_staged_softmax_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="does not fit the stage"):
        lab.softmax_staged(cuda.to_device(np.ones((1, 20000), np.float32)))
    with pytest.raises(ValueError, match="whole warps"):
        lab.softmax_staged(cuda.to_device(np.ones((1, 10), np.float32)), block=16)
