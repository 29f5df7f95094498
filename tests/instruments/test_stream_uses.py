"""Checks of the timeline's use recorder (not graded): races between streams, copies that make
the host wait, on small pipelines whose answer is known by hand (simulator)."""

import numpy as np
import pytest

from kernellab.gpu import device
from kernellab.gpu.timeline import Timeline

cuda = device.cuda()
pytestmark = pytest.mark.skipif(not device.is_simulator(), reason="the use recorder meters kernels in the simulator")


@cuda.jit
def double_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * np.float32(2.0)


def double(x, out, stream):
    double_kernel[1, 32, stream](x, out)


def chunks(host, streams, shared_staging, ordered=False):
    """Each chunk of 16 through the device and back, on streams in turn."""
    d_in, d_out = cuda.device_array(64, np.float32), cuda.device_array(64, np.float32)
    out = cuda.pinned_array(64, np.float32)
    event = cuda.event()
    for c in range(4):
        stream, lo, hi = streams[c % 2], 16 * c, 16 * c + 16
        staging = d_in[:16] if shared_staging else d_in[lo:hi]
        if ordered and c:
            event.wait(stream)
        staging.copy_to_device(host[lo:hi], stream=stream)
        double(staging, d_out[lo:hi], stream)
        d_out[lo:hi].copy_to_host(out[lo:hi], stream=stream)
        event.record(stream)
    for stream in streams:
        stream.synchronize()
    return out


def test_disjoint_chunks_do_not_race_and_reads_never_race():
    host = cuda.pinned_array(64, np.float32)
    host[:] = np.arange(64)
    streams = [cuda.stream(), cuda.stream()]
    with Timeline(record_uses=True) as tl:
        out = chunks(host, streams, shared_staging=False)
        double(out_in := cuda.to_device(host), cuda.device_array(64, np.float32), streams[0])
        double(out_in, cuda.device_array(64, np.float32), streams[1])   # both only read out_in
    assert np.array_equal(out, 2 * host)
    assert tl.races() == []
    kernel = tl.trace.kernels()[0]
    assert [(u.what, u.writes, u.start, u.end) for u in tl.uses[kernel.index]] == \
        [("argument 0", False, 0, 64), ("argument 1", True, 0, 64)]


def test_a_staging_buffer_shared_by_two_streams_races_unless_an_event_orders_it():
    host = cuda.pinned_array(64, np.float32)
    host[:] = np.arange(64)
    streams = [cuda.stream(), cuda.stream()]
    with Timeline(record_uses=True) as tl:
        chunks(host, streams, shared_staging=True)
    found = tl.races()
    assert found, "chunks 0 and 1 both use d_in[:16] on two streams"
    first = found[0]
    assert {first.first.row, first.then.row} == {"stream 1", "stream 2"}
    assert "no event or synchronization orders" in first.describe()
    assert "test_stream_uses.py" not in first.first_use.where   # tests are not course code
    with Timeline(record_uses=True) as tl:
        chunks(host, streams, shared_staging=True, ordered=True)
    assert tl.races() == []


def test_a_copy_to_pageable_memory_makes_the_host_wait():
    host = cuda.pinned_array(32, np.float32)
    host[:] = 1.0
    stream = cuda.stream()
    with Timeline(record_uses=True) as tl:
        d = cuda.to_device(host, stream=stream)
        into_pinned = cuda.pinned_array(32, np.float32)
        d.copy_to_host(into_pinned, stream=stream)
        fresh = d.copy_to_host(stream=stream)               # numba allocates a pageable array
    waits = tl.pageable_copies(pinned=[host, into_pinned])
    assert [(op.kind, use.what) for op, use in waits] == [("d2h", "destination")]
    assert np.array_equal(fresh, host)
    with pytest.raises(RuntimeError, match="record_uses"):
        Timeline().races()
