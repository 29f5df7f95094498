"""Graded checks for Lab 05: reduction fusion (row softmax and layernorm).

A few rows of awkward length (not a multiple of the block), blocks of 32 threads so the simulator
stays quick, outputs poisoned before each launch, and every check asserts which kernel ran.
"""

import numpy as np
import pytest
from hypothesis import strategies

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect, expect_coalesced, expect_only
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, integers, one_of, sizes
from kernellab.grading.tape import meter, record_launches
from kernellab.gpu.traffic import Ledger

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child
BLOCK = 32
EPS = 1e-5
FAR_BELOW_ZERO = -300.0   # a row there: exp(value - 0) underflows, so a max started at 0 gives 0 / 0
STRIDED_COLUMNS = ("thread tid takes columns tid, tid + blockDim.x, ...: the 32 lanes of a warp "
                   "read 32 neighbouring columns")


# (items, max_registers) of the fused kernels the lab names at module level, the only ones the
# grader's compile check can load: the default (8 values per thread), 512 x 16 and 256 x 32.
NAMED_FUSED = ((None, None), (16, 128), (32, None))


def fused_shapes(fused=NAMED_FUSED):
    """(block, (items, max_registers), cols) within the fused kernels' contract: any power-of-two
    block (1 to 128 here: the simulator's cost grows with the threads), one of `fused`, and any row
    that fits (up to items * block columns): awkward lengths, 1, exact multiples of the block and
    one either side."""
    def shapes(block_and_kernel):
        block, (items, max_registers) = block_and_kernel
        return strategies.tuples(strategies.just(block), strategies.just((items, max_registers)),
                                 sizes(block=block, most=min((items or 8) * block, 600)))
    return strategies.tuples(one_of(32, 64, 16, 128, 1, 4), one_of(*fused)).flatmap(shapes)


def rows_case(rng, scale=3.0, offset=0.0, cols=None, rows=None):
    rows = rows or int(rng.integers(2, 5))
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
@drawn(examples=4, shape=fused_shapes(), rows=integers(1, 3),
       always=({"shape": (BLOCK, (None, None), 8 * BLOCK), "rows": 2},   # every thread's 8 slots full
               {"shape": (BLOCK, (16, 128), 300), "rows": 2}))          # 10 of 16 values per thread
def test_softmax_fused_matches_numpy(lab, rng, shape, rows):
    """05.1: fused softmax, one block of `block` threads per row: rows that fill every thread's 8
    values, 16 values per thread under a register cap, then drawn: blocks from 1 to 128, `items` and
    `max_registers` at their defaults or as the lab's named kernels take them (16 under 128
    registers, 32), awkward lengths, exact multiples of the block and one either side."""
    block, (items, max_registers), cols = shape
    x = rows_case(rng, cols=cols, rows=rows)
    out, launch = run_softmax(lab, lab.softmax_fused, "softmax_fused_kernel", x, block=block, items=items,
                              max_registers=max_registers)
    assert launch.grid == (x.shape[0], 1, 1) and launch.block == (block, 1, 1), launch
    checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5,
                          what=f"softmax_fused, {rows} rows of {cols} on {block} threads, items={items}")


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
@drawn(examples=3, block=one_of(2 * BLOCK, None, BLOCK, 16, 128, 1, 4), cols=sizes(block=64, most=500),
       always=({"block": 2 * BLOCK, "cols": 256},))
def test_softmax_online_matches_numpy(lab, rng, block, cols):
    """05.2: online softmax, with rows whose maximum keeps growing (the running sum is rescaled)
    and a last row near -300 (a running max started at 0 underflows every exp): a row the block
    divides, then drawn: any power-of-two block from 1 to 128 or the launcher's (block=None), any
    row length (awkward ones above all)."""
    x = rows_case(rng, scale=20.0, cols=cols, rows=2)
    x[0] = np.sort(x[0])                               # each new value is a new maximum
    x[-1] += np.float32(FAR_BELOW_ZERO)
    out, launch = run_softmax(lab, lab.softmax_online, "softmax_online_kernel", x, block=block)
    threads = block or lab.row_block(cols)
    assert launch.grid == (x.shape[0], 1, 1) and launch.block == (threads, 1, 1), launch
    checks.assert_matches(out, lab.softmax_reference(x), rtol=1e-5,
                          what=f"softmax_online, rows of {cols} on {threads} threads")


