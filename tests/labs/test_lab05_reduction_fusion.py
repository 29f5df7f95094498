"""Graded checks for Lab 05: reduction fusion (row softmax and layernorm).

A few rows of awkward length (not a multiple of the block), blocks of 32 threads so the simulator
stays quick, outputs poisoned before each launch, and every check asserts which kernel ran.
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect, expect_coalesced, expect_only
from kernellab.grading.tape import meter, record_launches
from kernellab.gpu.traffic import Ledger

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child
BLOCK = 32
EPS = 1e-5
FAR_BELOW_ZERO = -300.0   # a row there: exp(value - 0) underflows, so a max started at 0 gives 0 / 0
STRIDED_COLUMNS = ("thread tid takes columns tid, tid + blockDim.x, ...: the 32 lanes of a warp "
                   "read 32 neighbouring columns")


def rows_case(rng, scale=3.0, offset=0.0, cols=None):
    rows = int(rng.integers(2, 5))
    cols = cols or checks.awkward_size(rng, BLOCK, 2, 6)
    return checks.nonzero(rng, (rows, cols)) * np.float32(scale) + np.float32(offset)


def affine(rng, cols):
    return checks.nonzero(rng, cols), checks.nonzero(rng, cols)


def run_softmax(lab, launcher, kernel, x, **options):
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        launcher(cuda.to_device(x), out=out, **options)
    checks.assert_launched(launches, kernel, count=1)
    assert len(launches) == 1, f"one kernel does it all; saw {launches.names()}"
    return out, launches[0]


@pytest.mark.points(2)
def test_softmax_fused_matches_numpy(lab, rng):
    """05.1: fused softmax on awkward rows, one block of `block` threads per row."""
    x = rows_case(rng)
    out, launch = run_softmax(lab, lab.softmax_fused, "softmax_fused_kernel", x, block=BLOCK)
    assert launch.grid == (x.shape[0], 1, 1) and launch.block == (BLOCK, 1, 1), launch
    checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5, what="softmax_fused")


@simulator_only   # on a GPU too: unwritten shared memory and races show here only
@pytest.mark.points(1)
def test_softmax_fused_is_stable_and_any_length(lab, rng):
    """05.1: inputs near +-100 (exp would overflow without subtracting the max) and a last row
    near -300 (every value negative: a max started at 0 underflows every exp); rows of 1, 13 and 33
    columns on 32 threads, and long ones on the launcher's block of 64 (the stride is the block)."""
    long_cols = checks.awkward_size(rng, 64, 5, 8)   # 320-511 columns: row_block picks 64 threads
    # one value; fewer values than threads; one more than the block; the launcher's block
    for cols, block in [(1, 32), (13, 32), (33, 32), (long_cols, None)]:
        x = rows_case(rng, scale=60.0, cols=cols)
        x[-1] += np.float32(FAR_BELOW_ZERO)
        out, launch = run_softmax(lab, lab.softmax_fused, "softmax_fused_kernel", x, block=block)
        assert launch.block == (block or 64, 1, 1), launch
        checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5, what=f"softmax_fused, {cols} columns")


@simulator_only
@pytest.mark.points(2)
def test_softmax_fused_memory_budget(lab, rng):
    """05.1: x read once and out written once per element, coalesced; no other global memory."""
    x = rows_case(rng)
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out, trace=("global",)) as traffic:
        lab.softmax_fused(d_x, out=out, block=BLOCK)
    expect(traffic, "x", elements=x.size, reads=1)
    expect(traffic, "out", elements=x.size, writes=1)
    expect_only(traffic, "x", "out")
    expect_coalesced(traffic, hint=STRIDED_COLUMNS)


@pytest.mark.points(2)
def test_softmax_online_matches_numpy(lab, rng):
    """05.2: online softmax, with rows whose maximum keeps growing (the running sum is rescaled)
    and a last row near -300 (a running max started at 0 underflows every exp)."""
    x = rows_case(rng, scale=20.0)
    x[0] = np.sort(x[0])                               # each new value is a new maximum
    x[-1] += np.float32(FAR_BELOW_ZERO)
    out, launch = run_softmax(lab, lab.softmax_online, "softmax_online_kernel", x, block=2 * BLOCK)
    assert launch.grid == (x.shape[0], 1, 1) and launch.block == (2 * BLOCK, 1, 1), launch
    checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5, what="softmax_online")


