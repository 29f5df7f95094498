"""Graded checks for Lab 01: launch overhead.

Kernels are checked on awkward sizes against a float64 NumPy reference, with poisoned outputs,
and must have done the work themselves; the fits and the floor model are checked on numbers
with a known answer. Timing itself needs a GPU and lives in experiments/lab01_launch_overhead.py.
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect
from kernellab.grading.tape import capture, meter, record_launches

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child


@pytest.mark.points(2)
def test_launch_chain_launches_count_tiny_kernels(lab, rng):
    """launch_chain adds `count` to counter[0] with `count` one-thread launches."""
    start = float(rng.integers(1, 50))
    count = int(rng.integers(3, 9))
    counter = cuda.to_device(np.array([start], dtype=np.float32))
    with record_launches() as launches:
        result = lab.launch_chain(counter, count)
    checks.assert_launched(launches, "bump_kernel", count=count)
    assert all(l.grid == (1, 1, 1) and l.block == (1, 1, 1) for l in launches), \
        f"launch shapes {[(l.grid, l.block) for l in launches]}: one block of one thread each"
    assert result is counter, "launch_chain returns the counter it was given"
    assert counter.copy_to_host()[0] == start + count
    with record_launches() as none:
        lab.launch_chain(counter, 0)
    assert len(none) == 0, "count=0 launches nothing"
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
def test_bump_kernel_memory_budget(lab):
    """Budget: one read and one write of counter[0] per launch, however many threads run
    (an atomic add counts as one read and one write)."""
    counter = cuda.to_device(np.array([3.0], dtype=np.float32))
    with meter(counter=counter) as traffic:
        lab.bump_kernel[2, 32](counter)
    expect(traffic, "counter", elements=1, reads=1, writes=1, per="launch")
    assert counter.copy_to_host()[0] == 4.0, "one launch of 64 threads adds exactly 1"


def sum8_case(lab, rng):
    n = checks.awkward_size(rng, 32, 1, 3)
    arrays = [checks.nonzero(rng, n) for _ in range(8)]
    return arrays, lab.reference_sum8(arrays)


@pytest.mark.points(2)
def test_sum8_matches_numpy(lab, rng):
    """sum8 adds 8 arrays element-wise on an awkward size, in one launch."""
    arrays, ref = sum8_case(lab, rng)
    checks.assert_matches(lab.sum8([cuda.to_device(a) for a in arrays]), ref, rtol=1e-6,
                          what="sum8 with out=None")
    out = checks.poisoned(ref.shape)
    with record_launches() as launches:
        result = lab.sum8([cuda.to_device(a) for a in arrays], out=out, block=32)
    checks.assert_launched(launches, "sum8_kernel", count=1)
    assert launches[0].threads >= ref.size
    checks.assert_matches(result, ref, rtol=1e-6, what="sum8")
    for n in (1, 33):                      # one element; one more than a block of 32
        # positive inputs: one element's sum never cancels, so float32 sums (any order) stay in rtol
        small = [np.abs(checks.nonzero(rng, n)) for _ in range(8)]
        out = checks.poisoned(n)
        lab.sum8([cuda.to_device(a) for a in small], out=out, block=32)
        checks.assert_matches(out, lab.reference_sum8(small), rtol=1e-6, what=f"sum8 of {n} elements")
    with pytest.raises(ValueError):
        lab.sum8([cuda.to_device(a) for a in arrays[:7]])
    with pytest.raises(ValueError):
        lab.sum8([cuda.to_device(a) for a in arrays[:7]] + [cuda.to_device(arrays[7][:-1])])


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


def rows_case(lab, rng, block_cols):
    rows = int(rng.choice([3, 5, 7]))   # odd: (32, 2) blocks overhang the last row
    n = checks.awkward_size(rng, block_cols, 1, 3)
    x = checks.nonzero(rng, (rows, n))
    a = np.float32(checks.nonzero(rng, 1)[0])   # float32, as the kernels declare
    return x, a, lab.reference_scale(x, a)


@pytest.mark.points(2)
def test_scale_rows_one_launch_for_the_batch(lab, rng):
    """scale_rows scales a (rows, n) batch in one 2D launch covering every element."""
    x, a, ref = rows_case(lab, rng, 32)
    checks.assert_matches(lab.scale_rows(cuda.to_device(x), a), ref, rtol=1e-6,
                          what="scale_rows with out=None")
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        result = lab.scale_rows(cuda.to_device(x), a, out=out, block=(32, 2))
    checks.assert_launched(launches, "scale_rows_kernel", count=1)
    launch = launches[0]
    assert launch.block == (32, 2, 1), f"launched with block {launch.block}, asked for (32, 2)"
    assert launch.grid == (-(-x.shape[1] // 32), -(-x.shape[0] // 2), 1), \
        f"grid {launch.grid} for {x.shape}: columns along x, rows along y"
    checks.assert_matches(result, ref, rtol=1e-6, what="scale_rows")


@simulator_only
@pytest.mark.points(1)
def test_scale_rows_memory_budget(lab, rng):
    """Budget: one read and one write per element, the same bytes as one launch per row."""
    x, a, _ = rows_case(lab, rng, 32)
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape)
    with meter(x=d_x, out=out) as traffic:
        lab.scale_rows(d_x, a, out=out, block=(32, 2))
    expect(traffic, "x", elements=x.size, reads=1)
    expect(traffic, "out", elements=x.size, writes=1)


@pytest.mark.points(2)
def test_per_launch_cost_is_the_least_squares_line(lab, rng):
    """per_launch_cost returns the least-squares slope and intercept, and refuses bad input."""
    counts = np.array([1, 2, 5, 10, 20, 50, 100, 200])
    per_launch, fixed = float(rng.uniform(8, 30)), float(rng.uniform(20, 80))
    exact = fixed + per_launch * counts
    assert np.allclose(lab.per_launch_cost(counts, exact), (per_launch, fixed))
    noisy = exact * rng.uniform(0.9, 1.1, size=counts.size)
    slope, intercept = np.polyfit(counts, noisy, 1)
    got = lab.per_launch_cost(list(counts), list(noisy))
    assert np.allclose(got, (slope, intercept), rtol=1e-9), f"got {got}, least squares gives " \
        f"({slope}, {intercept})"
    for bad in (([1, 2, 3], [1.0, 2.0]), ([5, 5, 5], [1.0, 2.0, 3.0]), ([4], [2.0])):
        with pytest.raises(ValueError):
            lab.per_launch_cost(*bad)


@pytest.mark.points(2)
def test_floor_model_and_crossover(lab):
    """The floor model is max(launch, bytes / bandwidth); the crossover is where they meet."""
    launch_us, bytes_per_element, gbps = 16.0, 8, 4000.0
    n_star = lab.crossover_size(launch_us, bytes_per_element, gbps)
    assert n_star == 8_000_000                       # 16 us x 4e12 B/s / 8 B
    assert lab.crossover_size(1.0, 3, 1.0) == 334     # rounded up: 1000 / 3 = 333.3
    assert float(lab.predicted_time_us(1000, launch_us, bytes_per_element, gbps)) == launch_us
    assert float(lab.predicted_time_us(4 * n_star, launch_us, bytes_per_element, gbps)) == \
        pytest.approx(4 * launch_us)
    sizes = np.array([1, 10**6, n_star, 2 * n_star])
    assert np.allclose(lab.predicted_time_us(sizes, launch_us, bytes_per_element, gbps),
                       [16, 16, 16, 32])
    for bad in ((-1.0, 8, 4000.0), (16.0, 0, 4000.0), (16.0, 8, 0.0)):
        with pytest.raises(ValueError):
            lab.crossover_size(*bad)