@simulator_only   # on a GPU too: unwritten shared memory and races show here only
@pytest.mark.points(1)
def test_softmax_online_with_idle_threads(lab, rng):
    """05.2: rows shorter than the block: threads that saw no value must not spoil the sums.
    Fixed lengths on both sides of every halving step of a 32-thread tree, and a random one."""
    for cols in (1, 2, 7, 15, 16, 17, 31, int(rng.integers(3, 31))):
        x = rows_case(rng, scale=60.0, cols=cols, rows=2)
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


@pytest.mark.points(1)
@drawn(examples=3, shape=fused_shapes(fused=((None, None),)), offset=one_of(40.0, 0.0, 300.0),
       eps=one_of(EPS, 1e-3), always=({"shape": (BLOCK, (None, None), 8 * BLOCK), "offset": 300.0, "eps": EPS},))
def test_layernorm_fused_any_block(lab, rng, shape, offset, eps):
    """05.3: fused layernorm on rows that fill every thread's 8 values, then drawn: blocks from 1
    to 128, rows that fit, means of 0 to 300, eps given. (Only the 8-value layernorm kernel is
    named at module level, so only it is graded.)"""
    block, (items, _), cols = shape
    x = rows_case(rng, scale=1.0, offset=offset, cols=cols, rows=2)
    gamma, beta = affine(rng, cols)
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        lab.layernorm_fused(*(cuda.to_device(v) for v in (x, gamma, beta)), out=out, eps=eps, block=block,
                            items=items)
    checks.assert_launched(launches, "layernorm_fused_kernel", count=1)
    assert launches[0].block == (block, 1, 1), launches
    checks.assert_matches(out, lab.layernorm_reference(x, gamma, beta, eps), rtol=1e-4,
                          what=f"layernorm_fused, rows of {cols} about {offset:g} on {block} threads, "
                               f"items={items}, eps {eps:g}")


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
@drawn(examples=15, rows=integers(1, 10_000), cols=integers(1, 10_000), block=one_of(32, 512, 64, 1, 1024, 128, 2))
def test_ledgers_are_right(lab, op, rows, cols, block):
    """05.4: each form's elements per array, a Ledger, for listed and drawn shapes and blocks;
    ValueError for any other form."""
    make = lab.softmax_ledger if op == "softmax" else lab.layernorm_ledger
    for rows, cols, block in [(3, 100, 32), (8192, 8192, 512), (7, 33, 64), (rows, cols, block)]:
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


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------
# "float32 throughout": the grader compiles every kernel a graded test launched for a real GPU and
# fails the test on float64 arithmetic (kernellab.grading.compile_check). fused_kernels states its
# own docstring and both kernels' comments; each kernel's clauses are repeated under its own name.

SOFTMAX_FUSED = [
    ("out[row] = softmax(x[row]), one block per row;", ("test_softmax_fused_matches_numpy",
                                                        "test_softmax_fused_is_stable_and_any_length")),
    ("each thread keeps its ITEMS values of the row in registers (loops over range(ITEMS) only), reads them "
     "coalesced (the tests count the sectors per request), and the block combines max and sum.",
     ("test_softmax_fused_matches_numpy", "test_softmax_fused_memory_budget")),
    ("1 read of x and 1 write of out per element, nothing else.", ("test_softmax_fused_memory_budget",
                                                                   "test_ledgers_agree_with_the_meter")),
]
LAYERNORM_FUSED = [
    ("out = (x - mean) / sqrt(variance + eps) * gamma + beta per row, the row cached as in softmax_fused_kernel;",
     ("test_layernorm_fused_matches_numpy", "test_layernorm_fused_any_block")),
    ("the variance about the mean, from the cache (not E[x^2] - mean^2, which loses the digits when the mean is "
     "large: the tests take rows whose mean is up to 300, to a relative error of 1e-4);",
     ("test_layernorm_fused_matches_numpy", "test_layernorm_fused_any_block")),
    ("float32 throughout.", ("test_layernorm_fused_matches_numpy",)),
    ("1 read of x, gamma and beta and 1 write of out per element.", ("test_layernorm_fused_memory_budget",
                                                                      "test_ledgers_agree_with_the_meter")),
]

