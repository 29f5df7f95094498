"""Graded checks for Lab 07: streams and events.

Results are checked against NumPy on awkward sizes, outputs poisoned. Which stream each launch and
copy used, and what waits for what, is read from a `kernellab.gpu.timeline.Timeline` trace: it works
the same in the simulator (where streams run serially and order cannot be seen by timing).
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab import scheduler
from kernellab.gpu.timeline import Op, Trace
from kernellab.grading.tape import Timeline, pinned_allocations, record_launches

cuda = device.cuda()
ITERS = 3   # few FMAs: the simulator runs each thread in Python


def inputs(rng, count, low=20, high=90):
    """`count` device inputs of awkward sizes, and their host copies."""
    hosts = [checks.nonzero(rng, int(rng.integers(low, high))) for _ in range(count)]
    return hosts, [cuda.to_device(h) for h in hosts]


def waited_for_on_return(trace):
    """Bitmask of the ops the host had waited for by the end of the trace (when the call returned)."""
    returned = Op(len(trace), "return", "returned", None, 0.0)
    return Trace([*trace, returned]).host_dependencies()[-1]


def assert_no_host_waits(trace):
    waits = trace.host_waits()
    assert not waits, f"the host synchronized ({', '.join(op.label for op in waits)}): " \
                      "stream work should be ordered on the GPU, not by stopping the host"


@pytest.mark.points(2)
def test_run_independent_round_robin(lab, rng):
    """run_independent: right results, kernel k on stream k % S (queued in any order), no default
    stream, no host waits."""
    hosts, xs = inputs(rng, 5)
    streams = [cuda.stream() for _ in range(3)]
    outs = [checks.poisoned(h.shape) for h in hosts]
    with record_launches(with_args=True) as launched, Timeline() as tl:
        result = lab.run_independent(xs, ITERS, streams, outs)
    launched_for = [launch.args[-1] for launch in launched if launch.name == "busy_kernel"]
    kernels = tl.trace.kernels("busy_kernel")
    assert len(kernels) == 5, f"expected 5 busy_kernel launches, saw {tl.trace.kernels()}"
    served = [next((k for k, out in enumerate(outs) if out is target), None) for target in launched_for]
    assert sorted(k for k in served if k is not None) == list(range(5)), \
        f"each kernel k writes outs[k], once: the launches wrote outputs {served}"
    got = {k: op.row for k, op in zip(served, kernels)}
    want = {k: tl.row(streams[k % 3]) for k in range(5)}
    assert got == want, f"kernel k must go to streams[k % 3]: launched on {got}, want {want}"
    assert_no_host_waits(tl.trace)
    for a in kernels:
        for b in kernels:
            if a.row != b.row:
                assert not tl.trace.happens_before(a, b), f"{a.row} and {b.row} were serialized"
    for k, (out, h) in enumerate(zip(result, hosts)):
        checks.assert_matches(out, lab.busy_reference(h, ITERS), rtol=1e-5, what=f"kernel {k}")


@pytest.mark.points(1)
def test_run_independent_allocates_and_rejects_no_streams(lab, rng):
    """run_independent allocates outputs when none are given, and refuses an empty stream list."""
    hosts, xs = inputs(rng, 2)
    with Timeline() as tl:
        result = lab.run_independent(xs, ITERS, [cuda.stream()])
    assert len(tl.trace.kernels("busy_kernel")) == 2
    for out, h in zip(result, hosts):
        checks.assert_matches(out, lab.busy_reference(h, ITERS), rtol=1e-5)
    with pytest.raises(ValueError):
        lab.run_independent(xs, ITERS, [])


def diamond_case(lab, rng):
    (host,), (x,) = inputs(rng, 1, 40, 120)
    return x, lab.diamond_reference(host, ITERS)


@pytest.mark.points(2)
def test_diamond_result(lab, rng):
    """diamond computes B(A(x)) + C(A(x)) into `out`."""
    x, ref = diamond_case(lab, rng)
    out = checks.poisoned(x.shape)
    with Timeline() as tl:
        lab.diamond(x, ITERS, cuda.stream(), cuda.stream(), out=out)
    assert tl.trace.kernels("busy_kernel") and tl.trace.kernels("add_kernel"), \
        f"expected busy_kernel and add_kernel launches, saw {[op.label for op in tl.trace]}"
    checks.assert_matches(out, ref, rtol=1e-5, what="diamond")


@pytest.mark.points(2)
def test_diamond_is_ordered_by_events(lab, rng):
    """diamond: C on s2 after A, D after C through events; B beside C; the host never waits."""
    x, ref = diamond_case(lab, rng)
    s1, s2 = cuda.stream(), cuda.stream()
    with Timeline() as tl:
        out = lab.diamond(x, ITERS, s1, s2)
    trace = tl.trace
    busy, (join,) = trace.kernels("busy_kernel"), trace.kernels("add_kernel")
    assert len(busy) == 3, f"expected A, B, C as three busy_kernel launches, saw {len(busy)}"
    a = busy[0]
    on_s2 = [op for op in busy if op.row == tl.row(s2)]
    assert len(on_s2) == 1 and a.row == join.row == tl.row(s1), \
        f"A, B and D go on s1, C on s2: saw {[(op.label, op.row) for op in (*busy, join)]}"
    c = on_s2[0]
    b = next(op for op in busy[1:] if op is not c)
    assert trace.happens_before(a, c), "C on s2 can start before A is done: record an event on " \
                                       "s1 after A and make s2 wait on it"
    assert trace.happens_before(c, join), "D on s1 can start before C on s2 is done: an event " \
                                          "recorded on s2 after C, waited on s1 before D"
    assert not trace.happens_before(b, c) and not trace.happens_before(c, b), \
        "B and C are serialized: they should be free to run side by side"
    assert_no_host_waits(trace)
    checks.assert_matches(out, ref, rtol=1e-5, what="diamond")


@pytest.mark.points(1)
def test_chunk_bounds(lab, rng):
    """chunk_bounds covers range(n) in chunks whose sizes differ by at most one."""
    every_residue = [(600 + extra, 6) for extra in range(6)]   # n % chunks = 0, 1, ..., 5
    for n, chunks in ((10, 3), (7, 7), (1000, 1), *every_residue, (int(rng.integers(100, 999)), 6)):
        bounds = lab.chunk_bounds(n, chunks)
        assert len(bounds) == chunks and bounds[0][0] == 0 and bounds[-1][1] == n, (n, chunks, bounds)
        assert all(hi == lo for (_, hi), (lo, _) in zip(bounds, bounds[1:])), bounds
        sizes = [hi - lo for lo, hi in bounds]
        assert max(sizes) - min(sizes) <= 1, f"chunk sizes {sizes} for n={n}"
    for bad in ((5, 0), (3, 4)):
        with pytest.raises(ValueError):
            lab.chunk_bounds(*bad)


def pipeline_case(rng, n_low=150, n_high=260):
    n = int(rng.integers(n_low, n_high))
    host_x = cuda.pinned_array(n, dtype=np.float32)
    host_x[:] = checks.nonzero(rng, n)
    return host_x


@pytest.mark.points(2)
def test_pipeline_result(lab, rng):
    """pipeline: right values on an awkward size and chunk count, into a given host array."""
    host_x = pipeline_case(rng)
    host_out = cuda.pinned_array_like(host_x)
    host_out[:] = np.nan
    with Timeline() as tl:
        result = lab.pipeline(host_x, ITERS, [cuda.stream() for _ in range(3)], 4, host_out=host_out)
    assert result is host_out, "pipeline must fill and return the host_out it was given"
    assert len(tl.trace.kernels("busy_kernel")) == 4, "one busy_kernel launch per chunk"
    checks.assert_matches(result, lab.busy_reference(host_x, ITERS), rtol=1e-5, what="pipeline")


@pytest.mark.points(2)
def test_pipeline_chunks_flow_through_one_stream_each(lab, rng):
    """pipeline: chunk c's H2D, kernel, D2H in order on streams[c % S]; pinned output; no early
    waits, but every D2H copy waited for before returning."""
    streams = [cuda.stream() for _ in range(2)]
    chunks = 5
    with pinned_allocations() as pinned:     # the pinned input, and what pipeline pins
        host_x = pipeline_case(rng)
        with Timeline() as tl:
            result = lab.pipeline(host_x, ITERS, streams, chunks)
    assert any(result is p for p in pinned), \
        "allocate host_out with cuda.pinned_array_like: async copies need page-locked memory"
    sizes = np.diff([0] + [hi for _, hi in lab.chunk_bounds(host_x.size, chunks)])
    trace = tl.trace
    copies_in, copies_out = trace.of_kind("h2d"), trace.of_kind("d2h")
    kernels = trace.kernels("busy_kernel")
    assert len(copies_in) == len(kernels) == len(copies_out) == chunks, \
        f"expected one H2D copy, kernel and D2H copy per chunk; saw {[op.kind for op in trace.timed()]}"
    # The chunks may be queued in any order (chunk by chunk, stream by stream, all copies first):
    # on each stream, its i-th H2D copy, i-th kernel and i-th D2H copy are one chunk's.
    for s, stream in enumerate(streams):
        row = tl.row(stream)
        mine = [c for c in range(chunks) if c % len(streams) == s]
        ins, runs, outs = ([op for op in ops if op.row == row] for ops in (copies_in, kernels, copies_out))
        assert len(ins) == len(runs) == len(outs) == len(mine), \
            (f"{row} should carry chunks {mine} (chunk c on streams[c % {len(streams)}]), one H2D copy, "
             f"kernel and D2H copy each; it has {len(ins)}, {len(runs)} and {len(outs)}")
        for copy_in, kernel, copy_out in zip(ins, runs, outs):
            assert trace.happens_before(copy_in, kernel) and trace.happens_before(kernel, copy_out), \
                f"{row}: a chunk's kernel must follow its H2D copy, and its D2H copy the kernel"
            assert copy_in.nbytes == copy_out.nbytes, f"{row}: a chunk copies in and out different sizes"
            assert kernel.blocks * kernel.block[0] >= copy_in.nbytes // 4, \
                f"{row}: a chunk's kernel has fewer threads than the chunk has elements"
        assert sorted(op.nbytes for op in ins) == sorted(int(sizes[c]) * 4 for c in mine), \
            f"{row} copies chunks of {[op.nbytes // 4 for op in ins]} elements; chunks {mine} have " \
            f"{[int(sizes[c]) for c in mine]}"
    timed = trace.timed()
    last_submission = timed[-1].index
    early = [op for op in trace.host_waits() if op.index < last_submission]
    assert not early, "the host waited before every chunk was queued: that serializes the pipeline"
    done = waited_for_on_return(trace)
    unfinished = [c for c, op in enumerate(copies_out) if not done >> op.index & 1]
    assert not unfinished, (f"pipeline returned before the D2H copies of chunks {unfinished} were "
                            "done: synchronize the streams before handing host_out back")
    checks.assert_matches(result, lab.busy_reference(host_x, ITERS), rtol=1e-5, what="pipeline")


@pytest.mark.simulator
@pytest.mark.points(1)
def test_pipeline_is_stream_safe(lab, rng):
    """pipeline (traced in the simulator): no buffer used by two streams without an event or a
    synchronization between its uses, one of them a write (each chunk its own slice of d_in and
    d_out); no copy between the device and pageable host memory, which makes the host wait for
    the copy, each chunk in turn; the device_buffers it is given are the ones it uses."""
    with pinned_allocations() as pinned:     # page-locked arrays: the simulator's are plain
        host_x = pipeline_case(rng)
        d_in, d_out = checks.poisoned(host_x.shape), checks.poisoned(host_x.shape)
        with Timeline(record_uses=True) as tl:
            result = lab.pipeline(host_x, ITERS, [cuda.stream() for _ in range(2)], 5,
                                  device_buffers=(d_in, d_out))
    races = tl.races()
    assert not races, "a race between streams: " + races[0].describe()
    waits = tl.pageable_copies(pinned=pinned)
    assert not waits, "\n".join(
        f"{op.label} on {op.row} ({use.where}): its host {use.what} is pageable memory, so the "
        f"host waits until the copy is done and queues the next chunk late; copy into "
        f"host_out[lo:hi], page-locked" for op, use in waits)
    checks.assert_matches(result, lab.busy_reference(host_x, ITERS), rtol=1e-5, what="pipeline")
    checks.assert_matches(d_out, lab.busy_reference(host_x, ITERS), rtol=1e-5,
                          what="d_out of the device_buffers pipeline was given (use them when given)")


@pytest.mark.points(2)
def test_predicted_speedup_matches_the_model(lab):
    """predicted_speedup equals the scheduler's prediction: S for small kernels, 1 for full ones."""
    machine = scheduler.Machine(sm_count=132)
    assert lab.predicted_speedup(16, 4, 8, 1.0, 8, machine) == pytest.approx(4.0)
    assert lab.predicted_speedup(16, 16, 132 * 8, 1.0, 8, machine) == pytest.approx(1.0)
    busy_host = scheduler.Machine(sm_count=132, host_launch_ms=0.1, launch_latency_ms=0.004)
    for kernels, streams, blocks, bps in ((16, 8, 8, 8), (12, 5, 300, 4), (7, 3, 50, 2)):
        shape = dict(blocks=blocks, block_ms=0.5, blocks_per_sm=bps)
        one = scheduler.simulate(scheduler.round_robin(kernels, 1, **shape), busy_host).makespan_ms
        many = scheduler.simulate(scheduler.round_robin(kernels, streams, **shape), busy_host).makespan_ms
        got = lab.predicted_speedup(kernels, streams, blocks, 0.5, bps, busy_host)
        assert got == pytest.approx(one / many), (kernels, streams, blocks, bps)


@pytest.mark.points(1)
def test_speedup_bound_closed_form(lab):
    """speedup_bound: the closed form, and never below the model's prediction."""
    assert lab.speedup_bound(16, 16, 8, 8, 132) == 16
    assert lab.speedup_bound(16, 16, 132 * 8, 8, 132) == 1
    assert lab.speedup_bound(16, 16, 300, 8, 132) == pytest.approx(16 / 5)
    assert lab.speedup_bound(10, 4, 8, 8, 132) == pytest.approx(10 / 3)
    machine = scheduler.Machine(sm_count=20)
    for kernels, streams, blocks, bps in ((9, 4, 30, 2), (16, 16, 45, 3), (5, 2, 1, 1)):
        bound = lab.speedup_bound(kernels, streams, blocks, bps, 20)
        shape = dict(blocks=blocks, block_ms=1.0, blocks_per_sm=bps)
        one, many = (scheduler.simulate(scheduler.round_robin(kernels, s, **shape), machine).makespan_ms
                     for s in (1, streams))
        model = one / many
        assert model <= bound + 1e-9, (kernels, streams, blocks, bps, model, bound)
    with pytest.raises(ValueError):
        lab.speedup_bound(4, 2, 8, 0, 132)
