"""The staged and the vectorised softmax (Lab 05's solution side, the issue-13 target): correct in
the simulator on both of their load paths (every load in the row, and the row's ragged end), on
rows shorter than the block, far from zero, and within the fused form's budget of one read and
one write per element."""

import numpy as np
import pytest

from kernellab.course import target
from kernellab.gpu import checks, device
from kernellab.gpu.launches import record_launches
from kernellab.gpu.traffic import meter

cuda = device.cuda()
lab = target.load("05", "solutions")


LAUNCHERS = {"staged": lab.softmax_staged, "vector": lab.softmax_vector}


@pytest.mark.parametrize("form, rows, cols, block, options", [
    ("staged", 2, 300, 32, {"burst": 8}),    # one whole burst per thread (256 columns), then the ragged end
    ("staged", 2, 512, 32, {"burst": 8}),    # whole bursts only
    ("staged", 3, 77, 32, {"burst": 16}),    # the ragged path only
    ("staged", 2, 1, 32, {"burst": 8}),      # one value: 31 threads see none (their (max, sum) pairs are idle)
    ("staged", 2, 40, 64, {"burst": 2}),     # fewer values than threads, across two warps
    ("vector", 2, 256, 32, {}),              # 2 vectors per thread, every load inside the row
    ("vector", 3, 76, 32, {}),               # the ragged path: 19 vectors over 32 threads
    ("vector", 2, 4, 32, {}),                # one vector: 31 threads see none
    ("vector", 2, 392, 64, {}),              # 98 vectors over 64 threads: one whole, one ragged
])
def test_solution_side_softmax_matches_numpy(rng, form, rows, cols, block, options):
    x = checks.nonzero(rng, (rows, cols)) * np.float32(60.0)     # exp overflows without the max
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        LAUNCHERS[form](cuda.to_device(x), out=out, block=block, **options)
    assert launches.names() == [f"softmax_{form}_kernel"] and launches[0].block == (block, 1, 1), launches
    checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5, what=f"{form} {rows}x{cols}")


@pytest.mark.skipif(not device.is_simulator(), reason="the traffic meter counts loads in the simulator")
@pytest.mark.parametrize("form, cols", [("staged", 300), ("vector", 264)])
def test_solution_side_softmax_reads_once_and_writes_once(rng, form, cols):
    x = checks.nonzero(rng, (2, cols))
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out) as traffic:
        LAUNCHERS[form](d_x, out=out, block=32)
    lab.softmax_ledger(2, cols, "fused", 32).check_against(traffic)


def test_solution_side_softmax_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="does not fit the stage"):
        lab.softmax_staged(cuda.to_device(np.ones((1, 20000), np.float32)))
    with pytest.raises(ValueError, match="multiple of 4"):
        lab.softmax_vector(cuda.to_device(np.ones((2, 10), np.float32)))
    for launcher in LAUNCHERS.values():
        with pytest.raises(ValueError, match="whole warps"):
            launcher(cuda.to_device(np.ones((1, 8), np.float32)), block=16)
