"""Checks of the meter's warp model (not graded): sectors per request and shared-memory bank
conflicts, on kernels whose answer is known by hand."""

import numpy as np
import pytest

from kernellab.gpu import device, traffic
from kernellab.gpu.traffic import meter

cuda = device.cuda()
pytestmark = pytest.mark.skipif(not device.is_simulator(),
                                reason="the warp model traces accesses in the simulator")
float32, float64 = np.float32, np.float64


@cuda.jit
def copy_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i]


@cuda.jit
def thread_major_kernel(x, out):
    per = (out.size + cuda.gridsize(1) - 1) // cuda.gridsize(1)   # each thread its own chunk
    start = cuda.grid(1) * per
    for i in range(start, min(start + per, out.size)):
        out[i] = x[i]


@cuda.jit
def broadcast_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[0] + x[i]


def traced(kernel, dtype, n=300, grid=3, block=32):
    x = cuda.to_device(np.arange(n, dtype=dtype))
    out = cuda.to_device(np.zeros(n, dtype))
    with meter(x=x, out=out, trace=("global",)) as count:
        kernel[grid, block](x, out)
    return count


def test_the_ideal_follows_the_access_width():
    assert [traffic.ideal_sectors(w) for w in (1, 2, 4, 8, 16)] == [1.0, 2.0, 4.0, 8.0, 16.0]


@pytest.mark.parametrize("dtype, ideal", [(float32, 4), (float64, 8)])
def test_consecutive_lanes_take_the_ideal_sectors(dtype, ideal):
    count = traced(copy_kernel, dtype, n=96)
    assert {(s.array, s.site.kind) for s in count.coalescing} == {("x", "load"), ("out", "store")}
    for site in count.coalescing:
        assert (site.requests, site.per_request, site.ideal) == (3, ideal, ideal), site.describe()
        assert site.coalesced and site.site.expression in ("x[i]", "out[i]")
    assert count.uncoalesced() == [] and count.bank_conflicts is None   # shared: not traced


def test_a_thread_major_loop_is_not_coalesced():
    count = traced(thread_major_kernel, float32)       # 96 threads, 4 elements each: 16 B apart
    assert len(count.coalescing) == 2, count.requests_table()   # one site each, every pass
    for site in count.coalescing:
        assert site.requests == 12 and site.per_request > 12, site.describe()
        assert not site.coalesced
    assert {s.array for s in count.uncoalesced()} == {"x", "out"}
    assert count.uncoalesced("out")[0].site.line == thread_major_kernel.py_func.__code__.co_firstlineno + 5   # under @cuda.jit


def test_a_broadcast_is_one_sector_and_two_loads_on_a_line_are_two_sites():
    count = traced(broadcast_kernel, float32, n=64, grid=2)
    loads = sorted((s for s in count.sites("x")), key=lambda s: s.site.columns)
    assert [s.site.expression for s in loads] == ["x[0]", "x[i]"]
    assert [s.per_request for s in loads] == [1.0, 4.0] and count.uncoalesced() == []


