"""Graded checks for Lab 08: CUDA Graphs.

Inputs are fresh random values (seed printed); sizes, block sizes, step counts and batch shapes are
drawn by Hypothesis within each stub's contract (awkward sizes, 1, exact multiples of the block). Every
result is compared with a float64 NumPy reference, and a kernel must have done the work.
"""

import re

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, integers, one_of, sizes
from kernellab.grading.tape import Timeline, capture, meter, record_launches, replays_counted

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


def launch_shape_problems(launches, n, block):
    """What is wrong with each launch's shape for one thread per element of n in blocks of `block`."""
    blocks = -(-n // block)
    return [f"launched as grid {launch.grid}, block {launch.block}: one thread per element of {n} in "
            f"blocks of {block} is grid ({blocks}, 1, 1), block ({block}, 1, 1)"
            for launch in launches if launch.block != (block, 1, 1) or launch.grid != (blocks, 1, 1)]


@pytest.mark.points(1)
@drawn(examples=4, n=sizes(block=32, most=200), block=one_of(32, 64, 128),
       always=({"n": 1, "block": 32}, {"n": 64, "block": 32}))    # 1 element; an exact multiple
def test_affine_step_kernel(lab, rng, n, block):
    """affine_step_kernel computes x = a*x + b in place for any size and any block size (drawn:
    awkward sizes, 1, exact multiples of the block and one either side; blocks of 32 to 128)."""
    x, [(a, b)] = chain_case(rng, block, 1, n)
    d_x = cuda.to_device(x)
    with record_launches() as launches:
        lab.affine_step_kernel[-(-n // block), block](d_x, a, b)
    checks.assert_launched(launches, "affine_step_kernel", count=1)
    checks.assert_matches(d_x, lab.chain_reference(x, [(a, b)]), scale=magnitudes(x, [(a, b)]), rtol=1e-6,
                          what=f"affine_step_kernel on {n} elements in blocks of {block}")


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
                          rtol=1e-6, what="affine_step_kernel")


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
@drawn(examples=4, n=sizes(block=64, most=300), block=one_of(128, 32, 64, 256), steps=integers(1, 4),
       always=({"n": 256, "block": 64, "steps": 2},))    # an exact multiple: the fewest blocks, no spare one
def test_pipeline_eager(lab, rng, n, block, steps):
    """pipeline applies every step in order, in place, one launch per step of the fewest blocks of
    `block` threads that cover x, and returns x (drawn: sizes, block sizes, 1 to 4 steps)."""
    x, coeffs = chain_case(rng, block, steps, n)
    d_x = cuda.to_device(x)
    with record_launches() as launches:
        result = lab.pipeline(d_x, coeffs, block=block)
    checks.assert_launched(launches, "affine_step_kernel", count=steps)
    assert not launch_shape_problems(launches, n, block), launch_shape_problems(launches, n, block)[0]
    assert result is d_x, "pipeline works in place and returns x"
    checks.assert_matches(d_x, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs), rtol=1e-5,
                          what=f"pipeline of {steps} steps on {n} elements in blocks of {block}")


@pytest.mark.points(2)
def test_pipeline_captures_and_replays(lab, rng):
    """Captured, the pipeline runs nothing and every launch is on the capture's stream; each replay
    applies the whole chain once."""
    x, coeffs = chain_case(rng, 32, 3)
    d_x = cuda.to_device(x)
    graph = capture(lab.pipeline, d_x, coeffs, block=32)   # raises if a launch is not on `stream`
    assert graph.launches.names() == ["affine_step_kernel"] * len(coeffs), graph.launches.names()
    assert np.array_equal(d_x.copy_to_host(), x), "capture ran kernels: it must only record them"
    graph.replay()
    checks.assert_matches(d_x, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs), rtol=1e-5,
                          what="after one replay")
    graph.replay()
    checks.assert_matches(d_x, lab.chain_reference(x, coeffs, times=2), scale=magnitudes(x, coeffs, times=2),
                          rtol=1e-5, what="after two replays")


def batch_case(rng, features, batch):
    return checks.nonzero(rng, (batch, features))


@pytest.mark.points(1)
@drawn(examples=4, batch=integers(1, 5), features=integers(1, 40), block=one_of(128, 32, 64),
       steps=integers(1, 3), always=({"batch": 1, "features": 1, "block": 32, "steps": 1},))
