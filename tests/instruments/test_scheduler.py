"""Tests of kernellab.scheduler, the block-scheduler model: cases with answers known by hand."""

import time

import pytest

from kernellab.scheduler import (
    Machine, Work, blocks_per_sm, from_trace, issue_in_order, pipeline_ms, round_robin, simulate, stream_gap_ms)
from kernellab.gpu.timeline import Op, Span, TimelineData, Trace

H200 = Machine(sm_count=132)


def makespan(work, machine=H200):
    return simulate(work, machine).makespan_ms


@pytest.mark.parametrize("streams", [1, 2, 4, 8, 16])
def test_small_kernels_overlap_across_streams(streams):
    work = round_robin(16, streams, blocks=8, block_ms=1.0, blocks_per_sm=8)
    assert makespan(work) == pytest.approx(16 / streams)


def test_kernels_that_fill_the_gpu_do_not_overlap():
    for streams in (1, 16):
        assert makespan(round_robin(16, streams, blocks=132 * 8, block_ms=1.0, blocks_per_sm=8)) == 16.0
    assert makespan(round_robin(16, 16, blocks=132 * 8 + 1, block_ms=1.0, blocks_per_sm=8)) == 17.0


def test_host_launch_cost_spaces_out_short_kernels():
    machine = Machine(132, host_launch_ms=0.02)
    assert makespan(round_robin(16, 16, blocks=8, block_ms=0.1, blocks_per_sm=8), machine) == \
        pytest.approx(0.1 + 15 * 0.02)
    assert makespan(round_robin(16, 1, blocks=8, block_ms=0.1, blocks_per_sm=8), machine) == \
        pytest.approx(1.6)                      # on one stream the host keeps ahead


def test_in_order_dispatch_and_the_slots_each_block_takes():
    big = Work("big", "s1", blocks=2 * 8 + 1, block_ms=1.0, blocks_per_sm=2)   # one block too many
    small = Work("small", "s2", blocks=1, block_ms=1.0, blocks_per_sm=2)
    predicted = simulate([big, small], Machine(sm_count=8))
    spans = {s.label: s for s in predicted.spans}
    assert spans["small"].first_block_ms == 1.0        # waits until big's last block is placed
    assert spans["small"].start_ms == 0.0              # though its stream reached it at once
    assert spans["big"].end_ms == 2.0
    half = Work("half", "s1", blocks=4, block_ms=1.0, blocks_per_sm=2)   # one per SM, breadth-first
    quarters = [Work("quarters", "s2", blocks=n, block_ms=1.0, blocks_per_sm=4) for n in (8, 9)]
    assert makespan([half, quarters[0]], Machine(sm_count=4)) == 1.0   # 2 fit beside each half
    assert makespan([half, quarters[1]], Machine(sm_count=4)) == 2.0


def test_copies_use_one_engine_per_direction():
    work = [Work("in0", "s1", "h2d", block_ms=1.0), Work("in1", "s2", "h2d", block_ms=1.0),
            Work("out", "s3", "d2h", block_ms=1.0)]
    spans = {s.label: s for s in simulate(work, H200).spans}
    assert (spans["in1"].first_block_ms, spans["in1"].end_ms) == (1.0, 2.0)
    assert spans["out"].end_ms == 1.0
    assert makespan(work, Machine(132, copy_engines=2)) == 1.0


def test_events_and_host_waits():
    work = [Work("a", "s1", blocks=1, block_ms=2.0),
            Work("b", "s2", blocks=1, block_ms=1.0, after=(0,)),
            Work("c", "s3", blocks=1, block_ms=1.0, host_after=(1,))]
    spans = {s.label: s for s in simulate(work, Machine(132, host_launch_ms=0.5)).spans}
    assert spans["b"].start_ms == 2.0 and spans["c"].submit_ms == 3.0 and spans["c"].end_ms == 4.0


def test_bad_work_is_refused_by_name():
    with pytest.raises(ValueError, match="0 blocks per SM"):
        simulate([Work("k", "s", blocks=4, block_ms=1.0, blocks_per_sm=0)], H200)
    with pytest.raises(ValueError, match="kind"):
        simulate([Work("k", "s", "memset")], H200)
    with pytest.raises(ValueError, match="earlier"):
        simulate([Work("k", "s", after=(0,))], H200)


def test_blocks_per_sm_comes_from_the_occupancy_calculator():
    assert blocks_per_sm(256, 16, cc=(9, 0)) == 8
    assert blocks_per_sm(1024, 64, cc=(9, 0)) == 1
    assert blocks_per_sm(128, 255, cc=(9, 0)) == 2


