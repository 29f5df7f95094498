"""Graded checks for Lab 07: streams and events.

Results are checked against NumPy on awkward sizes, outputs poisoned. Which stream each launch and
copy used, and what waits for what, is read from a `kernellab.gpu.timeline.Timeline` trace: it works
the same in the simulator (where streams run serially and order cannot be seen by timing). Counts
of kernels, streams and chunks, and the arguments of the pure functions, are drawn by Hypothesis
within each stub's contract.
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab import scheduler
from kernellab.gpu.timeline import Op, Trace
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, integers
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
@drawn(examples=2, count=integers(1, 5), stream_count=integers(1, 4),
       always=({"count": 5, "stream_count": 3},))   # more kernels than streams: k % S wraps around
def test_run_independent_round_robin(lab, rng, count, stream_count):
    """run_independent: right results in the outputs given, all of them returned, kernel k on
    stream k % S (queued in any order), no default stream, no host waits (drawn: 1 to 5 kernels on
    1 to 4 streams, fewer kernels than streams included)."""
    hosts, xs = inputs(rng, count)
    streams = [cuda.stream() for _ in range(stream_count)]
    outs = [checks.poisoned(h.shape) for h in hosts]
    with record_launches(with_args=True) as launched, Timeline() as tl:
        result = lab.run_independent(xs, ITERS, streams, outs)
    launched_for = [launch.args[-1] for launch in launched if launch.name == "busy_kernel"]
    kernels = tl.trace.kernels("busy_kernel")
    assert len(kernels) == count, f"expected {count} busy_kernel launches, saw {tl.trace.kernels()}"
    served = [next((k for k, out in enumerate(outs) if out is target), None) for target in launched_for]
    assert sorted(k for k in served if k is not None) == list(range(count)), \
        f"each kernel k writes outs[k], once: the launches wrote outputs {served}"
    got = {k: op.row for k, op in zip(served, kernels)}
    want = {k: tl.row(streams[k % stream_count]) for k in range(count)}
    assert got == want, f"kernel k must go to streams[k % {stream_count}]: launched on {got}, want {want}"
    assert len(result) == count and all(r is out for r, out in zip(result, outs)), \
        f"run_independent returns the {count} outputs it was given, in order"
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
    assert len(result) == 2, f"{len(result)} outputs for 2 inputs"
    for out, h in zip(result, hosts):
        assert hasattr(out, "copy_to_host"), "outs allocated when None go on the device " \
                                             "(cuda.device_array_like), not in host memory"
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
    """diamond: C on s2 after A, D after C through 2 events; B beside C; the host never waits."""
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
    recorded = trace.of_kind("record")
    assert len(recorded) == 2, f"{len(recorded)} events recorded: the diamond's budget is 2 (one after A, " \
                               "one after C)"
    assert_no_host_waits(trace)
    checks.assert_matches(out, ref, rtol=1e-5, what="diamond")


def is_integer(value):
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


@pytest.mark.points(1)
@drawn(examples=12, chunks=integers(1, 64), more=integers(0, 3000))
def test_chunk_bounds(lab, rng, chunks, more):
    """chunk_bounds covers range(n) in order, in integer chunks whose sizes differ by at most one
    (drawn: 1 to 64 chunks, n from chunks up; every residue of 600 by 6); ValueError unless
    1 <= chunks <= n, at the limits too."""
    every_residue = [(600 + extra, 6) for extra in range(6)]   # n % chunks = 0, 1, ..., 5
    for n, pieces in ((chunks + more, chunks), (10, 3), (7, 7), (1000, 1), *every_residue):
        bounds = lab.chunk_bounds(n, pieces)
        assert len(bounds) == pieces and bounds[0][0] == 0 and bounds[-1][1] == n, (n, pieces, bounds)
        assert all(len(piece) == 2 and is_integer(piece[0]) and is_integer(piece[1]) for piece in bounds), \
            f"chunk_bounds({n}, {pieces}) gives {bounds[:3]}...: (lo, hi) pairs of integers only"
        assert all(hi == lo for (_, hi), (lo, _) in zip(bounds, bounds[1:])), bounds
        sizes = [hi - lo for lo, hi in bounds]
        assert max(sizes) - min(sizes) <= 1, f"chunk sizes {sizes} for n={n}"
    for bad in ((5, 0), (5, -1), (3, 4), (0, 1)):
        with pytest.raises(ValueError):
            lab.chunk_bounds(*bad)


def pipeline_case(rng, n_low=150, n_high=260):
    n = int(rng.integers(n_low, n_high))
    host_x = cuda.pinned_array(n, dtype=np.float32)
    host_x[:] = checks.nonzero(rng, n)
    return host_x


@pytest.mark.points(2)
def test_pipeline_result(lab, rng):
    """pipeline: right values on an awkward size and chunk count, into a given host array; no
    streams is a ValueError."""
    host_x = pipeline_case(rng)
    host_out = cuda.pinned_array_like(host_x)
    host_out[:] = np.nan
    with Timeline() as tl:
        result = lab.pipeline(host_x, ITERS, [cuda.stream() for _ in range(3)], 4, host_out=host_out)
    assert result is host_out, "pipeline must fill and return the host_out it was given"
    assert len(tl.trace.kernels("busy_kernel")) == 4, "one busy_kernel launch per chunk"
    checks.assert_matches(result, lab.busy_reference(host_x, ITERS), rtol=1e-5, what="pipeline")
    with pytest.raises(ValueError):
        lab.pipeline(host_x, ITERS, [], 4, host_out=host_out)


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
@drawn(examples=6, kernels=integers(1, 16), streams=integers(1, 8), blocks=integers(1, 300),
       blocks_per_sm=integers(1, 8))
def test_predicted_speedup_matches_the_model(lab, kernels, streams, blocks, blocks_per_sm):
    """predicted_speedup equals the scheduler's prediction: S for small kernels, 1 for full ones,
    and the model's ratio on a machine whose host paces launches (drawn: kernels, streams, blocks
    and blocks per SM)."""
    machine = scheduler.Machine(sm_count=132)
    assert lab.predicted_speedup(16, 4, 8, 1.0, 8, machine) == pytest.approx(4.0)
    assert lab.predicted_speedup(16, 16, 132 * 8, 1.0, 8, machine) == pytest.approx(1.0)
    busy_host = scheduler.Machine(sm_count=132, host_launch_ms=0.1, launch_latency_ms=0.004)
    shape = dict(blocks=blocks, block_ms=0.5, blocks_per_sm=blocks_per_sm)
    one = scheduler.simulate(scheduler.round_robin(kernels, 1, **shape), busy_host).makespan_ms
    many = scheduler.simulate(scheduler.round_robin(kernels, streams, **shape), busy_host).makespan_ms
    got = lab.predicted_speedup(kernels, streams, blocks, 0.5, blocks_per_sm, busy_host)
    assert got == pytest.approx(one / many, rel=1e-6), (kernels, streams, blocks, blocks_per_sm)


def bound_in_rounds(kernels, streams, blocks, blocks_per_sm, sm_count):
    """speedup_bound's closed form, in whole rounds of one block's time (integers until the ratio)."""
    slots = sm_count * blocks_per_sm
    rounds = -(-blocks // slots)                      # one kernel alone
    return kernels * rounds / max(-(-kernels // streams) * rounds, -(-(kernels * blocks) // slots))


@pytest.mark.points(1)
@drawn(examples=10, kernels=integers(1, 64), streams=integers(1, 32), blocks=integers(1, 5000),
       blocks_per_sm=integers(1, 32), sm_count=integers(1, 200))
def test_speedup_bound_closed_form(lab, kernels, streams, blocks, blocks_per_sm, sm_count):
    """speedup_bound: the closed form (drawn: every argument from 1 up), never below the model's
    prediction; every argument at 1 accepted, any of them below 1 a ValueError."""
    shape = (kernels, streams, blocks, blocks_per_sm, sm_count)
    assert lab.speedup_bound(*shape) == pytest.approx(bound_in_rounds(*shape), rel=1e-12), shape
    assert lab.speedup_bound(1, 1, 1, 1, 1) == 1
    assert lab.speedup_bound(16, 16, 8, 8, 132) == 16
    assert lab.speedup_bound(16, 16, 132 * 8, 8, 132) == 1
    assert lab.speedup_bound(16, 16, 300, 8, 132) == pytest.approx(16 / 5)
    assert lab.speedup_bound(10, 4, 8, 8, 132) == pytest.approx(10 / 3)
    assert lab.speedup_bound(2, 1, 133, 1, 132) == 1     # one stream gains nothing, a partial round included
    machine = scheduler.Machine(sm_count=20)
    for kernels, streams, blocks, bps in ((9, 4, 30, 2), (16, 16, 45, 3), (5, 2, 1, 1)):
        bound = lab.speedup_bound(kernels, streams, blocks, bps, 20)
        shape = dict(blocks=blocks, block_ms=1.0, blocks_per_sm=bps)
        one, many = (scheduler.simulate(scheduler.round_robin(kernels, s, **shape), machine).makespan_ms
                     for s in (1, streams))
        model = one / many
        assert model <= bound + 1e-9, (kernels, streams, blocks, bps, model, bound)
    for position in range(5):
        for low in (0, -1):
            bad = [4, 2, 8, 8, 132]
            bad[position] = low
            with pytest.raises(ValueError):
                lab.speedup_bound(*bad)


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

CONTRACT = [
    clause("run_independent", "busy(xs[k]) for every k, kernel k on streams[k % len(streams)] (queued in any order): "
           "independent work that may overlap.", "test_run_independent_round_robin"),
    clause("run_independent", "Asynchronous: returns the outputs without waiting for them.",
           "test_run_independent_round_robin"),
    clause("run_independent", "outs[k] = busy(xs[k], iters) for every k, launched on streams[k % len(streams)];",
           "test_run_independent_round_robin"),
    clause("run_independent", "`outs` allocated on the device when None;",
           "test_run_independent_allocates_and_rejects_no_streams"),
    clause("run_independent", "ValueError when `streams` is empty.",
           "test_run_independent_allocates_and_rejects_no_streams"),
    clause("run_independent", "one launch per kernel, none on the default stream, and no host synchronization (the "
           "caller decides when to wait).", "test_run_independent_round_robin"),
    clause("diamond", "out = B(y) + C(y), y = A(x): A, B, D on s1, C on s2 beside B; events order s1 and s2.",
           "test_diamond_result", "test_diamond_is_ordered_by_events"),
    clause("diamond", "B and C must stay unordered: neither may wait for the other, by an event or by sharing a "
           "stream (the tests check it).", "test_diamond_is_ordered_by_events"),
    clause("diamond", "y = A = busy(x, iters), B = busy(y, iters) and D = add(B, C, out=out) on s1;",
           "test_diamond_result", "test_diamond_is_ordered_by_events"),
    clause("diamond", "C = busy(y, 2 * iters) on s2, beside B.", "test_diamond_is_ordered_by_events"),
    clause("diamond", "C must not start before A ends, nor D before C ends.", "test_diamond_is_ordered_by_events"),
    clause("diamond", "4 launches and 2 events;", "test_diamond_is_ordered_by_events"),
    clause("diamond", "the host never waits (no cuda.synchronize, no stream.synchronize).",
           "test_diamond_is_ordered_by_events"),
    clause("chunk_bounds", "[(lo, hi), ...] covering range(n) in `chunks` pieces whose sizes differ by at most one.",
           "test_chunk_bounds"),
    clause("chunk_bounds", "Which chunks take the n % chunks extra elements (the first, the last, or spread out) is "
           "yours: the tests check the coverage, the order and the sizes only.", "test_chunk_bounds"),
    clause("chunk_bounds", "the pieces in order, each (lo, hi) with lo < hi, the first at 0, each starting where the "
           "one before ends, the last ending at n;", "test_chunk_bounds"),
    clause("chunk_bounds", "ValueError unless 1 <= chunks <= n.", "test_chunk_bounds"),
    clause("chunk_bounds", "Integers only.", "test_chunk_bounds"),
    clause("pipeline", "busy(host_x) back to the host, chunk c on streams[c % S]: its H2D copy, kernel and D2H copy "
           "in order on that stream (the chunks queued in any order), so other chunks' copies overlap with its "
           "kernel.", "test_pipeline_result", "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "host_x should be pinned (cuda.pinned_array): a copy from pageable memory holds the host "
           "until the driver has staged it, so the chunks do not overlap.",
           "test_pipeline_is_stream_safe"),
    clause("pipeline", "device_buffers: an optional (d_in, d_out) pair shaped like host_x.",
           "test_pipeline_is_stream_safe"),
    clause("pipeline", "Waits for the result before returning it: `synchronize()` on every stream, on the streams "
           "that carry a chunk, or one `cuda.synchronize()`, each after the last chunk is queued, all pass (the tests "
           "check only that every D2H copy is done when pipeline returns, and that the host did not wait earlier).",
           "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "host_out = busy(host_x, iters), in `chunks` pieces (chunk_bounds);", "test_pipeline_result",
           "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "host_out is allocated pinned when None;", "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "ValueError for no streams.", "test_pipeline_result"),
    clause("pipeline", "Chunk c is copied in, computed and copied back on streams[c % S], in that order.",
           "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "Returns host_out once every chunk is back.", "test_pipeline_result",
           "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "per chunk, two asynchronous copies and one launch on its own stream;",
           "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "the host waits only after every chunk is queued;",
           "test_pipeline_chunks_flow_through_one_stream_each"),
    clause("pipeline", "no copy into pageable memory (it makes the host wait);", "test_pipeline_is_stream_safe"),
    clause("pipeline", "no device buffer shared by two chunks.", "test_pipeline_is_stream_safe"),
    clause("pipeline", "The tests trace all of it.", "test_pipeline_chunks_flow_through_one_stream_each",
           "test_pipeline_is_stream_safe"),
    clause("predicted_speedup", "Makespan of `kernels` identical independent kernels on one stream / on `streams` "
           "streams (round-robin), both predicted by kernellab.scheduler on `machine`.",
           "test_predicted_speedup_matches_the_model"),
    clause("predicted_speedup", "predicted makespan on 1 stream / predicted makespan on `streams` streams, each from "
           "the model (`scheduler`: help(scheduler.round_robin), help(scheduler.simulate)).",
           "test_predicted_speedup_matches_the_model"),
    clause("speedup_bound", "The most that `streams` streams can gain over one for identical independent kernels, "
           "when launching is free: serial time / max(the busiest stream's time, all blocks through the SMs).",
           "test_speedup_bound_closed_form"),
    clause("speedup_bound", "ValueError if any argument is < 1;", "test_speedup_bound_closed_form"),
    clause("speedup_bound", "counted in whole rounds of one block's time, with sm_count * blocks_per_sm blocks "
           "running at once.", "test_speedup_bound_closed_form"),
    clause("speedup_bound", "Integers only, so the answer is exact.", "test_speedup_bound_closed_form"),
]