def test_batched_pipeline_build(lab, rng, batch, features, block, steps):
    """build(batch) returns (buffer, graph): a (batch, features) float32 device buffer and the graph
    of pipeline on it, in blocks of the dispatcher's block; the graph runs the chain on whatever the
    buffer holds when it replays (drawn: batch sizes from 1, widths, block sizes, 1 to 3 steps)."""
    coeffs = random_coeffs(rng, steps)
    dispatcher = lab.BatchedPipeline(features, coeffs, block=block)
    built = dispatcher.build(batch)
    assert isinstance(built, (tuple, list)) and len(built) == 2, "build returns (buffer, graph)"
    buffer, graph = built
    assert hasattr(buffer, "copy_to_host"), "the buffer is a device array (cuda.device_array)"
    assert tuple(buffer.shape) == (batch, features) and buffer.dtype == np.float32, \
        f"build({batch}) gave a {tuple(buffer.shape)} {buffer.dtype} buffer, not ({batch}, {features}) float32"
    launched = list(graph.launches)
    assert [launch.name for launch in launched] == ["affine_step_kernel"] * steps, \
        f"the graph holds {[launch.name for launch in launched]}, not one affine_step_kernel per step"
    assert not launch_shape_problems(launched, batch * features, block), \
        launch_shape_problems(launched, batch * features, block)[0] + " (the dispatcher's block)"
    for filled in range(2):
        x = batch_case(rng, features, batch)
        buffer.copy_to_device(x)
        graph.replay()
        checks.assert_matches(buffer, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs), rtol=1e-5,
                              what=f"the buffer after its graph's replay (filled {filled + 1} time(s))")


@pytest.mark.points(3)
def test_batched_pipeline_one_graph_per_batch_size(lab, rng):
    """One graph per batch size (1 included), built on first use and replayed after; right for
    every size; each call returns its size's static buffer."""
    features = int(rng.integers(5, 12))
    coeffs = random_coeffs(rng, 3)
    dispatcher = lab.BatchedPipeline(features, coeffs)
    results = {}
    with replays_counted() as replays:
        for batch in (3, 1, 5, 3, 1, 3):
            x = batch_case(rng, features, batch)
            out = dispatcher(cuda.to_device(x))
            checks.assert_matches(out, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs),
                                  rtol=1e-5, what=f"BatchedPipeline on a batch of {batch}")
            results.setdefault(batch, []).append(out)
    assert sorted(dispatcher.graphs.keys()) == [1, 3, 5], dispatcher.graphs.keys()
    assert dispatcher.graphs.builds == 3, f"{dispatcher.graphs.builds} graphs built for 3 batch sizes"
    assert replays.count == 6, f"{replays.count} graph replays for 6 calls: each call replays its graph"
    for batch, outs in results.items():
        static, graph = dispatcher.graphs[batch]
        assert all(out is static for out in outs), f"batch {batch}: a call returned something other " \
                                                   "than its size's static buffer"
        assert len(graph) == len(coeffs), f"batch {batch}: graph of {len(graph)} kernels"


@simulator_only   # a GPU replays a graph with no Numba launch for the trace to see
@pytest.mark.points(1)
def test_batched_pipeline_replays_on_its_stream(lab, rng):
    """A call's copy into the static buffer and its graph's kernels go on the `stream` it is given,
    and a size seen before replays its graph without capturing it again."""
    features, batch = int(rng.integers(3, 9)), int(rng.integers(2, 5))
    coeffs = random_coeffs(rng, 2)
    dispatcher = lab.BatchedPipeline(features, coeffs, block=32)
    dispatcher(cuda.to_device(batch_case(rng, features, batch)))      # builds the size's graph
    x = batch_case(rng, features, batch)
    d_x, stream = cuda.to_device(x), cuda.stream()
    with Timeline() as tl:
        out = dispatcher(d_x, stream=stream)
    trace, row = tl.trace, tl.row(stream)
    kernels, copies = trace.kernels(), trace.of_kind("h2d", "d2d")
    assert len(kernels) == len(coeffs), \
        f"{len(kernels)} kernel launches for a graph of {len(coeffs)}: a size seen before replays " \
        "its graph, without capturing it again"
    assert copies, "no copy of x into the static buffer was seen"
    wrong = [f"{op.label} on {op.row}" for op in (*copies, *kernels) if op.row != row]
    assert not wrong, f"work off the call's stream ({row}): {', '.join(wrong)}"
    stream.synchronize()
    checks.assert_matches(out, lab.chain_reference(x, coeffs), scale=magnitudes(x, coeffs), rtol=1e-5,
                          what="BatchedPipeline on a stream")