def test_a_recorded_trace_becomes_work():
    one_block = dict(grid=(1, 1, 1), block=(32, 1, 1))
    trace = Trace([Op(0, "kernel", "a", "s1", 0.0, **one_block),
                   Op(1, "record", "event record", "s1", 0.0, event=7),
                   Op(2, "wait", "event wait", "s2", 0.0, event=7),
                   Op(3, "kernel", "b", "s2", 0.0, **one_block),        # after a, through the event
                   Op(4, "kernel", "c", "s1", 0.0, **one_block),        # beside b
                   Op(5, "device_sync", "cuda.synchronize", None, 0.0),
                   Op(6, "h2d", "copy", "s3", 0.0, nbytes=100)])        # the host waited for all
    work = from_trace(trace, lambda op: {"block_ms": 1.0, "blocks_per_sm": 8})
    assert [(w.name, w.row, w.after, w.host_after) for w in work] == [
        ("a", "s1", (), ()), ("b", "s2", (0,), ()), ("c", "s1", (), ()), ("copy", "s3", (), (0, 1, 2))]
    spans = simulate(work, H200).spans
    assert [(s.start_ms, s.end_ms) for s in spans] == [(0.0, 1.0), (1.0, 2.0), (1.0, 2.0), (2.0, 3.0)]


def test_thousands_of_blocks_are_fast():
    started = time.perf_counter()
    simulate(round_robin(16, 16, blocks=132 * 8, block_ms=1.0, blocks_per_sm=8), H200)
    assert time.perf_counter() - started < 2.0


def test_streams_beyond_the_hardware_queues_share_them():
    """16 kernels that fit side by side: 16 queues run them at once, 8 queues in two rounds."""
    work = round_robin(16, 16, blocks=8, block_ms=1.0, blocks_per_sm=8)
    assert makespan(work, Machine(132, hardware_queues=16)) == 1.0
    assert makespan(work, Machine(132, hardware_queues=8)) == 2.0
    assert makespan(work, Machine(132)) == 1.0
    with pytest.raises(ValueError, match="hardware_queues"):
        simulate(work, Machine(132, hardware_queues=0))


def test_an_issue_order_submits_depth_first_or_breadth_first_and_names_a_bad_one():
    seen = []
    submits = [lambda lo, hi, s, what=what: seen.append((what, lo, s)) for what in ("in", "kernel", "out")]
    issue_in_order("depth_first", [(0, 2), (2, 4), (4, 5)], ["a", "b"], *submits)
    assert seen == [("in", 0, "a"), ("kernel", 0, "a"), ("out", 0, "a"), ("in", 2, "b"), ("kernel", 2, "b"),
                    ("out", 2, "b"), ("in", 4, "a"), ("kernel", 4, "a"), ("out", 4, "a")]
    seen.clear()
    issue_in_order("breadth_first", [(0, 2), (2, 4), (4, 5)], ["a", "b"], *submits)
    assert seen == [("in", 0, "a"), ("in", 2, "b"), ("in", 4, "a"), ("kernel", 0, "a"), ("kernel", 2, "b"),
                    ("kernel", 4, "a"), ("out", 0, "a"), ("out", 2, "b"), ("out", 4, "a")]
    with pytest.raises(ValueError, match="no issue order 'sideways'"):
        issue_in_order("sideways", [(0, 1)], ["a"], *submits)


def test_breadth_first_loses_in_the_model_only_where_a_stream_holds_two_chunks():
    """Lab 07's pipeline_issue_order: with a host that costs nothing, 8 chunks (a copy 1, a kernel 1
    on every SM) on 4 streams take 10 depth first (one engine per direction: 8 copies in, the last
    kernel, its copy out); breadth first, stream s's first kernel waits for its second copy in and
    its first copy out for its second kernel, so the copies out start late: 16. On 8 streams, one
    chunk each, the order costs nothing."""
    assert pipeline_ms("depth_first", 4, 8, 1.0, 1.0, 4) == pytest.approx(10.0)
    assert pipeline_ms("breadth_first", 4, 8, 1.0, 1.0, 4) == pytest.approx(16.0)
    assert pipeline_ms("breadth_first", 8, 8, 1.0, 1.0, 4) == pytest.approx(10.0)


def test_a_streams_gap_is_the_median_idle_time_between_its_spans():
    """The model's launch latency, read from a timeline: signed (overlapping events read negative)."""
    spans = [Span("k", "s1", "kernel", start, end) for start, end in ((0.0, 1.0), (1.5, 2.0), (2.1, 3.0), (2.9, 4.0))]
    assert stream_gap_ms(TimelineData(tuple(spans), ("s1",), "test")) == pytest.approx(0.1)
    assert stream_gap_ms(TimelineData(tuple(spans[:1]), ("s1",), "test")) == 0.0