CONTRACT = [
    clause("softmax_online_kernel", "out[row] = softmax(x[row]), one block per row;",
           "test_softmax_online_matches_numpy", "test_softmax_online_with_idle_threads"),
    clause("softmax_online_kernel", "max and sum in one pass over the row (a running max, the running sum rescaled "
           "when the max grows), then a second pass writes out;", "test_softmax_online_matches_numpy",
           "test_softmax_online_memory_budget"),
    clause("softmax_online_kernel", "coalesced loads (the tests count the sectors per request);",
           "test_softmax_online_memory_budget"),
    clause("softmax_online_kernel", "float32 throughout.", "test_softmax_online_matches_numpy"),
    clause("softmax_online_kernel", "2 reads of x and 1 write of out per element.",
           "test_softmax_online_memory_budget", "test_ledgers_agree_with_the_meter"),
    clause("fused_kernels", "The fused kernels for rows of up to `items` values per thread (any block size).",
           "test_softmax_fused_matches_numpy", "test_layernorm_fused_any_block"),
    clause("fused_kernels", "A local array stays in registers only when its size and every index are compile-time "
           "constants, so each count is its own kernel.", "test_softmax_fused_matches_numpy"),
    clause("fused_kernels", "max_registers caps the registers (GPU only; ptxas spills the rest).",
           "test_softmax_fused_matches_numpy"),
    *[clause("fused_kernels", says, *checks) for says, checks in SOFTMAX_FUSED + LAYERNORM_FUSED],
    *[clause("softmax_fused_kernel", says, *checks) for says, checks in SOFTMAX_FUSED],
    *[clause("layernorm_fused_kernel", says, *checks) for says, checks in LAYERNORM_FUSED],
    clause("softmax_ledger", "The elements each form of softmax loads and stores, per array (x, out; row_max and "
           "row_sum are the unfused form's temporaries), with `block` threads per row.",
           "test_ledgers_are_right", "test_ledgers_agree_with_the_meter"),
    clause("softmax_ledger", "The tests compare each array's reads, writes, itemsize and which are temporary; "
           "`distinct=` is not compared.", "test_ledgers_are_right"),
    clause("softmax_ledger", "a Ledger (kernellab.lab) per form, in elements: fused reads x once and writes out "
           "once; online reads x twice.", "test_ledgers_are_right", "test_ledgers_agree_with_the_meter"),
    clause("softmax_ledger", "each kernel reads x once, row_max and row_sum are written once per row, and every "
           "thread of a later kernel reads its row's statistics once (rows * block reads per kernel that uses "
           "one), marked temporary=True.", "test_ledgers_are_right", "test_ledgers_agree_with_the_meter"),
    clause("softmax_ledger", "ValueError for any other form.", "test_ledgers_are_right"),
    clause("layernorm_ledger", "The elements each form of layernorm loads and stores, per array (x, gamma, beta, "
           "out; mean and rstd are the unfused form's temporaries), with `block` threads per row.",
           "test_ledgers_are_right", "test_ledgers_agree_with_the_meter"),
    clause("layernorm_ledger", "gamma's and beta's reads touch only cols distinct elements: declaring "
           "`distinct=cols` or leaving it out both pass (the tests compare reads, writes, itemsize and "
           "temporaries, as softmax_ledger).", "test_ledgers_are_right"),
    clause("layernorm_ledger", "as softmax_ledger, plus gamma and beta read once per element; the unfused form's "
           "temporaries are mean and rstd.", "test_ledgers_are_right", "test_ledgers_agree_with_the_meter"),
]