def names_the_shape(message, shape):
    """A ValueError's message names the shape: the tuple itself, or the word."""
    return str(tuple(shape)) in message or re.search(r"\bshape\b", message) is not None


@pytest.mark.points(1)
def test_batched_pipeline_rejects_wrong_shapes(lab, rng):
    """A batch of the wrong width, no rows, or not 2D is a ValueError naming the shape."""
    dispatcher = lab.BatchedPipeline(6, random_coeffs(rng, 2))
    for shape in ((4, 5), (4, 7), (0, 6), (24,), (2, 6, 1)):
        with pytest.raises(ValueError) as refused:
            dispatcher(cuda.to_device(np.ones(shape, dtype=np.float32)))
        assert names_the_shape(str(refused.value), shape), \
            f"the ValueError for shape {shape} does not name it: {refused.value}"
    assert dispatcher.graphs.builds == 0, "a graph was built for a rejected batch"


@pytest.mark.points(1)
@drawn(examples=10, kernels=integers(1, 500), kernel_us=integers(1, 10_000), total_us=integers(0, 10_000_000))
def test_idle_gap_fraction(lab, kernels, kernel_us, total_us):
    """Idle gaps over kernel time (drawn: 1 to 500 kernels, any total), zero when the kernels fill
    the total, negative (reported as it is, never clamped to 0) when the total is below the kernels'
    sum; kernels >= 1 and kernel_ms > 0 accepted down to the limit, anything else refused."""
    kernel_ms, total_ms = kernel_us / 1000, total_us / 1000
    busy = kernels * kernel_ms
    assert lab.idle_gap_fraction(total_ms, kernel_ms, kernels) == pytest.approx((total_ms - busy) / busy,
                                                                                 rel=1e-9, abs=1e-12)
    assert lab.idle_gap_fraction(1.05, 0.01, 100) == pytest.approx(0.05)
    assert lab.idle_gap_fraction(1.0, 0.01, 100) == pytest.approx(0.0, abs=1e-12)
    assert lab.idle_gap_fraction(0.99, 0.01, 100) == pytest.approx(-0.01)   # a measurement problem
    assert lab.idle_gap_fraction(0.5, 0.4, 1) == pytest.approx(0.25)        # kernels = 1: the limit
    for bad in ((1.0, 0.0, 10), (1.0, -0.01, 10), (1.0, 0.01, 0), (1.0, 0.01, -2)):
        with pytest.raises(ValueError):
            lab.idle_gap_fraction(*bad)


@pytest.mark.points(1)
@drawn(examples=10, kernels=integers(1, 300), kernel_us=integers(1, 5_000), total_us=integers(0, 2_000_000))
def test_reconstructed_timeline(lab, kernels, kernel_us, total_us):
    """Kernels of equal length, equal gaps (signed) only between them, the first at 0 and the last
    ending at the total; a lone kernel from 0 (drawn: 1 to 300 kernels, any total); bad input refused."""
    kernel_ms, total_ms = kernel_us / 1000, total_us / 1000
    bars = np.asarray(lab.reconstructed_timeline(kernel_ms, total_ms, kernels), dtype=np.float64)
    assert bars.shape == (kernels, 2), f"{bars.shape}: one (start, end) per kernel"
    close = dict(rtol=1e-9, atol=1e-9 * max(1.0, total_ms))
    assert np.allclose(bars[:, 1] - bars[:, 0], kernel_ms, **close), "every kernel lasts kernel_ms"
    assert np.isclose(bars[0, 0], 0.0, **close), f"the first kernel starts at {bars[0, 0]}, not 0"
    if kernels > 1:
        assert np.isclose(bars[-1, 1], total_ms, **close), f"the last kernel ends at {bars[-1, 1]}, not the total"
        assert np.allclose(bars[1:, 0] - bars[:-1, 1], (total_ms - kernels * kernel_ms) / (kernels - 1), **close), \
            "the gaps between kernels are not all equal (signed: negative when the total is short)"
    packed = np.asarray(lab.reconstructed_timeline(0.5, 1.5, 3), dtype=np.float64)
    assert np.allclose(packed, [[0, 0.5], [0.5, 1.0], [1.0, 1.5]])   # no idle time: no gaps
    overlapping = np.asarray(lab.reconstructed_timeline(0.5, 1.0, 3), dtype=np.float64)
    assert np.allclose(overlapping, [[0, 0.5], [0.25, 0.75], [0.5, 1.0]]), \
        "a total below the kernels' sum: negative gaps, the bars overlap and the last ends at the total"
    assert np.allclose(lab.reconstructed_timeline(0.5, 2.0, 1), [[0.0, 0.5]]), "a lone kernel runs from 0"
    for bad in ((0.0, 1.0, 3), (-0.5, 1.0, 3), (0.5, 1.0, 0)):
        with pytest.raises(ValueError):
            lab.reconstructed_timeline(*bad)


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

