"""Graded checks for Lab 08: CUDA Graphs.

Inputs are fresh random values (seed printed) on sizes that are not multiples of the block; every
result is compared with a float64 NumPy reference, and a kernel must have done the work.
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect
from kernellab.grading.tape import capture, meter, record_launches, replays_counted

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child


def random_coeffs(rng, steps):
    """(a, b) pairs with |a| in [0.5, 2): the chain neither vanishes nor blows up."""
    return [(np.float32(a), np.float32(b))            # float32, as affine_step_kernel declares
            for a, b in zip(checks.nonzero(rng, steps), checks.nonzero(rng, steps))]


def magnitudes(x, coeffs, times=1):
    """What each element's rounding is measured against: |a| |x| + |b| through every step (a
    result that cancels to near zero is rounded no worse than its terms)."""
    m = np.abs(np.asarray(x, dtype=np.float64))
    for _ in range(times):
        for a, b in coeffs:
            m = abs(float(a)) * m + abs(float(b))
    return m


def chain_case(rng, block, steps, n=None):
    n = n or checks.awkward_size(rng, block, 1, 3)
    return checks.nonzero(rng, n), random_coeffs(rng, steps)


@pytest.mark.points(1)
def test_affine_step_kernel(lab, rng):
    """affine_step_kernel computes x = a*x + b in place on an awkward size, on 1 element and on one
    more than a block."""
    for n in (None, 1, 33):
        x, [(a, b)] = chain_case(rng, 32, 1, n)
        d_x = cuda.to_device(x)
        grid = -(-x.size // 32)
        with record_launches() as launches:
            lab.affine_step_kernel[grid, 32](d_x, a, b)
        checks.assert_launched(launches, "affine_step_kernel", count=1)
        checks.assert_matches(d_x, lab.chain_reference(x, [(a, b)]), scale=magnitudes(x, [(a, b)]), rtol=1e-6,
                              what=f"affine_step_kernel on {x.size} elements")


@pytest.mark.points(1)
def test_affine_step_guard(lab, rng):
    """Threads past the end write nothing: a canary just past x survives."""
    x, [(a, b)] = chain_case(rng, 32, 1)
    canary = checks.nonzero(rng, x.size + 32)
    canary[: x.size] = x
    buffer = cuda.to_device(canary)
    lab.affine_step_kernel[-(-x.size // 32), 32](buffer[: x.size], a, b)
    host = buffer.copy_to_host()
    assert np.array_equal(host[x.size:], canary[x.size:]), "a thread past the end of x wrote"
    checks.assert_matches(host[: x.size], lab.chain_reference(x, [(a, b)]), scale=magnitudes(x, [(a, b)]),
                          rtol=1e-6,
                          what="affine_step_kernel")


@simulator_only
@pytest.mark.points(1)
def test_affine_step_memory_budget(lab, rng):
    """Budget: 1 global read and 1 global write of x per element."""
    x, [(a, b)] = chain_case(rng, 32, 1)
    d_x = cuda.to_device(x)
    with meter(x=d_x) as traffic:
        lab.affine_step_kernel[-(-x.size // 32), 32](d_x, a, b)
    expect(traffic, "x", elements=x.size, reads=1, writes=1)


@pytest.mark.points(2)
def test_pipeline_eager(lab, rng):
    """pipeline applies every step in order, one launch per step covering every element."""
    x, coeffs = chain_case(rng, lab.DEFAULT_BLOCK, 5)
    d_x = cuda.to_device(x)
    with record_launches() as launches:
        result = lab.pipeline(d_x, coeffs)
    checks.assert_launched(launches, "affine_step_kernel", count=len(coeffs))
    for launch in launches:
        assert launch.threads >= x.size, f"a launch of {launch.threads} threads for {x.size} elements"
    assert result is d_x, "pipeline works in place and returns x"
    checks.assert_matches(d_x, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs), rtol=1e-5, what="pipeline")


@pytest.mark.points(2)
def test_pipeline_captures_and_replays(lab, rng):
    """Captured, the pipeline runs nothing; each replay applies the whole chain once."""
    x, coeffs = chain_case(rng, lab.DEFAULT_BLOCK, 4)
    d_x = cuda.to_device(x)
    graph = capture(lab.pipeline, d_x, coeffs)   # raises if a launch is not on `stream`
    assert graph.launches.names() == ["affine_step_kernel"] * len(coeffs), graph.launches.names()
    assert np.array_equal(d_x.copy_to_host(), x), "capture ran kernels: it must only record them"
    graph.replay()
    checks.assert_matches(d_x, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs), rtol=1e-5, what="after one replay")
    graph.replay()
    checks.assert_matches(d_x, lab.chain_reference(x, coeffs, times=2), scale=magnitudes(x, coeffs, times=2), rtol=1e-5,
                          what="after two replays")


def batch_case(rng, features, batch):
    return checks.nonzero(rng, (batch, features))


@pytest.mark.points(3)
def test_batched_pipeline_one_graph_per_batch_size(lab, rng):
    """One graph per batch size, built on first use and replayed after; right for every size."""
    features = int(rng.integers(5, 12))
    coeffs = random_coeffs(rng, 3)
    dispatcher = lab.BatchedPipeline(features, coeffs)
    results = {}
    with replays_counted() as replays:
        for batch in (3, 5, 3, 7, 5, 3):
            x = batch_case(rng, features, batch)
            out = dispatcher(cuda.to_device(x))
            checks.assert_matches(out, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs),
                                  rtol=1e-5, what=f"BatchedPipeline on a batch of {batch}")
            results.setdefault(batch, []).append(out)
    assert sorted(dispatcher.graphs.keys()) == [3, 5, 7], dispatcher.graphs.keys()
    assert dispatcher.graphs.builds == 3, f"{dispatcher.graphs.builds} graphs built for 3 batch sizes"
    assert replays.count == 6, f"{replays.count} graph replays for 6 calls: each call replays its graph"
    for batch, outs in results.items():
        assert all(out is outs[0] for out in outs), f"batch {batch}: the static buffer was not reused"
        graph = dispatcher.graphs[batch][1]
        assert len(graph) == len(coeffs), f"batch {batch}: graph of {len(graph)} kernels"


@pytest.mark.points(1)
def test_batched_pipeline_rejects_wrong_shapes(lab, rng):
    """A batch of the wrong width, or no rows, is a ValueError naming the shape."""
    dispatcher = lab.BatchedPipeline(6, random_coeffs(rng, 2))
    for shape in ((4, 5), (0, 6), (24,)):
        with pytest.raises(ValueError, match="shape"):
            dispatcher(cuda.to_device(np.ones(shape, dtype=np.float32)))
    assert dispatcher.graphs.builds == 0, "a graph was built for a rejected batch"


@pytest.mark.points(1)
def test_idle_gap_fraction(lab):
    """Idle gaps over kernel time, zero when the kernels fill the total, negative (reported as it
    is, never clamped to 0) when the total is below the kernels' sum, and bad input refused."""
    assert lab.idle_gap_fraction(1.05, 0.01, 100) == pytest.approx(0.05)
    assert lab.idle_gap_fraction(3.0, 0.002, 500) == pytest.approx(2.0)
    assert lab.idle_gap_fraction(1.0, 0.01, 100) == pytest.approx(0.0, abs=1e-12)
    assert lab.idle_gap_fraction(0.99, 0.01, 100) == pytest.approx(-0.01)   # a measurement problem
    assert lab.idle_gap_fraction(0.5, 0.002, 500) == pytest.approx(-0.5)
    for bad in ((1.0, 0.0, 10), (1.0, 0.01, 0)):
        with pytest.raises(ValueError):
            lab.idle_gap_fraction(*bad)


