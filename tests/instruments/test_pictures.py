"""The pictures of a kernel at work (kernellab.course.pictures) show what the kernel did, checked
against cases worked by hand: a coalesced warp of 4-byte loads touches 4 sectors, a strided one 32;
a padded tile has no bank conflict, an unpadded one read across is 32-way; the idle threads of a
launch larger than its array; x along columns. Every caption is worked out from its picture's data
(one element per thread or several, where the idle threads are, what a timeline draws), and every
picture can be read from the back of a room."""

import json
import math

import numpy as np
import pytest
from numba import cuda, float32

from kernellab import occupancy
from kernellab.course import pictures, target
from kernellab.gpu import checks, traffic
from kernellab.gpu.timeline import Op, Trace
from kernellab.show import plots
from kernellab.show.pictures import canvas, kernel

STRIDE = 8                       # floats between neighbouring lanes: each lane in its own sector
TILE = 32
ROWS = 4                         # rows of the tile each thread copies: TILE / ROWS


@cuda.jit
def strided_copy_kernel(x, out):
    i = cuda.grid(1)
    if i * STRIDE < x.size:
        out[i] = x[i * STRIDE]


def strided_copy(x, out):
    strided_copy_kernel[1, 32](x, out)
    return out


@cuda.jit
def unpadded_transpose_kernel(x, out):
    tile = cuda.shared.array((TILE, TILE), float32)        # no padding column
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    for k in range(0, TILE, ROWS):
        tile[ty + k, tx] = x[ty + k, tx]
    cuda.syncthreads()
    for k in range(0, TILE, ROWS):
        out[ty + k, tx] = tile[tx, ty + k]                 # a warp reads a column: one bank


def unpadded_transpose(x, out):
    unpadded_transpose_kernel[1, (TILE, ROWS)](x, out)
    return out


@cuda.jit
def rows_along_x_kernel(x, out):
    row, col = cuda.grid(2)                                # x runs down the rows: the bug
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = x[row, col]


def rows_along_x(x, out):
    rows_along_x_kernel[(1, 2), (8, 4)](x, out)
    return out


@cuda.jit
def transposed_index_kernel(x, out):
    i = cuda.threadIdx.x * cuda.gridDim.x + cuda.blockIdx.x     # the bug: neighbours 4 blocks apart
    if i < out.size:
        out[i] = x[i]


def transposed_index(x, out):
    transposed_index_kernel[4, 64](x, out)
    return out


@cuda.jit
def short_tree_kernel(x, out):
    scratch = cuda.shared.array(32, float32)
    tid = cuda.threadIdx.x
    scratch[tid] = x[tid]
    cuda.syncthreads()
    stride = 16
    while stride > 1:                                      # the bug: stops before the last step
        if tid < stride:
            scratch[tid] = scratch[tid] + scratch[tid + stride]
        cuda.syncthreads()
        stride //= 2
    if tid == 0:
        out[0] = scratch[0]


def short_tree(x, out):
    short_tree_kernel[1, 32](x, out)
    return out