@simulator_only   # on a GPU too: unwritten shared memory and races show here only
@pytest.mark.points(1)
def test_softmax_online_with_idle_threads(lab, rng):
    """05.2: rows shorter than the block: threads that saw no value must not spoil the sums.
    Fixed lengths on both sides of every halving step of a 32-thread tree, and a random one."""
    for cols in (1, 2, 7, 15, 16, 17, 31, int(rng.integers(3, 31))):
        x = rows_case(rng, scale=60.0, cols=cols)
        out, _ = run_softmax(lab, lab.softmax_online, "softmax_online_kernel", x, block=BLOCK)
        checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5,
                              what=f"softmax_online, rows of {cols} columns on {BLOCK} threads")


@simulator_only
@pytest.mark.points(1)
def test_softmax_online_memory_budget(lab, rng):
    """05.2: x read twice (statistics, then normalize) and out written once per element, both
    passes coalesced."""
    x = rows_case(rng)
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out, trace=("global",)) as traffic:
        lab.softmax_online(d_x, out=out, block=BLOCK)
    expect(traffic, "x", elements=x.size, reads=2)
    expect(traffic, "out", elements=x.size, writes=1)
    expect_only(traffic, "x", "out")
    expect_coalesced(traffic, hint=STRIDED_COLUMNS)


@pytest.mark.points(2)
def test_layernorm_fused_matches_numpy(lab, rng):
    """05.3: fused layernorm, rows far from zero (means 40 and 300): the variance is taken about the
    mean (E[x^2] - mean^2 is off by 6e-4 to 3.5e-3 at 300); rows shorter than the block (idle threads
    add nothing to the variance) and one column more than the block; rows whose variance (about
    2e-6) is below eps, with a constant first row (variance 0), and an eps of 1e-4 to 1e-3: eps
    inside the square root, and the eps given."""
    block = 2 * BLOCK                          # two warps: a stride hard-coded to 32 shows up
    low_eps = float(rng.uniform(1e-4, 1e-3))
    for offset, scale, cols, eps in ((40.0, 1.0, None, EPS), (300.0, 1.0, None, EPS),
                                     (300.0, 1.0, 13, EPS), (40.0, 1.0, block + 1, EPS),
                                     (0.0, 1e-3, None, low_eps)):
        x = rows_case(rng, scale=scale, offset=offset, cols=cols)
        if scale < 1.0:
            x[0] = np.float32(0.75)            # constant: the sum and the mean are exact
        gamma, beta = affine(rng, x.shape[1])
        out = checks.poisoned(x.shape)
        with record_launches() as launches:
            lab.layernorm_fused(*(cuda.to_device(v) for v in (x, gamma, beta)), out=out, eps=eps,
                                block=block)
        checks.assert_launched(launches, "layernorm_fused_kernel", count=1)
        assert len(launches) == 1 and launches[0].grid == (x.shape[0], 1, 1), launches
        assert launches[0].block == (block, 1, 1), launches
        checks.assert_matches(out, lab.layernorm_reference(x, gamma, beta, eps), rtol=1e-4,
                              what=f"layernorm_fused, {x.shape[1]} columns about a mean of {offset:g} "
                                   f"with a spread of {scale:g} and eps {eps:.3g}")


@simulator_only
@pytest.mark.points(1)
def test_layernorm_fused_memory_budget(lab, rng):
    """05.3: x, gamma and beta read once per element, out written once, coalesced; nothing else."""
    x = rows_case(rng)
    gamma, beta = affine(rng, x.shape[1])
    named = {"x": x, "gamma": gamma, "beta": beta}
    arrays = {k: cuda.to_device(v) for k, v in named.items()}
    out = checks.poisoned(x.shape)
    with meter(**arrays, out=out, trace=("global",)) as traffic:
        lab.layernorm_fused(arrays["x"], arrays["gamma"], arrays["beta"], out=out, block=BLOCK)
    for name in named:
        expect(traffic, name, elements=x.size, reads=1)
    expect(traffic, "out", elements=x.size, writes=1)
    expect_only(traffic, *named, "out")
    expect_coalesced(traffic, hint=STRIDED_COLUMNS)


