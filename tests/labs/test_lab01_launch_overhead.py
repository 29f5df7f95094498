"""Graded checks for Lab 01: launch overhead.

Kernels are checked on awkward sizes against a float64 NumPy reference, with poisoned outputs,
and must have done the work themselves; the fits and the floor model are checked on numbers
with a known answer. Timing itself needs a GPU and lives in experiments/lab01_launch_overhead.py.
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect, expect_coalesced
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, integers, one_of, sizes
from kernellab.grading.tape import capture, meter, record_launches

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child


@pytest.mark.points(2)
@drawn(examples=4, count=integers(1, 9))
def test_launch_chain_launches_count_tiny_kernels(lab, rng, count):
    """launch_chain adds `count` to counter[0] with `count` one-thread launches (count drawn), and
    returns the counter; count=0 launches nothing, count < 0 is a ValueError."""
    start = float(rng.integers(1, 50))
    counter = cuda.to_device(np.array([start, -7.0, -9.0], dtype=np.float32))   # counter[0] only
    with record_launches() as launches:
        result = lab.launch_chain(counter, count)
    checks.assert_launched(launches, "bump_kernel", count=count)
    assert all(l.grid == (1, 1, 1) and l.block == (1, 1, 1) for l in launches), \
        f"launch shapes {[(l.grid, l.block) for l in launches]}: one block of one thread each"
    assert result is counter, "launch_chain returns the counter it was given"
    assert counter.copy_to_host().tolist() == [start + count, -7.0, -9.0], (
        f"counter[0] grows by {count}, the rest untouched: got {counter.copy_to_host().tolist()}")
    with record_launches() as none:
        result = lab.launch_chain(counter, 0)
    assert len(none) == 0, "count=0 launches nothing"
    assert result is counter, "launch_chain returns the counter it was given, for count=0 too"
    with pytest.raises(ValueError):
        lab.launch_chain(counter, -1)


@pytest.mark.points(1)
def test_launch_chain_launches_on_the_given_stream(lab, rng):
    """launch_chain launches on `stream`: captured into a graph, each replay adds `count` again."""
    count = int(rng.integers(2, 6))
    counter = cuda.to_device(np.array([1.0], dtype=np.float32))
    graph = capture(lab.launch_chain, counter, count)
    assert graph.launches.names() == ["bump_kernel"] * count
    graph.replay()
    graph.replay()
    assert counter.copy_to_host()[0] == 1.0 + 2 * count


@simulator_only
@pytest.mark.points(1)
@drawn(examples=4, blocks=integers(2, 3), block=one_of(32, 1, 64))
def test_bump_kernel_memory_budget(lab, blocks, block):
    """Budget: one read and one write of counter[0] per launch, however many threads run
    (drawn: 2 or 3 blocks of 1 to 64 threads; an atomic add counts as one read and one write)."""
    counter = cuda.to_device(np.array([3.0], dtype=np.float32))
    with meter(counter=counter) as traffic:
        lab.bump_kernel[blocks, block](counter)
    expect(traffic, "counter", elements=1, reads=1, writes=1, per="launch")
    assert counter.copy_to_host()[0] == 4.0, \
        f"one launch of {blocks} x {block} threads adds exactly 1"


def sum8_case(lab, rng, n=None):
    n = n or checks.awkward_size(rng, 32, 1, 3)
    # positive inputs: no element's sum cancels, so float32 sums (in any order) stay in rtol
    arrays = [np.abs(checks.nonzero(rng, n)) for _ in range(8)]
    return arrays, lab.reference_sum8(arrays)


def launcher_block(block, default):
    """The keyword arguments that pass `block` (none for None: the launcher's default) and the
    block the launch must then have."""
    return ({}, default) if block is None else ({"block": block}, block)


@pytest.mark.points(2)
@drawn(examples=4, n=sizes(block=32, most=300), block=one_of(32, None, 96, 256),
       given_out=one_of(True, False))
def test_sum8_matches_numpy(lab, rng, n, block, given_out):
    """sum8 adds 8 arrays element-wise for any size and block (drawn: awkward sizes, 1, exact
    multiples of the block, the default block), in one launch of blocks of `block`; it returns
    the `out` it was given, or with out=None a device array it allocated."""
    arrays, ref = sum8_case(lab, rng, n)
    kwargs, want_block = launcher_block(block, lab.DEFAULT_BLOCK)
    out = checks.poisoned(ref.shape) if given_out else None
    with record_launches() as launches:
        result = lab.sum8([cuda.to_device(a) for a in arrays], out=out, **kwargs)
    checks.assert_launched(launches, "sum8_kernel", count=1)
    assert launches[0].block == (want_block, 1, 1), \
        f"launched with block {launches[0].block}, asked for {want_block}"
    assert launches[0].threads >= n, f"{launches[0].threads} threads for {n} elements"
    if given_out:
        assert result is out, "sum8 must return the `out` it was given"
    else:
        assert hasattr(result, "copy_to_host"), f"with out=None, sum8 returned a {type(result).__name__}, " \
            "not the device array it allocated"
    checks.assert_matches(result, ref, rtol=1e-6, what=f"sum8 of {n} elements, block {want_block}")


@pytest.mark.points(1)
def test_sum8_rejects_anything_but_8_arrays_of_one_size(lab, rng):
    """sum8 raises ValueError for 7 or 9 arrays, and for 8 arrays one of which (in the middle or at
    the end) is shorter."""
    arrays = [cuda.to_device(a) for a in sum8_case(lab, rng)[0]]
    shorter = cuda.to_device(np.ones(arrays[0].size - 1, dtype=np.float32))
    for bad in (arrays[:7], arrays + arrays[:1], arrays[:3] + [shorter] + arrays[4:],
                arrays[:7] + [shorter]):
        with pytest.raises(ValueError):
            lab.sum8(bad)


@simulator_only
@pytest.mark.points(1)
def test_sum8_memory_budget(lab, rng):
    """Budget: one read of each of the 8 inputs and one write of out per element."""
    arrays, ref = sum8_case(lab, rng)
    named = {name: cuda.to_device(a) for name, a in zip("abcdefgh", arrays)}
    out = checks.poisoned(ref.shape)
    with meter(**named, out=out) as traffic:
        lab.sum8(list(named.values()), out=out, block=32)
    for name in named:
        expect(traffic, name, elements=ref.size, reads=1)
    expect(traffic, "out", elements=ref.size, writes=1)


def rows_case(lab, rng, rows=None, n=None):
    rows = rows or int(rng.choice([3, 5, 7]))   # odd: (32, 2) blocks overhang the last row
    n = n or checks.awkward_size(rng, 32, 1, 3)
    x = checks.nonzero(rng, (rows, n))
    a = np.float32(checks.nonzero(rng, 1)[0])   # float32, as the kernels declare
    return x, a, lab.reference_scale(x, a)


@pytest.mark.points(2)
@drawn(examples=4, rows=integers(1, 6), n=sizes(block=32, most=96),
       block=one_of((32, 2), None, (16, 4), (64, 1)), given_out=one_of(True, False))
def test_scale_rows_one_launch_for_the_batch(lab, rng, rows, n, block, given_out):
    """scale_rows scales a (rows, n) batch in one 2D launch of blocks of `block` (drawn: rows, row
    lengths and blocks, the default among them), the fewest that cover every element, columns
    along x; it returns the `out` it was given, or with out=None a device array it allocated."""
    x, a, ref = rows_case(lab, rng, rows, n)
    kwargs, want = launcher_block(block, lab.DEFAULT_BLOCK)
    want = (want, 1) if isinstance(want, int) else want
    out = checks.poisoned(x.shape) if given_out else None
    with record_launches() as launches:
        result = lab.scale_rows(cuda.to_device(x), a, out=out, **kwargs)
    checks.assert_launched(launches, "scale_rows_kernel", count=1)
    launch = launches[0]
    assert launch.block == (*want, 1), f"launched with block {launch.block}, asked for {want}"
    assert launch.grid == (-(-n // want[0]), -(-rows // want[1]), 1), \
        f"grid {launch.grid} for {x.shape} in blocks of {want}: columns along x, rows along y"
    if given_out:
        assert result is out, "scale_rows must return the `out` it was given"
    else:
        assert hasattr(result, "copy_to_host"), f"with out=None, scale_rows returned a " \
            f"{type(result).__name__}, not the device array it allocated"
    checks.assert_matches(result, ref, rtol=1e-6, what=f"scale_rows of {x.shape}, block {want}")


@simulator_only
@pytest.mark.points(1)
def test_scale_rows_memory_budget(lab, rng):
    """Budget: one read and one write per element, the same bytes as one launch per row, each
    warp's loads and stores coalesced."""
    x, a, _ = rows_case(lab, rng)
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out, trace=("global",)) as traffic:
        lab.scale_rows(d_x, a, out=out, block=(32, 2))
    expect(traffic, "x", elements=x.size, reads=1)
    expect(traffic, "out", elements=x.size, writes=1)
    expect_coalesced(traffic, hint="the grid's x dimension runs along a row: `col, row = cuda.grid(2)`")