@cuda.jit
def tiles_kernel(x, out):
    padded = cuda.shared.array((32, 33), float32)
    unpadded = cuda.shared.array((32, 32), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for k in range(0, 32, 4):
        padded[ty + k, tx] = x[ty + k, tx]
        unpadded[ty + k, tx] = x[ty + k, tx]
    cuda.syncthreads()
    for k in range(0, 32, 4):
        out[ty + k, tx] = padded[tx, ty + k] - unpadded[tx, ty + k] + padded[0, 0] * 0


def test_bank_conflicts_of_a_column_read_with_and_without_padding():
    x = cuda.to_device(np.arange(32 * 32, dtype=float32).reshape(32, 32))
    out = cuda.to_device(np.full((32, 32), np.nan, float32))
    with meter(x=x, out=out, trace=("global", "shared")) as count:
        tiles_kernel[1, (32, 4)](x, out)
    assert np.array_equal(out.copy_to_host(), np.zeros((32, 32), float32)), "the two arrays alias"
    by_access = {(s.array.split(":")[1], s.site.kind, s.site.expression): s for s in count.bank_conflicts}
    first = tiles_kernel.py_func.__code__.co_firstlineno          # the @cuda.jit line
    padded, unpadded = str(first + 2), str(first + 3)
    assert by_access[(padded, "store", "padded[ty + k, tx]")].conflict_free
    assert by_access[(unpadded, "store", "unpadded[ty + k, tx]")].conflict_free
    assert by_access[(padded, "load", "padded[tx, ty + k]")].ways == 1.0
    assert by_access[(unpadded, "load", "unpadded[tx, ty + k]")].ways == 32.0   # one bank, 32 words
    assert by_access[(padded, "load", "padded[0, 0]")].ways == 1.0              # a broadcast
    assert [s.site.expression for s in count.conflicted()] == ["unpadded[tx, ty + k]"]


def test_wide_shared_words_are_served_in_phases():
    lanes = {lane: 8 * lane for lane in range(32)}              # float64, consecutive
    assert traffic.request_wavefronts(lanes, 8) == (2, 2)       # two half-warp phases, no conflict
    strided = {lane: 16 * lane for lane in range(32)}           # float64, every other one
    assert traffic.request_wavefronts(strided, 8) == (4, 2)     # 2-way in each phase
    assert traffic.request_wavefronts({lane: 0 for lane in range(32)}, 4) == (1, 1)


def test_request_sectors_count_alignment_not_only_bytes():
    assert traffic.request_sectors({lane: 24 + 4 * lane for lane in range(32)}, 4) == (5, 5)
    assert traffic.request_sectors({lane: 8 * lane for lane in range(32)}, 4) == (8, 4)


def test_a_warp_over_four_rows_of_a_block_needs_a_run_per_row():
    """Blocks 8 wide: a warp is 4 rows of 8 lanes, each a run of 32 bytes in its own row of a
    matrix 100 floats wide (rows start mid-sector): 2 sectors a row, coalesced."""
    lanes = {lane: 4 * (100 * (lane // 8) + lane % 8) + 8 for lane in range(32)}
    assert traffic.request_sectors(lanes, 4, row_lanes=8) == (8, 8)
    down_a_column = {lane: 400 * (lane % 16) + 4 * (lane // 16) for lane in range(32)}  # 16 wide
    assert traffic.request_sectors(down_a_column, 4, row_lanes=16) == (16, 5)


def test_lab09_diagnose_judges_sectors_against_the_load_width():
    from kernellab.course import protocol
    experiment = protocol.experiment("09")
    row = {"dram_throughput_pct": 50.0, "sm_throughput_pct": 50.0, "l1_sectors_per_request": 16.0,
           "achieved_occupancy_pct": 80.0, "registers_per_thread": 32}
    vector = experiment.diagnose({**row, "kernel": "softmax_vector_kernel"})
    scalar = experiment.diagnose({**row, "kernel": "copy4_consecutive_kernel"})
    assert "ideal 16 for 16-byte loads" in vector[0] and not any("uncoalesced" in l for l in vector)
    assert "ideal 4 for 4-byte loads" in scalar[0] and any("uncoalesced" in l for l in scalar)


def test_tracing_is_asked_for_and_judging_untraced_requests_is_an_error():
    x = cuda.to_device(np.arange(64, dtype=float32))
    out = cuda.to_device(np.zeros(64, float32))
    with meter(x=x, out=out) as count:
        copy_kernel[2, 32](x, out)
    assert count["x"].reads == 64 and count.coalescing is None
    with pytest.raises(RuntimeError, match=r"trace=\('global',\)"):
        count.uncoalesced()
    with pytest.raises(ValueError, match="not local"):
        with meter(x=x, trace=("local",)):
            pass
