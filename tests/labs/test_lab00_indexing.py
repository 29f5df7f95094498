"""Graded checks for Lab 00: thread indexing and launch configuration.

Each test draws fresh random inputs (seed printed), uses sizes that are not multiples of the
block, poisons outputs before the launch, and checks that a kernel did the work.
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect, expect_coalesced
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, integers, one_of, sizes
from kernellab.grading.tape import meter, record_launches

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child


@pytest.mark.points(1)
@drawn(examples=40, n=integers(0, 2**62), block=integers(1, 1024),
       always=({"n": 7, "block": 1},                  # block 1: one thread a block, n blocks
               {"n": 384, "block": 128},              # an exact multiple: no spare block
               {"n": 0, "block": 128},
               {"n": 2**60 + 1, "block": 1024}))      # exact past float precision
def test_blocks_for_rounds_up(lab, rng, n, block):
    """blocks_for covers n with the fewest blocks and rejects bad input (drawn: any n >= 0 and
    block > 0, host arithmetic only)."""
    blocks = lab.blocks_for(n, block)
    assert blocks * block >= n > (blocks - 1) * block or n == blocks == 0, (
        f"blocks_for({n}, {block}) returned {blocks!r}")
    for bad in ((-1, 128), (10, 0), (0, 0), (0, -32)):   # block <= 0 is refused whatever n is
        with pytest.raises(ValueError):
            lab.blocks_for(*bad)


def axpb_case(lab, rng, block, n=None):
    n = n or checks.awkward_size(rng, block)
    x = checks.nonzero(rng, n)
    a = np.float32(checks.nonzero(rng, 1)[0])   # the float32 the kernel declares: a Python float
    # would compile a float64 kernel (and fail the compile check of a launcher that passes it on)
    # |b| > |a * x|: no element is zero and b dominates the norm, so float32 arithmetic (the
    # simulator's) stays in rtol
    b = np.float32(checks.nonzero(rng, 1, low=4.0, high=8.0)[0])
    return x, a, b, lab.reference_axpb(x, a, b)


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
@drawn(n=sizes(block=128, most=700), block=one_of(128, 32, 96, 256),
       always=({"n": 1, "block": 128}, {"n": 256, "block": 128}, {"n": 129, "block": 128}))
def test_axpb_matches_numpy(lab, rng, n, block):
    """axpb computes a*x + b for any size and block size (1 element, an exact multiple of the block
    and one past it, then drawn: awkward sizes, multiples and one either side), in one launch of
    axpb_kernel."""
    x, a, b, ref = axpb_case(lab, rng, block, n)
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        result = lab.axpb(cuda.to_device(x), a, b, out=out, block=block)
    checks.assert_launched(launches, "axpb_kernel", count=1)
    assert result is out, "axpb must return the `out` it was given (the course's launcher convention)"
    checks.assert_matches(result, ref, rtol=1e-6, what=f"axpb of {x.size} elements in blocks of {block}")


@pytest.mark.points(1)
def test_axpb_allocates_and_chooses_the_grid(lab, rng):
    """Without `out`, axpb allocates it; the grid is ceil(n / block) blocks of `block`."""
    block = 64
    x, a, b, ref = axpb_case(lab, rng, block)
    with record_launches() as launches:
        result = lab.axpb(cuda.to_device(x), a, b, block=block)
    checks.assert_launched(launches, "axpb_kernel", count=1)
    launch = launches[0]
    assert launch.block == (block, 1, 1), f"launched with block {launch.block}, asked for {block}"
    assert launch.grid == (-(-x.size // block), 1, 1), f"grid {launch.grid} for n={x.size}"
    checks.assert_matches(result, ref, rtol=1e-6, what="axpb")


@pytest.mark.points(1)
def test_axpb_guard_protects_memory_past_the_end(lab, rng):
    """Threads past n write nothing: a canary just past `out` survives."""
    x, a, b, ref = axpb_case(lab, rng, 128)
    canary = checks.nonzero(rng, x.size + 128)
    buffer = cuda.to_device(canary)
    out = buffer[: x.size]                         # out ends where the canary begins
    lab.axpb(cuda.to_device(x), a, b, out=out, block=128)
    tail = buffer.copy_to_host()[x.size:]
    assert np.array_equal(tail, canary[x.size:]), "a thread past the end of `out` wrote into memory"
    checks.assert_matches(out, ref, rtol=1e-6, what="axpb")


@simulator_only
@pytest.mark.points(1)
def test_axpb_memory_budget(lab, rng):
    """Budget: 1 global read of x and 1 global write of out per element, nothing else, each warp's
    loads and stores coalesced."""
    x, a, b, _ = axpb_case(lab, rng, 128)
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out, trace=("global",)) as traffic:
        lab.axpb(d_x, a, b, out=out)
    expect(traffic, "x", elements=x.size, reads=1)
    expect(traffic, "out", elements=x.size, writes=1)
    expect_coalesced(traffic, hint="lane k of a block should take element blockIdx.x * blockDim.x "
                                   "+ k: cuda.grid(1)")


def bias_case(lab, rng):
    rows = int(rng.integers(5, 12))
    cols = checks.awkward_size(rng, 32, 1, 3)
    x = checks.nonzero(rng, (rows, cols))
    bias = checks.nonzero(rng, cols)
    return x, bias, lab.reference_add_row_bias(x, bias)


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
def test_add_row_bias_2d(lab, rng):
    """2D indexing: out[r, c] = x[r, c] + bias[c] on a non-square, awkward matrix, with a block
    other than the default (16 threads along columns, 8 along rows: the kernel reads its shape
    from the launch)."""
    x, bias, ref = bias_case(lab, rng)
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        lab.add_row_bias(cuda.to_device(x), cuda.to_device(bias), out=out, block=(16, 8))
    checks.assert_launched(launches, "add_row_bias_kernel", count=1)
    assert launches[0].block == (16, 8, 1), f"launched with block {launches[0].block}, asked for (16, 8)"
    checks.assert_matches(out, ref, rtol=1e-6, what="add_row_bias")


@simulator_only
@pytest.mark.points(1)
def test_add_row_bias_memory_budget(lab, rng):
    """Budget: per element, 1 read of x, 1 read of bias, 1 write of out, coalesced."""
    x, bias, _ = bias_case(lab, rng)
    d_x, d_bias, out = cuda.to_device(x), cuda.to_device(bias), checks.poisoned(x.shape)
    with meter(x=d_x, bias=d_bias, out=out, trace=("global",)) as traffic:
        lab.add_row_bias(d_x, d_bias, out=out)
    expect(traffic, "x", elements=x.size, reads=1)
    expect(traffic, "bias", elements=x.size, reads=1)
    expect(traffic, "out", elements=x.size, writes=1)
    expect_coalesced(traffic, hint="the grid's x dimension runs along the columns: `col, row = "
                                   "cuda.grid(2)`")


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
@pytest.mark.parametrize("blocks", [3, 40])
def test_grid_stride_covers_any_grid(lab, rng, blocks):
    """The grid-stride kernel is right with fewer threads than elements, and with more."""
    x, a, b, ref = axpb_case(lab, rng, 32)
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        lab.axpb_grid_stride(cuda.to_device(x), a, b, out=out, blocks=blocks, block=32)
    checks.assert_launched(launches, "axpb_grid_stride_kernel", count=1)
    assert launches[0].grid == (blocks, 1, 1)
    checks.assert_matches(out, ref, rtol=1e-6, what=f"axpb_grid_stride with {blocks} blocks")


@simulator_only
@pytest.mark.points(1)
def test_grid_stride_memory_budget(lab, rng):
    """Looping does not re-read: still 1 read and 1 write per element over 2 to 4 passes of the
    grid, every pass coalesced."""
    blocks, block = 3, 32
    x, a, b, _ = axpb_case(lab, rng, block, n=checks.awkward_size(rng, blocks * block, 2, 4))
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out, trace=("global",)) as traffic:
        lab.axpb_grid_stride(d_x, a, b, out=out, blocks=blocks, block=block)
    expect(traffic, "x", elements=x.size, reads=1)
    expect(traffic, "out", elements=x.size, writes=1)
    expect_coalesced(traffic, hint="start at cuda.grid(1) and step by cuda.gridsize(1): in every "
                                   "pass lane k takes the element after lane k - 1's")


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

CONTRACT = [
    clause("blocks_for", "The fewest blocks of `block` threads that give each of `n` elements a thread.",
           "test_blocks_for_rounds_up"),
    clause("blocks_for", "ValueError for n < 0 or block <= 0", "test_blocks_for_rounds_up"),
    clause("blocks_for", "exact for every n (a float loses exactness past 2**53)", "test_blocks_for_rounds_up"),
    clause("axpb_kernel", "out[i] = a * x[i] + b, where i is this thread's element",
           "test_axpb_matches_numpy", "test_axpb_allocates_and_chooses_the_grid"),
    clause("axpb_kernel", "a thread whose i is past the end of out touches nothing",
           "test_axpb_guard_protects_memory_past_the_end", "test_axpb_matches_numpy"),
    clause("axpb_kernel", "1 global read and 1 global write per element, neighbouring threads on neighbouring "
           "elements (coalesced); the tests count both.", "test_axpb_memory_budget"),
    clause("axpb", "out = a * x + b, one thread per element, in blocks of `block` threads.",
           "test_axpb_matches_numpy", "test_axpb_allocates_and_chooses_the_grid"),
    clause("axpb", "x is a device array", "test_axpb_matches_numpy"),
    clause("axpb", "`out=None` allocates the output on the device", "test_axpb_allocates_and_chooses_the_grid"),
    clause("axpb", "returns out (on the device)", "test_axpb_matches_numpy", "test_axpb_allocates_and_chooses_the_grid"),
    clause("axpb", "exactly one launch of axpb_kernel", "test_axpb_matches_numpy",
           "test_axpb_allocates_and_chooses_the_grid"),
    clause("add_row_bias_kernel", "out[row, col] = x[row, col] + bias[col] for this thread's element",
           "test_add_row_bias_2d"),
    clause("add_row_bias_kernel", "a thread outside the matrix touches nothing", "test_add_row_bias_2d"),
    clause("add_row_bias_kernel", "The launcher below runs a block's x dimension along the columns.",
           "test_add_row_bias_2d", "test_add_row_bias_memory_budget"),
    clause("add_row_bias_kernel", "2 global reads (x, bias) and 1 global write per element, a warp's threads on "
           "neighbouring columns (coalesced: the tests count the sectors per warp request).",
           "test_add_row_bias_memory_budget"),
    clause("axpb_grid_stride_kernel", "out = a * x + b over every element, whatever the size of the grid "
           "(a grid-stride loop).", "test_grid_stride_covers_any_grid"),
    clause("axpb_grid_stride_kernel", "1 read and 1 write per element, no more; at every step neighbouring "
           "threads on neighbouring elements (coalesced: the tests count the sectors per warp request).",
           "test_grid_stride_memory_budget"),
]