@pytest.mark.points(2)
def test_per_launch_cost_is_the_least_squares_line(lab, rng):
    """per_launch_cost returns the least-squares slope and intercept as a tuple of two floats, from
    lists or arrays, with as few as two different counts, and refuses bad input (lengths that
    differ, fewer than two different counts, 2D input)."""
    counts = np.array([1, 2, 5, 10, 20, 50, 100, 200])
    per_launch, fixed = float(rng.uniform(8, 30)), float(rng.uniform(20, 80))
    exact = fixed + per_launch * counts
    assert np.allclose(lab.per_launch_cost(counts, exact), (per_launch, fixed))
    noisy = exact * rng.uniform(0.9, 1.1, size=counts.size)
    slope, intercept = np.polyfit(counts, noisy, 1)
    got = lab.per_launch_cost(list(counts), list(noisy))
    assert np.allclose(got, (slope, intercept), rtol=1e-9), f"got {got}, least squares gives " \
        f"({slope}, {intercept})"
    assert isinstance(got, tuple) and len(got) == 2 and all(isinstance(v, float) for v in got), \
        f"per_launch_cost returned {got!r}: a tuple (slope, intercept) of two floats"
    two_counts = lab.per_launch_cost([3, 3, 7], [fixed + 3 * per_launch] * 2 + [fixed + 7 * per_launch])
    assert np.allclose(two_counts, (per_launch, fixed)), f"two different counts fit a line: {two_counts}"
    for bad in (([1, 2, 3], [1.0, 2.0]), ([5, 5, 5], [1.0, 2.0, 3.0]), ([4], [2.0]),
                ([[1, 2], [3, 4]], [[1.0, 2.0], [3.0, 4.0]])):
        with pytest.raises(ValueError):
            lab.per_launch_cost(*bad)