CONTRACT = [
    clause("affine_step_kernel", "08.1 (about 3 lines): x[i] = a * x[i] + b in place for this thread's element;",
           "test_affine_step_kernel", "test_affine_step_guard"),
    clause("affine_step_kernel", "threads past the end do nothing", "test_affine_step_guard",
           "test_affine_step_kernel"),
    clause("affine_step_kernel", "Budget: 1 global read and 1 global write per thread.",
           "test_affine_step_memory_budget"),
    clause("pipeline", "x = a_k * (... (a_1 * x + b_1) ...) + b_k in place, one launch per (a, b);",
           "test_pipeline_eager", "test_pipeline_captures_and_replays"),
    clause("pipeline", "returns x.", "test_pipeline_eager"),
    clause("pipeline", "Returns x.", "test_pipeline_eager"),
    clause("pipeline", "08.2 (about 4 lines): one launch of affine_step_kernel per (a, b), one thread per element "
           "in blocks of `block` threads (the fewest blocks that cover x), every launch on `stream`:",
           "test_pipeline_eager", "test_pipeline_captures_and_replays"),
    clause("pipeline", "a capture records only what goes to its stream.", "test_pipeline_captures_and_replays"),
    clause("build", "The static buffer for `batch` rows and the graph of the pipeline on it.",
           "test_batched_pipeline_build"),
    clause("build", "08.3 (about 3 lines): returns (buffer, graph): a (batch, features) float32 device buffer "
           "and the graph of `pipeline` on it, with self.coeffs and self.block.", "test_batched_pipeline_build"),
    clause("build", "the graph replays the pipeline on this buffer, whatever it holds then.",
           "test_batched_pipeline_build", "test_batched_pipeline_one_graph_per_batch_size"),
    clause("__call__", "The pipeline applied to x (batch, features);",
           "test_batched_pipeline_one_graph_per_batch_size"),
    clause("__call__", "returns the batch size's static buffer.", "test_batched_pipeline_one_graph_per_batch_size"),
    clause("__call__", "08.4 (about 7 lines): the pipeline on x through its batch size's graph, built once per size.",
           "test_batched_pipeline_one_graph_per_batch_size", "test_batched_pipeline_replays_on_its_stream"),
    clause("__call__", "ValueError naming the shape unless x is (batch >= 1, self.features);",
           "test_batched_pipeline_rejects_wrong_shapes", "test_batched_pipeline_one_graph_per_batch_size"),
    clause("__call__", "work goes on `stream`;", "test_batched_pipeline_replays_on_its_stream"),
    clause("__call__", "returns that size's static buffer.", "test_batched_pipeline_one_graph_per_batch_size"),
    clause("idle_gap_fraction", "Idle time between kernels over kernel time: the seed article's metric "
           "(target < 5%).", "test_idle_gap_fraction"),
    clause("idle_gap_fraction", "Signed: a total below the sum of the kernel times gives a negative fraction, "
           "returned as it is.", "test_idle_gap_fraction"),
    clause("idle_gap_fraction", "It is a measurement problem to report (the kernel time or the total is wrong), "
           "never a gap of 0: a metric clamped to 0 would hide it.", "test_idle_gap_fraction"),
    clause("idle_gap_fraction", "08.5 (about 4 lines): ValueError unless kernels >= 1 and kernel_ms > 0.",
           "test_idle_gap_fraction"),
    clause("reconstructed_timeline", "(start, end) in ms of each kernel, if they ran `kernel_ms` each with equal "
           "gaps in `total_ms`: the last one ends at `total_ms`.", "test_reconstructed_timeline"),
    clause("reconstructed_timeline", "A lone kernel has no gap to stretch: it runs from 0 to `kernel_ms`.",
           "test_reconstructed_timeline"),
    clause("reconstructed_timeline", "A total below the kernels' sum gives negative gaps, so the bars overlap: the "
           "measurement problem shows in the picture instead of being hidden.", "test_reconstructed_timeline"),
    clause("reconstructed_timeline", "08.6 (about 5 lines): ValueError unless kernels >= 1 and kernel_ms > 0;",
           "test_reconstructed_timeline"),
    clause("reconstructed_timeline", "gaps only between kernels, all equal.", "test_reconstructed_timeline"),
]