def expected_ledger(op, rows, cols, form, block):
    """What each form moves, array by array (the reference for 05.4)."""
    n = rows * cols
    stats = ("row_max", "row_sum") if op == "softmax" else ("mean", "rstd")
    ledger = Ledger("expected").add(op, "x", reads={"fused": 1, "online": 2, "unfused": 3}[form] * n)
    if op == "layernorm":
        ledger.add(op, "gamma", reads=n).add(op, "beta", reads=n)
    if form == "unfused":
        ledger.add(op, stats[0], reads=2 * rows * block, writes=rows, temporary=True)
        ledger.add(op, stats[1], reads=rows * block, writes=rows, temporary=True)
    return ledger.add(op, "out", writes=n)


@pytest.mark.points(2)
@pytest.mark.parametrize("op", ["softmax", "layernorm"])
def test_ledgers_are_right(lab, op):
    """05.4: each form's elements per array, for several shapes and blocks."""
    make = lab.softmax_ledger if op == "softmax" else lab.layernorm_ledger
    for rows, cols, block in [(3, 100, 32), (8192, 8192, 512), (7, 33, 64)]:
        for form in ("unfused", "fused", "online"):
            got, want = make(rows, cols, form, block), expected_ledger(op, rows, cols, form, block)
            assert isinstance(got, Ledger), f"{make.__name__} must return a kernellab.gpu.traffic.Ledger"
            assert got == want and got.temporaries() == want.temporaries(), (
                f"{op} {form}, {rows}x{cols}, block {block}:\nyours:\n{got.by_array().table()}"
                f"\nexpected:\n{want.by_array().table()}")
    with pytest.raises(ValueError):
        make(2, 10, "sideways", 32)


@simulator_only
@pytest.mark.points(1)
@pytest.mark.parametrize("op", ["softmax", "layernorm"])
def test_ledgers_agree_with_the_meter(lab, rng, op):
    """05.4: the ledgers match what every form's kernels really loaded and stored."""
    x = rows_case(rng)
    rows, cols = x.shape
    named = {"x": cuda.to_device(x)}
    if op == "layernorm":
        named["gamma"], named["beta"] = (cuda.to_device(v) for v in affine(rng, cols))
    table = lab.VARIANTS if op == "softmax" else lab.LAYERNORM_VARIANTS
    make = lab.softmax_ledger if op == "softmax" else lab.layernorm_ledger
    for form, (launcher, _why) in table.items():
        out = checks.poisoned(x.shape)
        with meter(**named, out=out) as traffic:
            launcher(*named.values(), out=out, block=BLOCK)
        make(rows, cols, form, BLOCK).check_against(traffic)


# --- The given forms and the launch rules (not graded) ------------------------------------------

@pytest.mark.parametrize("form", ["unfused", "online"])
def test_given_layernorm_forms_match_numpy(lab, rng, form):
    x = rows_case(rng, scale=1.0, offset=40.0)
    gamma, beta = affine(rng, x.shape[1])
    launcher, _why = lab.LAYERNORM_VARIANTS[form]
    out = checks.poisoned(x.shape)
    launcher(*(cuda.to_device(v) for v in (x, gamma, beta)), out=out, eps=EPS, block=BLOCK)
    checks.assert_matches(out, lab.layernorm_reference(x, gamma, beta, EPS), rtol=1e-4, what=f"layernorm {form}")


def test_given_unfused_softmax_matches_numpy(lab, rng):
    x = rows_case(rng, scale=60.0)
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        lab.softmax_unfused(cuda.to_device(x), out=out, block=BLOCK)
    assert launches.names() == ["row_max_kernel", "row_exp_sum_kernel", "softmax_normalize_kernel"]
    checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5, what="softmax_unfused")


def test_launch_shape_rules(lab):
    assert [lab.row_block(cols) for cols in (10, 300, 8192, 100_000)] == [32, 64, 1024, 1024]
    assert lab.fused_items(8192, 1024) == 8 and lab.fused_items(16384, 1024) == 16
    assert lab.fused_items(8192, 256, items=32) == 32
    with pytest.raises(ValueError, match="power of two"):
        lab.row_block(100, 48)
    with pytest.raises(ValueError, match="online"):
        lab.fused_items(100_000, 1024)
    with pytest.raises(ValueError, match="float32 matrix"):
        lab.softmax_online(cuda.to_device(np.ones(5, np.float32)))