@pytest.mark.points(2)
def test_floor_model_and_crossover(lab, rng):
    """The floor model is max(launch, bytes / bandwidth), element-wise, with every argument drawn;
    the crossover is where the two meet, rounded up to an int; launch_us = 0 is allowed, a
    negative launch or a non-positive size or bandwidth is a ValueError."""
    launch_us = float(rng.uniform(2, 40))
    bytes_per_element = int(rng.integers(1, 17))
    gbps = float(rng.uniform(100, 5000))
    n_star = lab.crossover_size(launch_us, bytes_per_element, gbps)
    assert isinstance(n_star, int), f"crossover_size returned a {type(n_star).__name__}, not an int"
    us_per_element = bytes_per_element / (gbps * 1e3)
    exact = launch_us / us_per_element
    # the smallest n whose data takes launch_us, to float rounding (any order of the arithmetic)
    assert (n_star - 1) * us_per_element < launch_us * (1 + 1e-9) <= n_star * us_per_element * (1 + 2e-9), \
        f"crossover {n_star} for launch {launch_us} us, {bytes_per_element} B, {gbps} GB/s: want {exact} rounded up"
    assert lab.crossover_size(16.0, 8, 4000.0) == 8_000_000   # 16 us x 4e12 B/s / 8 B
    assert lab.crossover_size(1.0, 3, 1.0) == 334     # rounded up: 1000 / 3 = 333.3
    assert lab.crossover_size(1.0, 1, 1.0) == 1000    # 1 byte an element is positive: allowed
    assert lab.crossover_size(0.0, 8, 4000.0) == 0    # no launch cost: no size is launch-bound
    assert float(lab.predicted_time_us(1000, launch_us, bytes_per_element, gbps)) == launch_us
    assert float(lab.predicted_time_us(1000, 1.0, 3, 1.0)) == pytest.approx(3.0)   # 3000 B at 1 GB/s
    assert float(lab.predicted_time_us(4 * exact, launch_us, bytes_per_element, gbps)) == \
        pytest.approx(4 * launch_us)
    sizes = np.array([1, exact / 2, exact, 2 * exact, 3 * exact])
    assert np.allclose(lab.predicted_time_us(sizes, launch_us, bytes_per_element, gbps),
                       launch_us * np.array([1, 1, 1, 2, 3]))
    for bad in ((-1.0, 8, 4000.0), (16.0, 0, 4000.0), (16.0, -8, 4000.0), (16.0, 8, 0.0)):
        with pytest.raises(ValueError):
            lab.crossover_size(*bad)


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