@cuda.jit
def column_walk_kernel(a, b, c):
    a_tile = cuda.shared.array((4, 4), float32)
    b_tile = cuda.shared.array((4, 4), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    acc = float32(0)
    for k0 in range(0, 8, 4):
        a_tile[ty, tx] = a[k0 + ty, tx]                    # the bug: A's tiles taken down a column
        b_tile[ty, tx] = b[k0 + ty, tx]
        cuda.syncthreads()
        for k in range(4):
            acc += a_tile[ty, k] * b_tile[k, tx]
        cuda.syncthreads()
    c[ty, tx] = acc


def column_walk(a, b, c):
    column_walk_kernel[1, (4, 4)](a, b, c)
    return c


def rereading_x_kernel(lab):
    """Lab 02's fused chain kernel with a bug a trial found: x[i] read again for chain_element."""
    chain_element, dropout_keep = lab.chain_element, lab.dropout_keep

    @cuda.jit
    def fused_chain_rereading_x_kernel(x, w, b, r, mask, seed, threshold, scale, out):
        i = cuda.grid(1)
        if i < out.size:
            xv, wv, bv, rv = x[i], w[i], b[i], r[i]
            keep = dropout_keep(i, mask, seed, threshold)
            nan = xv != xv                                           # xv kept for a NaN check only
            out[i] = xv if nan else chain_element(x[i], wv, bv, rv, keep, scale)   # the bug: x[i] loaded again
    return fused_chain_rereading_x_kernel


def one_value_per_thread_kernels(lab):
    """Lab 05's fused softmax with a bug in the part the student writes: each thread folds only
    its first value of the row into the block's max and sum (a row of 40 over 32 threads: 8 lost)."""
    block_max, block_sum = lab.block_max, lab.block_sum

    @cuda.jit
    def softmax_one_value_kernel(x, out):
        scratch = cuda.shared.array(32, float32)
        row, tid = cuda.blockIdx.x, cuda.threadIdx.x
        value = x[row, tid] if tid < x.shape[1] else float32(-np.inf)     # the bug: columns tid + 32 ... skipped
        top = block_max(value, scratch)
        total = block_sum(math.exp(value - top), scratch)
        if tid < x.shape[1]:
            out[row, tid] = math.exp(value - top) / total
    return lab.FusedKernels(softmax_one_value_kernel, None)


def lab_inputs(rng, n: int) -> dict:
    """Lab 02's chain inputs for n elements, by name, and its p and seed."""
    from kernellab.course import protocol
    experiment = protocol.experiment("02")
    host = experiment.chain_inputs(target.load("02", "solutions"), rng, n)
    return {**{name: host[name] for name in ("x", "w", "b", "r", "mask")}, "p": experiment.P, "seed": host["seed"]}


@pytest.fixture(scope="module")
def labs():
    return {number: target.load(number, "solutions") for number in ("00", "02", "03", "04", "05", "06", "09")}


@pytest.fixture(scope="module")
def axpb_run(labs):
    x = np.arange(200, dtype=np.float32)
    return pictures.trace("00", labs["00"].axpb, x, np.float32(2), np.float32(1), block=64)


def readable(picture):
    """The picture passes the figure checker, its texts are >= 14 pt, its colours are at most 8
    from the palette, its caption is one line; then it is closed."""
    fig = picture.figure
    try:
        assert plots.layout_problems(fig) == [] and plots.colour_problems(fig) == []
        assert canvas.small_texts(fig) == []
        assert fig.get_size_inches()[0] * plots.DPI >= 1200
        palette = {c.lower() for c in (*canvas.BLOCK_COLOURS, canvas.VERMILLION, canvas.BLACK, canvas.GREY)}
        used = canvas.colours_used(fig)
        assert used <= palette and len(used) <= 8, used
        assert "\n" not in picture.caption and len(picture.caption) <= 120
        assert picture._repr_png_()[:4] == b"\x89PNG"
    finally:
        picture.close()
    return picture.data


def test_threads_of_a_1d_launch_show_the_idle_ones(axpb_run):
    picture = pictures.threads(axpb_run)
    data = readable(picture)
    assert (data["threads"], data["elements"]) == (256, 200)
    assert data["idle"] == [((3, 0, 0), (t, 0, 0)) for t in range(8, 64)]
    assert data["element_block"] == [i // 64 for i in range(200)]
    assert data["thread_block"][200:] == [-1] * 56
    assert picture.caption == "Each thread i writes out[i]; the last 56 threads find i past the end and stay idle."


def test_a_transposed_thread_index_shows_neighbours_apart_and_a_strided_warp():
    """i = threadIdx.x * gridDim.x + blockIdx.x over 4 blocks of 64: threads t and t + 1 write
    elements 4 apart, and warp 0's 32 loads of 4 bytes, 16 bytes apart, touch 16 sectors."""
    run = pictures.trace_call(transposed_index, np.arange(200, dtype=np.float32), np.zeros(200, np.float32))
    picture = pictures.threads(run)
    data = readable(picture)
    assert (data["writes"], data["neighbour_stride"], data["unwritten"]) == ("elsewhere", 4, 0)
    assert data["element_block"][:8] == [0, 1, 2, 3] * 2
    assert picture.caption.startswith("Neighbouring threads write elements 4 apart, not out[i]; 56 idle threads")
    warp = readable(pictures.warp_access(run, "x"))
    assert (warp["sectors_per_request"], warp["fewest"]) == (16, 4)


def test_a_grid_stride_thread_writes_several_elements_a_grid_apart(labs):
    """2 blocks of 32 over 200 elements: thread i writes i, i + 64, i + 128, and i + 192 where
    that is below 200 (threads 0-7): 3 or 4 elements each, no thread idle."""
    run = pictures.trace("00", labs["00"].axpb_grid_stride, np.arange(200, dtype=np.float32), np.float32(2),
                         np.float32(1), blocks=2, block=32)
    picture = pictures.threads(run)
    data = readable(picture)
    assert (data["writes"], data["elements_per_thread"], data["idle"]) == ("grid-stride", (3, 4), [])
    assert data["element_block"] == [i % 64 // 32 for i in range(200)]
    assert picture.caption == ("Each thread i writes out[i], [i + 64], [i + 128] ...: 3 to 4 elements each; "
                               "no thread is idle.")


def test_a_merged_grid_writes_at_each_tasks_offset_and_idles_in_the_tails(labs):
    """Lab 03's tasks of 40, 24, 16 and 8 elements in blocks of 16: blocks 0-2, 3-4, 5 and 6, so
    thread 48 (block 3's first) writes out[40], the add's first; blocks 2, 4 and 6 have 8 idle
    threads each at their ends. Seven blocks: no two drawn alike."""
    rng = np.random.default_rng(0)
    tiny = [rng.standard_normal(n).astype(np.float32) for n in (40, 24, 24, 16, 8)]
    run = pictures.trace("03", labs["03"].horizontal_tasks, *tiny, np.float32(2), block=16)
    picture = pictures.threads(run)
    hatched = {patch.get_hatch() for ax in picture.figure.axes for patch in ax.patches if patch.get_hatch()}
    data = readable(picture)
    assert data["writer"][(40,)] == ((3, 0, 0), (0, 0, 0)) and data["writes"] == "elsewhere"
    assert sorted(b[0] * 16 + t[0] for b, t in data["idle"]) == [*range(40, 48), *range(72, 80), *range(104, 112)]
    assert picture.caption == ("Each thread writes one element, not always out[i]; 24 idle threads: the tails "
                               "of blocks 2, 4 and 6.")
    assert len({kernel.block_style(block) for block in range(7)}) == 7
    assert hatched == {kernel.block_style(6)[1]}               # block 6: block 0's colour, hatched


def test_a_swapped_2d_kernel_leaves_elements_unwritten_and_the_failure_names_the_picture():
    """x down the rows of an 8 x 16 array: 8 threads in x cover the 8 rows, 8 in y the first 8
    columns; columns 8-15 are never written, and assert_matches says which picture shows it."""
    out = checks.poisoned((8, 16))
    rows_along_x(cuda.to_device(np.ones((8, 16), np.float32)), out)
    with pytest.raises(AssertionError, match=r"64 of 128 elements never written.*pictures\.threads\(pictures\.trace"):
        checks.assert_matches(out, np.ones((8, 16)))
    picture = pictures.threads(pictures.trace_call(rows_along_x, np.ones((8, 16), np.float32),
                                                   np.zeros((8, 16), np.float32)))
    data = readable(picture)
    assert (data["x_runs_along"], data["unwritten"], data["idle"]) == ("rows", 64, [])
    assert picture.caption == ("x runs along rows: neighbouring threadIdx.x write neighbouring rows; no thread "
                               "is idle; 64 elements are never written.")


def test_a_2d_launch_runs_x_along_columns_and_a_swapped_one_down_rows(labs):
    run = pictures.trace("00", labs["00"].add_row_bias, np.ones((10, 40), np.float32), np.ones(40, np.float32))
    data = readable(pictures.threads(run))
    assert data["x_runs_along"] == "columns"
    assert len(data["idle"]) == 64 * 12 - 400
    assert np.array(data["element_map"])[9, 39] == 1 + 2 * 2            # block (1, 2)
    swapped = pictures.trace_call(rows_along_x, np.ones((8, 8), np.float32), np.zeros((8, 8), np.float32))
    assert readable(pictures.threads(swapped))["x_runs_along"] == "rows"


def test_a_coalesced_warp_touches_4_sectors_and_a_strided_one_32(axpb_run):
    coalesced = readable(pictures.warp_access(axpb_run, "x"))
    assert (coalesced["sectors_per_request"], coalesced["fewest"], coalesced["ideal"]) == (4, 4, 4)
    assert coalesced["sectors"] == [0, 1, 2, 3]
    store = readable(pictures.warp_access(axpb_run, "out", warp=1, kind="store"))
    assert store["sectors"] == [4, 5, 6, 7]
    strided = pictures.trace_call(strided_copy, np.zeros(32 * STRIDE, np.float32), np.zeros(32, np.float32))
    data = readable(pictures.warp_access(strided, "x"))
    assert (data["sectors_per_request"], data["fewest"]) == (32, 4)
    assert data["lanes"] == {lane: 4 * STRIDE * lane for lane in range(32)}


def test_the_naive_transpose_writes_32_sectors_per_warp(labs):
    run = pictures.trace("09", labs["09"].transpose_naive, np.zeros((32, 32), np.float32))
    assert readable(pictures.warp_access(run, "x"))["sectors_per_request"] == 4
    assert readable(pictures.warp_access(run, "out", kind="store"))["sectors_per_request"] == 32


def test_a_padded_tile_has_no_conflict_and_an_unpadded_column_read_is_32_way(labs):
    padded = pictures.trace("09", labs["09"].transpose, np.zeros((32, 32), np.float32))
    data = readable(pictures.shared_banks(padded))                      # the worst site of the tile
    assert (data["ways"], data["wavefronts"], data["ideal"], data["array"]) == (1, 1, 1, "tile")
    read = readable(pictures.shared_banks(padded, kind="load"))
    assert sorted(read["lane_banks"].values()) == list(range(32))
    unpadded = pictures.trace_call(unpadded_transpose, np.zeros((TILE, TILE), np.float32),
                                   np.zeros((TILE, TILE), np.float32))
    data = readable(pictures.shared_banks(unpadded))
    assert (data["ways"], data["wavefronts"], data["ideal"]) == (32, 32, 1)
    assert set(data["lane_banks"].values()) == {0}
    assert "load `tile[tx, ty + k]`" in data["site"]


def test_the_tile_walk_of_the_tiled_matmul(labs):
    rng = np.random.default_rng(0)
    a, b = rng.random((8, 16), dtype=np.float32), rng.random((16, 8), dtype=np.float32)
    run = pictures.trace("04", labs["04"].matmul_tiled, a, b, tile=4)
    np.testing.assert_allclose(run.result, a @ b, rtol=1e-5)
    data = readable(pictures.tiles(run))
    assert [(s["a"], s["b"]) for s in data["steps"]] == [
        (((0, 4), (4 * k, 4 * k + 4)), ((4 * k, 4 * k + 4), (0, 4))) for k in range(4)]
    assert all(s["a_shared"] == s["b_shared"] == ((0, 4), (0, 4)) for s in data["steps"])
    assert data["c"] == ((0, 4), (0, 4)) and data["tile_arrays"] == ("a_tile", "b_tile")
    assert data["walks"] == {"a": "left to right", "b": "top to bottom"}


def test_the_reduction_tree_of_a_row(labs):
    run = pictures.trace("05", labs["05"].softmax_unfused, np.ones((2, 40), np.float32))
    data = readable(pictures.reduction(run))
    assert (data["array"], data["slots"], data["leaves"]) == ("scratch", 32, list(range(32)))
    assert [len(edges) for edges in data["steps"]] == [16, 8, 4, 2, 1]
    assert data["steps"][0] == [(t + 16, t) for t in range(16)]
    assert data["reach_slot_0"] == list(range(32))


def test_the_fused_softmax_folds_a_row_of_40_into_32_slots_then_the_tree(labs):
    """Lab 05.1 on rows of 40 over 32 threads: thread t folds columns t and t + 32 (t < 8) into
    slot t, then the tree of its row max (the row sum's, after the broadcast, is left out)."""
    run = pictures.trace("05", labs["05"].softmax_fused, np.ones((2, 40), np.float32))
    picture = pictures.reduction(run)
    data = readable(picture)
    assert [len(edges) for edges in data["steps"]] == [16, 8, 4, 2, 1]
    assert data["inputs"] == [(0, col) for col in range(40)] and data["inputs_missing"] == []
    assert data["input_slot"] == {col: col % 32 for col in range(40)}
    assert picture.caption == ("Each thread folds its values of x[0, :] into its slot, then 16, 8, 4, 2, 1 "
                               "threads combine two slots at the steps.")


def test_a_fused_softmax_that_folds_one_value_per_thread_says_which_columns_never_reach_slot_0(labs, monkeypatch):
    lab = labs["05"]
    monkeypatch.setattr(lab, "fused_kernels", lambda items, max_registers=None: one_value_per_thread_kernels(lab))
    run = pictures.trace("05", lab.softmax_fused, np.ones((2, 40), np.float32))
    picture = pictures.reduction(run)
    data = readable(picture)
    assert [len(edges) for edges in data["steps"]] == [16, 8, 4, 2, 1]
    assert data["inputs_missing"] == [(0, col) for col in range(32, 40)]
    assert picture.caption == "Slot 0 ends with 32 of the 40 values of x[0, :]: columns 32-39 never reach it."


def test_a_tree_that_stops_a_step_short_says_what_never_reaches_slot_0():
    run = pictures.trace_call(short_tree, np.ones(32, np.float32), np.zeros(1, np.float32))
    assert run.result[0] == 16
    picture = pictures.reduction(run)
    data = readable(picture)
    assert [len(edges) for edges in data["steps"]] == [16, 8, 4, 2]
    assert data["reach_slot_0"] == [t for t in range(32) if t % 2 == 0]
    assert picture.caption == "Slot 0 ends with 16 of the 32 values of x: the tree leaves 16 of its 32 slots out."


def test_a_tile_walk_down_the_wrong_way_says_so():
    rng = np.random.default_rng(0)
    run = pictures.trace_call(column_walk, rng.random((8, 4), dtype=np.float32), rng.random((8, 4), dtype=np.float32),
                              np.zeros((4, 4), np.float32))
    picture = pictures.tiles(run)
    data = readable(picture)
    assert data["walks"] == {"a": "top to bottom", "b": "top to bottom"}
    assert [s["a"] for s in data["steps"]] == [((0, 4), (0, 4)), ((4, 8), (0, 4))]
    assert picture.caption == ("Block (0, 0) walks A's tiles top to bottom, B's top to bottom: a row of C needs "
                               "A left to right, B top to bottom.")


def test_a_kernel_without_shared_memory_draws_empty_banks(labs):
    """A transpose without its tile (the naive one, under transpose's name) still draws its banks."""
    run = pictures.trace("09", labs["09"].transpose_naive, np.zeros((32, 32), np.float32))
    picture = pictures.shared_banks(run)
    data = readable(picture)
    assert (data["wavefronts"], data["bank_words"]) == (0, {})
    assert picture.caption == ("transpose_naive made no shared-memory access: every load and store goes to "
                               "global memory.")


def test_timelines_put_work_on_queues_and_engines():
    record = json.loads((target.ROOT / "data/reference/h200/lab07.json").read_text())
    pinned = record["records"]["pipeline"]["cases"]["pinned"]["timeline"]
    data = readable(pictures.timeline(pinned))
    panel, = data["panels"]
    assert panel["lanes"] == ["host", *(f"stream {i} -> queue {i}" for i in range(1, 5)),
                              "copy engines: to GPU", "SMs", "copy engines: to host"]
    assert len(panel["spans"]) == len(pinned["spans"])
    ops = Trace([Op(0, "h2d", "H2D", "s1", 0.0), Op(1, "kernel", "k", "s1", 0.1), Op(2, "h2d", "H2D", "s2", 0.2)])
    picture = pictures.timeline(ops)
    data = readable(picture)
    assert [span["start"] for span in data["panels"][0]["spans"]] == [0, 1, 0] and data["unit"] == "steps"
    assert picture.caption == ("The simulator ran these 3 ops one at a time; the CUDA ordering rules would let "
                               "them run in 2 steps.")


def test_a_simulator_trace_caption_says_one_op_at_a_time_and_names_no_host_row():
    """One stream: 2 kernels, each after the other (2 steps); two streams: 2 kernels at once (1)."""
    one = Trace([Op(0, "kernel", "k", "s1", 0.0), Op(1, "kernel", "k", "s1", 0.1)])
    two = Trace([Op(0, "kernel", "k", "s1", 0.0), Op(1, "kernel", "k", "s2", 0.1)])
    assert pictures.timeline(one).caption == ("The simulator ran these 2 ops one at a time, and the CUDA ordering "
                                              "rules make each wait for the one before.")
    picture = pictures.timeline(one, two)
    data = readable(picture)
    assert "host" not in data["panels"][0]["lanes"] and "tick" not in picture.caption
    assert picture.caption == ("The simulator ran every op one at a time; the CUDA ordering rules would allow "
                               "2 ops in 2 steps, then 2 ops in 1 step.")


def test_a_timed_caption_comes_from_what_is_drawn():
    """Kernels 0-1 and 3-4 ms, each submitted: the SMs idle 2 of the 4 ms from first kernel to
    last (50%). A copy 0-2 ms beside a kernel 1-3 ms: half the copy's time runs beside it."""
    def span(kind, start, end, submit=None):
        return {"row": "stream 1", "kind": kind, "label": kind, "start_ms": start, "end_ms": end, "submit_ms": submit}
    kernels = {"rows": ["stream 1"], "spans": [span("kernel", 0, 1, 0), span("kernel", 3, 4, 2.5)]}
    assert pictures.timeline(kernels).caption == ("Black ticks: the host's submissions; the SMs idle 50% of the "
                                                  "time from first kernel to last.")
    copy = {"rows": ["stream 1"], "spans": [span("h2d", 0, 2), span("kernel", 1, 3)]}
    picture = pictures.timeline(copy)
    assert "host" not in readable(picture)["panels"][0]["lanes"]
    assert picture.caption == ("Copies run beside a kernel for 50% of their time; the SMs idle 0% of the time "
                               "from first kernel to last.")


def test_eager_against_replayed_from_the_recorded_medians():
    eager, replayed = pictures.replay_timelines(n=1048576, shown=4)
    record = json.loads((target.ROOT / "data/reference/h200/lab08.json").read_text())["records"]["idle_gaps"]
    row = next(r for r in record["rows"] if r["n"] == 1048576)
    assert eager["spans"][1]["start_ms"] == pytest.approx(row["eager_ms"] / record["kernels"])
    assert replayed["spans"][1]["start_ms"] == pytest.approx(row["graph_ms"] / record["kernels"])
    picture = pictures.timeline(eager, replayed)                 # one time axis: the gaps compare
    data = readable(picture)
    assert data["share_time"] and len(data["panels"]) == 2
    assert not readable(pictures.timeline(eager, replayed, share_time=False))["share_time"]
    # 4 kernels of 0.00531 ms, one every 0.0372 ms (eager) or 0.00575 ms (replayed): idle
    # 1 - 4 * 0.00531 / (3 * 0.0372 + 0.00531) = 82%, and 1 - 0.02125 / 0.02257 = 6%
    assert picture.caption == ("Black ticks: the host's submissions; the SMs idle 82% (top) and 6% (bottom) of "
                               "the time from first kernel to last.")


def test_sm_fill_marks_the_limiter(labs):
    result = occupancy.occupancy((9, 0), 256, 64, static_shared=8192)
    data = readable(pictures.sm_fill(result))
    by_name = {r["limit"]: r for r in data["resources"]}
    assert by_name["registers"]["used"] == by_name["registers"]["total"] == 65536
    assert [r["limit"] for r in data["resources"] if r["limiter"]] == ["registers"]
    own = labs["06"].occupancy((9, 0), 1024, 40)
    data = readable(pictures.sm_fill(own, cc=(9, 0), block_size=1024, registers_per_thread=40))
    assert {r["limit"]: r["used"] for r in data["resources"]}["warps"] == 32


def test_bytes_moved_counts_what_the_chains_did_against_their_budgets(labs):
    """256 elements through Lab 02's chains: the meter counts the unfused 45 B per element (x, w,
    b, r, three intermediates written and read, the mask byte, out) and the fused 21 B, each as
    its ledger declares; fused moves 45 / 21 = 2.14x fewer bytes."""
    lab, n = labs["02"], 256
    inputs = lab_inputs(np.random.default_rng(0), n)
    runs = [pictures.trace("02", getattr(lab, name), **inputs) for name in ("unfused_chain", "fused_chain")]
    budgets = (lab.unfused_chain_ledger(n, with_mask=True), lab.fused_chain_ledger(n, with_mask=True))
    picture = pictures.bytes_moved(*runs, budgets=budgets)
    data = readable(picture)
    unfused, fused = data["panels"]
    assert (unfused["total"] / n, fused["total"] / n, data["differences"]) == (45, 21, [])
    assert data["ratio"] == pytest.approx(budgets[0].total_bytes / budgets[1].total_bytes)
    assert {(a["array"], a["direction"]): a["per_element"] for a in unfused["arrows"] if a["temporary"]} == {
        (name, way): 1 for name in ("t_affine", "t_relu", "t_dropout") for way in ("read", "written")}
    assert picture.caption == ("fused_chain moves 2.14x fewer bytes than unfused_chain, as budgeted: the "
                               "intermediates stay in the SMs' registers.")


def test_a_fused_chain_that_rereads_x_shows_2_reads_against_a_budget_of_1(labs, monkeypatch):
    lab, n = labs["02"], 256
    monkeypatch.setattr(lab, "fused_chain_kernel", rereading_x_kernel(lab))
    run = pictures.trace("02", lab.fused_chain, **lab_inputs(np.random.default_rng(0), n))
    picture = pictures.bytes_moved(run, budgets=(lab.fused_chain_ledger(n, with_mask=True),))
    data = readable(picture)
    assert data["differences"] == [{"function": "fused_chain", "array": "x", "direction": "read", "measured": 2,
                                    "budget": 1, "temporary": False}]
    assert data["panels"][0]["total"] / n == 25
    assert picture.caption == "fused_chain read x twice: 2 reads per element against a budget of 1."
    with pytest.raises(ValueError, match="one budget ledger per run: got 1 runs and 2 budgets"):
        pictures.bytes_moved(run, budgets=(lab.fused_chain_ledger(n), lab.fused_chain_ledger(n)))


def test_a_trace_in_a_simulator_child_is_the_same_trace(axpb_run):
    run = pictures.trace_in_child("00", "axpb", (np.arange(200, dtype=np.float32), np.float32(2), np.float32(1)),
                                  {"block": 64}, "solutions")
    def unordered(accesses):           # threads run in no fixed order: compare what, not when
        return sorted(a._replace(order=0) for a in accesses)
    assert unordered(run.accesses) == unordered(axpb_run.accesses) and run.launches == axpb_run.launches


def test_a_failed_check_names_the_picture_that_shows_it(labs):
    x, out = cuda.to_device(np.zeros((32, 32), np.float32)), cuda.device_array((32, 32), np.float32)
    with traffic.meter(trace=("global", "shared"), x=x, out=out) as counts:
        labs["09"].transpose_naive(x, out=out)
    found, = counts.uncoalesced()
    assert pictures.shown_by(found) == ('see it: from kernellab.course import pictures; pictures.warp_access('
                                        'pictures.trace("09", "transpose_naive", <a tiny input>), "out", kind="store")')
    with traffic.meter(trace=("shared",), x=x, out=out) as counts:
        unpadded_transpose(x, out)
    found, = counts.conflicted()
    assert pictures.shown_by(found).endswith(
        'pictures.shared_banks(pictures.trace("NN", "unpadded_transpose", <a tiny input>), "tile", kind="load")')


def test_wrong_requests_say_what_exists(axpb_run):
    with pytest.raises(ValueError, match="no loads of 'y'.*arrays it touched: x, out"):
        pictures.warp_access(axpb_run, "y")
    with pytest.raises(ValueError, match="traced no shared-memory accesses to 'tile'"):
        pictures.shared_banks(axpb_run, "tile")
    with pytest.raises(ValueError, match="not a lab"):
        pictures.trace("lab", "axpb")


def test_the_checker_fails_two_legend_entries_of_one_colour():
    fig, ((ax,),) = plots.figure(plots.MIN_WIDTH_IN, 4)
    ax.plot([0, 1], [0, 1], color=canvas.BLUE, label="first")
    ax.plot([0, 1], [1, 0], color=canvas.BLUE, label="second")
    ax.legend()
    assert plots.colour_problems(fig) == ["'second' and 'first' share the colour #0072b2 in one legend"]
    plots.plt.close(fig)


def test_the_readability_check_sees_small_text_and_a_two_line_title_off_the_canvas():
    """Small text, and a title of two lines that leaves the canvas (matplotlib draws each line of a
    longer text without naming it; plots.drawn_texts finds it all the same)."""
    fig, ((ax,),) = plots.figure(plots.MIN_WIDTH_IN, 4)
    fig.suptitle("a title far too long to fit on a canvas of twelve inches, even at a modest size of font\n"
                 "and its second line", fontsize=24)
    ax.set_title("small", fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    assert canvas.small_texts(fig) == ["'small' at 10.0 pt", "'a title far too long to fit on a canvas ' leaves the canvas"]
    plots.plt.close(fig)