@pytest.mark.points(1)
def test_reconstructed_timeline(lab):
    """Kernels of equal length, equal gaps between them (signed), the last ending at the total."""
    bars = np.asarray(lab.reconstructed_timeline(0.02, 3.0, 100), dtype=np.float64)
    assert bars.shape == (100, 2)
    assert bars[0, 0] == 0.0 and bars[-1, 1] == pytest.approx(3.0)
    assert np.allclose(bars[:, 1] - bars[:, 0], 0.02)
    gaps = bars[1:, 0] - bars[:-1, 1]
    assert np.allclose(gaps, (3.0 - 2.0) / 99)
    packed = np.asarray(lab.reconstructed_timeline(0.5, 1.5, 3), dtype=np.float64)
    assert np.allclose(packed, [[0, 0.5], [0.5, 1.0], [1.0, 1.5]])   # no idle time: no gaps
    overlapping = np.asarray(lab.reconstructed_timeline(0.5, 1.0, 3), dtype=np.float64)
    assert np.allclose(overlapping, [[0, 0.5], [0.25, 0.75], [0.5, 1.0]]), \
        "a total below the kernels' sum: negative gaps, the bars overlap and the last ends at the total"
    assert np.allclose(lab.reconstructed_timeline(0.5, 2.0, 1), [[0.0, 0.5]])
    with pytest.raises(ValueError):
        lab.reconstructed_timeline(0.0, 1.0, 3)