CHAIN = ("test_launch_chain_launches_count_tiny_kernels",)
SUM8 = ("test_sum8_matches_numpy",)
ROWS = ("test_scale_rows_one_launch_for_the_batch",)
FIT = ("test_per_launch_cost_is_the_least_squares_line",)
FLOOR = ("test_floor_model_and_crossover",)

CONTRACT = [
    clause("bump_kernel", "counter[0] grows by exactly 1 per launch, however many threads are launched.",
           "test_bump_kernel_memory_budget", *CHAIN),
    clause("bump_kernel", "1 read and 1 write of counter[0] per launch (an atomic add counts as 1 read and "
           "1 write).", "test_bump_kernel_memory_budget"),
    clause("launch_chain", "counter[0] += count, by `count` one-thread launches of bump_kernel;", *CHAIN),
    clause("launch_chain", "returns counter.", *CHAIN),
    clause("launch_chain", "ValueError for count < 0;", *CHAIN),
    clause("launch_chain", "`count` launches of bump_kernel, one block of one thread each, on `stream`",
           *CHAIN, "test_launch_chain_launches_on_the_given_stream"),
    clause("launch_chain", "(Lab 08 captures this function into a graph);",
           "test_launch_chain_launches_on_the_given_stream"),
    clause("sum8_kernel", "out[i] = the sum of the 8 inputs at i, one thread per element.", *SUM8),
    clause("sum8_kernel", "8 global reads and 1 global write per element; the tests count them.",
           "test_sum8_memory_budget"),
    clause("sum8", "out = the element-wise sum of 8 equally long device arrays, in one launch.", *SUM8),
    clause("sum8", "ValueError unless there are exactly 8 arrays of one size;",
           "test_sum8_rejects_anything_but_8_arrays_of_one_size"),
    clause("sum8", "`out=None` allocates it on the device;", *SUM8),
    clause("sum8", "returns out.", *SUM8),
    clause("sum8", "exactly one launch of sum8_kernel, in blocks of `block` threads.", *SUM8),
    clause("scale_rows_kernel", "out[row, col] = a * x[row, col], one thread per element, the grid's x "
           "along a row.", *ROWS, "test_scale_rows_memory_budget"),
    clause("scale_rows_kernel", "1 global read and 1 write per element, coalesced.",
           "test_scale_rows_memory_budget"),
    clause("scale_rows", "out = a * x for a (rows, n) batch in one 2D launch: pays the launch cost once.",
           *ROWS),
    clause("scale_rows", "`out=None` allocates it on the device;", *ROWS),
    clause("scale_rows", "returns out.", *ROWS),
    clause("scale_rows", "exactly one launch of scale_rows_kernel, whatever the number of rows, in blocks "
           "of `block` (threads along a row, then across rows), the fewest that cover the batch.", *ROWS),
    clause("per_launch_cost", "(per_launch_us, fixed_us): the least-squares line total = fixed + "
           "per_launch * count.", *FIT),
    clause("per_launch_cost", "ValueError unless counts and total_us are 1D, of one length, with at least "
           "two different counts;", *FIT),
    clause("per_launch_cost", "returns (slope, intercept) of the least-squares line, as floats.", *FIT),
    clause("predicted_time_us", "Time of one memory-bound launch over n elements: whichever is longer, "
           "launch or data.", *FLOOR),
    clause("predicted_time_us", "Works element-wise on NumPy arrays of n.", *FLOOR),
    clause("predicted_time_us", "The longer of launch_us and the time to move n * bytes_per_element bytes "
           "at bandwidth_gbps (1 GB/s moves 1e3 bytes per microsecond);", *FLOOR),
    clause("predicted_time_us", "element-wise when n is an array.", *FLOOR),
    clause("crossover_size", "Elements at which moving the data takes as long as a launch (rounded up).",
           *FLOOR),
    clause("crossover_size", "ValueError for launch_us < 0 or a bytes_per_element or bandwidth_gbps that "
           "is not positive;", *FLOOR),
    clause("crossover_size", "returns the n where moving the data takes launch_us, rounded up to an int.",
           *FLOOR),
]
