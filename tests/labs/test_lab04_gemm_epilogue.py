"""Graded checks for Lab 04: GEMM with a fused epilogue.

Matrices are tiny and awkward (no side a multiple of the tile, K not a multiple of the tile step),
outputs are poisoned before each launch, and every check asserts which kernel did the work.
Tile sizes are small so the simulator stays quick; the code is the same at any tile size.
"""

import numpy as np
import pytest
from hypothesis import strategies

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect, expect_coalesced, expect_only
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, integers, one_of, sizes
from kernellab.grading.tape import meter, record_launches
from kernellab.gpu.traffic import Ledger

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child
TILE = 8
ALONG_ROWS = ("thread (ty, tx) copies a[row, k0 + tx] and b[k0 + ty, col]: lanes (tx) walk along a "
              "row of A and of B, and write along a row of C")


def gemm_case(lab, rng, tile=TILE, k_steps=(2, 3)):
    """(a, b, a @ b in float64) with K over 2-3 tile steps and M, N spanning 2 and 3 tiles in a random
    order (so a grid with x and y swapped is caught), none a multiple."""
    sides = [int(rng.integers(tile + 1, 2 * tile)), int(rng.integers(2 * tile + 1, 3 * tile))]
    m, n = (sides[0], sides[1]) if rng.random() < 0.5 else (sides[1], sides[0])
    k = checks.awkward_size(rng, tile, *k_steps) if tile >= 2 else int(rng.integers(2, 9))
    a = checks.nonzero(rng, (m, k))
    b = checks.nonzero(rng, (k, n))
    return a, b, lab.matmul_reference(a, b)


def gemm_shapes():
    """(tile, m, n, k) within the contract: tiles from 1 to 17 (above TILE; MAX_TILE itself costs a
    1024-thread block, so test_tiled_matmul_any_tile_and_short_k tries it once), M and N up to two
    tiles (one for tiles of 1 or 17: the simulator's cost grows with the blocks and threads), K up
    to three tile steps; awkward sizes, 1, exact multiples of the tile and one either side."""
    def shapes(tile):
        side = 2 * tile if 1 < tile <= 8 else tile
        return strategies.tuples(strategies.just(tile), sizes(block=tile, most=side),
                                 sizes(block=tile, most=side), sizes(block=tile, most=3 * tile))
    return one_of(8, 5, 3, 17, 1).flatmap(shapes)


def keep_mask(rng, shape):
    """A keep-mask with about 30% zeros (dropped) and every other value 1 to 255 (kept: nonzero = keep)."""
    kept = rng.integers(1, 256, size=shape)
    return np.where(rng.random(shape) < 0.3, 0, kept).astype(np.uint8)


def epilogue_case(lab, rng, tile=TILE, shape=None, p=0.3):
    if shape is None:
        a, b, product = gemm_case(lab, rng, tile)
    else:
        m, n, k = shape
        a, b = checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n))
    m, n = a.shape[0], b.shape[1]
    bias = checks.nonzero(rng, n)
    mask = keep_mask(rng, (m, n))
    expected = lab.linear_relu_dropout_reference(a, b, bias, mask, p)
    return a, b, bias, mask, p, expected


def to_device(*arrays):
    return [cuda.to_device(x) for x in arrays]


def blocks(n, tile):
    return -(-n // tile)


@simulator_only   # on a GPU too: unwritten shared memory and races show here only
@pytest.mark.points(2)
@drawn(examples=4, shape=gemm_shapes(),
       always=({"shape": (TILE, 13, 20, 19)},    # awkward everywhere, 2 x 3 blocks: x and y told apart
               {"shape": (5, 10, 5, 15)}))       # every side an exact multiple of the tile
def test_tiled_matmul_matches_numpy(lab, rng, shape):
    """04.1: the tiled kernel computes a @ b, one tile x tile block per tile of C (awkward sides, then
    sides the tile divides, then drawn: tiles from 1 to 17; awkward sizes, 1, exact multiples of the
    tile and one either side)."""
    tile, m, n, k = shape
    a, b = checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n))
    out = checks.poisoned((m, n))
    with record_launches() as launches:
        result = lab.matmul_tiled(*to_device(a, b), out=out, tile=tile)
    checks.assert_launched(launches, "matmul_tiled_kernel", count=1)
    assert launches[0].block == (tile, tile, 1), launches[0]
    assert launches[0].grid == (blocks(n, tile), blocks(m, tile), 1), launches[0]
    checks.assert_matches(result, lab.matmul_reference(a, b), rtol=1e-5, scale=np.abs(a) @ np.abs(b),
                          what=f"matmul_tiled, tile {tile}, {m}x{k} @ {k}x{n}")


@simulator_only   # on a GPU too: unwritten shared memory and races show here only
@pytest.mark.points(1)
def test_tiled_matmul_any_tile_and_short_k(lab, rng):
    """04.1: tiles at the limits, MAX_TILE (32: the shared tiles hold the largest) and 1; an odd tile
    (5) with K shorter than one tile; a 1 x 1 output whose K is one more than a tile; out allocated
    by the launcher."""
    largest = 32                                  # MAX_TILE
    for tile, m, n, k in ((largest, int(rng.integers(largest // 2, largest)), largest, largest + 1),
                          (1, 1, 2, 2),
                          (5, int(rng.integers(6, 10)), int(rng.integers(6, 10)), int(rng.integers(2, 5))),
                          (5, 1, 1, 6)):
        a, b = checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n))
        with record_launches() as launches:
            result = lab.matmul_tiled(*to_device(a, b), tile=tile)
        checks.assert_launched(launches, "matmul_tiled_kernel", count=1)
        checks.assert_matches(result, lab.matmul_reference(a, b), rtol=1e-5, scale=np.abs(a) @ np.abs(b),
                              what=f"matmul_tiled, tile {tile}, {m}x{k} @ {k}x{n}")


@simulator_only
@pytest.mark.points(2)
def test_tiled_matmul_memory_budget(lab, rng):
    """04.1: each element of A is loaded once per block column, of B once per block row; C written
    once; every load and store coalesced."""
    a, b, _ = gemm_case(lab, rng)
    (m, k), n = a.shape, b.shape[1]
    d_a, d_b = to_device(a, b)
    out = checks.poisoned((m, n))
    with meter(a=d_a, b=d_b, out=out, trace=("global",)) as traffic:
        lab.matmul_tiled(d_a, d_b, out=out, tile=TILE)
    expect(traffic, "a", elements=m * k, reads=blocks(n, TILE))   # once per block column
    expect(traffic, "b", elements=k * n, reads=blocks(m, TILE))   # once per block row
    expect(traffic, "out", elements=m * n, writes=1)
    expect_coalesced(traffic, hint=ALONG_ROWS)
    m, n, k = (TILE * int(rng.integers(2, 4)) for _ in range(3))   # rows on sectors, full warps
    d_a, d_b = to_device(checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n)))
    out = checks.poisoned((m, n))
    with meter(a=d_a, b=d_b, out=out, trace=("global",)) as traffic:
        lab.matmul_tiled(d_a, d_b, out=out, tile=TILE)
    expect_coalesced(traffic, hint=ALONG_ROWS, aligned=True)


@simulator_only   # on a GPU too: unwritten shared memory and races show here only
@pytest.mark.points(2)
@drawn(examples=4, shape=gemm_shapes(), p=one_of(0.3, 0.0, 0.75),
       always=({"shape": (TILE, 20, 13, 11), "p": 0.3},   # awkward everywhere, 260 mask values
               {"shape": (5, 10, 5, 15), "p": 0.3}))      # every side an exact multiple of the tile
def test_fused_epilogue_matches_numpy(lab, rng, shape, p):
    """04.2: dropout(relu(a @ b + bias)) from the tiled kernel, in one launch, a mask value kept
    wherever it is nonzero (1 to 255) (drawn: tiles, shapes and p)."""
    tile, *sides = shape
    a, b, bias, mask, p, expected = epilogue_case(lab, rng, shape=sides, p=p)
    out = checks.poisoned(expected.shape)
    with record_launches() as launches:
        result = lab.linear_relu_dropout_tiled(*to_device(a, b, bias, mask), p, out=out, tile=tile)
    checks.assert_launched(launches, "linear_relu_dropout_tiled_kernel", count=1)
    assert len(launches) == 1, f"the fused form is one kernel; saw {launches.names()}"
    checks.assert_matches(result, expected, rtol=1e-5,
                          what=f"linear_relu_dropout_tiled, tile {tile}, p {p}, {a.shape} @ {b.shape}")


@simulator_only
@pytest.mark.points(2)
def test_fused_epilogue_memory_budget(lab, rng):
    """04.2: the fused kernel reads bias and mask once per element, writes out once, never reads it;
    every load and store coalesced."""
    a, b, bias, mask, p, expected = epilogue_case(lab, rng)
    (m, k), n = a.shape, b.shape[1]
    arrays = dict(zip("a b bias mask".split(), to_device(a, b, bias, mask)))
    out = checks.poisoned((m, n))
    with meter(**arrays, out=out, trace=("global",)) as traffic:
        lab.linear_relu_dropout_tiled(*arrays.values(), p, out=out, tile=TILE)
    expect(traffic, "a", elements=m * k, reads=blocks(n, TILE))
    expect(traffic, "b", elements=k * n, reads=blocks(m, TILE))
    expect(traffic, "bias", elements=m * n, reads=1)            # once per element of out
    expect(traffic, "mask", elements=m * n, reads=1)
    expect(traffic, "out", elements=m * n, writes=1)
    expect_only(traffic, "a", "b", "bias", "mask", "out")
    expect_coalesced(traffic, hint=ALONG_ROWS)
    a, b, bias, mask, p, _ = epilogue_case(lab, rng, shape=[TILE * int(rng.integers(2, 4)) for _ in range(3)])
    arrays = dict(zip("a b bias mask".split(), to_device(a, b, bias, mask)))
    out = checks.poisoned((a.shape[0], b.shape[1]))
    with meter(**arrays, out=out, trace=("global",)) as traffic:   # rows of A, B, out on sectors
        lab.linear_relu_dropout_tiled(*arrays.values(), p, out=out, tile=TILE)
    expect_coalesced(traffic, "a", "b", "out", hint=ALONG_ROWS, aligned=True)


def true_ledger(m, n, k, fused, rows, cols):
    """What each form moves, written out element by element (the reference for 04.3)."""
    matmul_reads = {"a": m * k * blocks(n, cols), "b": k * n * blocks(m, rows)}
    ledger = Ledger("expected")
    for name, reads in matmul_reads.items():
        ledger.add("matmul", name, reads=reads)
    ledger.add("epilogue", "bias", reads=m * n).add("epilogue", "mask", reads=m * n, itemsize=1)
    if fused:
        return ledger.add("epilogue", "out", writes=m * n)
    return ledger.add("chain", "out", reads=3 * m * n, writes=4 * m * n)


@pytest.mark.points(1)
@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
@drawn(examples=20, m=integers(1, 5000), n=integers(1, 5000), k=integers(1, 5000),
       rows=one_of(16, 8, 128, 1, 64, 32, 5), cols=one_of(16, 32, 128, 1, 64, 8, 7))
def test_linear_ledger_is_right(lab, fused, m, n, k, rows, cols):
    """04.3: the ledger's bytes per array, a Ledger, for listed and drawn shapes and block tiles, and
    for the default block tile (TILE x TILE)."""
    default = lab.linear_ledger(m, n, k, fused=fused)
    assert default == true_ledger(m, n, k, fused, lab.TILE, lab.TILE), (
        f"linear_ledger({m}, {n}, {k}, fused={fused}) must count blocks of the default TILE x TILE")
    for m, n, k, rows, cols in [(13, 11, 19, 8, 8), (100, 300, 64, 16, 16), (4096, 4096, 4096, 128, 128),
                                (70, 50, 9, 64, 32), (m, n, k, rows, cols)]:
        got = lab.linear_ledger(m, n, k, fused=fused, block_rows=rows, block_cols=cols)
        want = true_ledger(m, n, k, fused, rows, cols)
        assert isinstance(got, Ledger), f"linear_ledger must return a kernellab.gpu.traffic.Ledger, got {got!r}"
        assert got == want, (f"{'fused' if fused else 'unfused'} {m}x{n}x{k}, block {rows}x{cols}:\n"
                             f"yours:\n{got.by_array().table()}\nexpected:\n{want.by_array().table()}")
    unfused = lab.linear_ledger(64, 32, 16, fused=False, block_rows=16, block_cols=16)
    fused_ledger = lab.linear_ledger(64, 32, 16, fused=True, block_rows=16, block_cols=16)
    assert unfused.total_bytes - fused_ledger.total_bytes == 6 * 64 * 32 * 4   # 3 reads + 3 writes of C


@simulator_only
@pytest.mark.points(1)
@pytest.mark.parametrize("fused", [False, True], ids=["unfused", "fused"])
def test_linear_ledger_agrees_with_the_meter(lab, rng, fused):
    """04.3: the ledger matches what the kernels really loaded and stored."""
    a, b, bias, mask, p, expected = epilogue_case(lab, rng)
    (m, k), n = a.shape, b.shape[1]
    arrays = dict(zip("a b bias mask".split(), to_device(a, b, bias, mask)))
    out = checks.poisoned((m, n))
    launcher = lab.linear_relu_dropout_tiled if fused else lab.linear_relu_dropout_unfused
    with meter(**arrays, out=out) as traffic:
        launcher(*arrays.values(), p, out=out, tile=TILE)
    lab.linear_ledger(m, n, k, fused=fused, block_rows=TILE, block_cols=TILE).check_against(traffic)
    checks.assert_matches(out, expected, rtol=1e-5, what=launcher.__name__)


# --- The given variants (not graded: worked examples, identical in both targets; their kernels are
# built for small tiles here, which the grader's GPU compile check cannot look up) ------------------

SMALL = {"register_tiled_2d": {"tiles": (8, 16, 8, 4, 4)}, "register_tiled": {"tiles": (16, 8, 8, 4, 4)},
         "double_buffered": {"tiles": (16, 8, 8, 4, 4)}, "double_buffered_capped": {"tiles": (16, 8, 8, 4, 4)},
         "tiled": {"tile": TILE}, "naive": {}}


@pytest.mark.parametrize("name", list(SMALL))
def test_matmul_variants_match_numpy(lab, rng, name):
    a, b, expected = gemm_case(lab, rng)
    launcher, _why = lab.VARIANTS[name]
    out = checks.poisoned(expected.shape)
    with record_launches() as launches:
        launcher(*to_device(a, b), out=out, **SMALL[name])
    assert len(launches) == 1, launches.names()
    checks.assert_matches(out, expected, rtol=1e-5, what=name)


def test_epilogue_in_the_register_tiled_kernel(lab, rng):
    """bias_relu_dropout also finishes the register-tiled kernel's accumulators (p = 0 keeps all)."""
    tiles = lab.GemmTiles(16, 8, 8, 4, 4)
    a, b, bias, mask, _, _ = epilogue_case(lab, rng)
    expected = lab.linear_relu_dropout_reference(a, b, bias, mask, 0.0)
    out = checks.poisoned(expected.shape)
    with record_launches() as launches:
        lab.linear_relu_dropout_register_tiled(*to_device(a, b, bias, mask), 0.0, out=out, tiles=tiles)
    checks.assert_launched(launches, "linear_relu_dropout_register_tiled_kernel", count=1)
    checks.assert_matches(out, expected, rtol=1e-5, what="linear_relu_dropout_register_tiled")


def test_double_buffered_epilogue_and_unfused_chain(lab, rng):
    a, b, bias, mask, p, expected = epilogue_case(lab, rng)
    tiles = lab.GemmTiles(16, 8, 8, 4, 4)
    for launcher, options, count in [
            (lab.linear_relu_dropout_register_tiled, {"tiles": tiles, "double_buffered": True}, 1),
            (lab.linear_relu_dropout_unfused, {"matmul": lab.matmul_register_tiled, "tiles": tiles}, 4)]:
        out = checks.poisoned(expected.shape)
        with record_launches() as launches:
            launcher(*to_device(a, b, bias, mask), p, out=out, **options)
        assert len(launches) == count, launches.names()
        checks.assert_matches(out, expected, rtol=1e-5, what=launcher.__name__)


# The steps toward cuBLAS (GemmSteps): each on shapes the tiles divide (the unchecked kernel runs) and
# on awkward ones (the launcher falls back to the checked kernel), single and double buffered, the
# matmul and the fused epilogue. Warp tiles need whole warps: 32 x 32 tiles of 4 x 4 are 64 threads.
STEP_CASES = {
    "interior": ((16, 8, 8, 4, 4), {"interior": True}),
    "vector_loads": ((16, 8, 8, 4, 4), {"interior": True, "vector_loads": True}),
    "unroll": ((16, 8, 8, 4, 4), {"interior": True, "vector_loads": True, "unroll": True}),
    "warp_rows": ((32, 32, 8, 4, 4), {"interior": True, "vector_loads": True, "unroll": True, "warp_rows": 4}),
    "bk16_warp_rows": ((32, 32, 16, 4, 4), {"interior": True, "vector_loads": True, "unroll": True,
                                            "warp_rows": 8}),
}


@pytest.mark.parametrize("double_buffered", [False, True], ids=["single", "double"])
@pytest.mark.parametrize("name", list(STEP_CASES))
def test_gemm_steps_match_numpy(lab, rng, name, double_buffered):
    tiles, on = STEP_CASES[name]
    tiles, steps = lab.GemmTiles(*tiles), lab.GemmSteps(**on)
    divided = (2 * tiles.bm, tiles.bn, 3 * tiles.bk)
    # Awkward: a second, partial row of tiles and a partial column tile (two blocks, as `divided`:
    # the simulator's cost grows with the threads, and a 32 x 32 warp tile's block has 64).
    awkward = (tiles.bm + int(rng.integers(1, tiles.bm)), tiles.bn - int(rng.integers(1, tiles.bn)),
               checks.awkward_size(rng, tiles.bk, 2, 3))
    for (m, n, k), interior in ((divided, True), (awkward, False)):
        a, b = checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n))
        bias, mask = checks.nonzero(rng, n), (rng.random((m, n)) >= 0.3).astype(np.uint8)
        d_a, d_b, d_bias, d_mask = to_device(a, b, bias, mask)
        out = checks.poisoned((m, n))
        assert lab.usable_steps(steps, tiles, d_a, d_b, out).interior == interior
        lab.matmul_register_tiled(d_a, d_b, out=out, tiles=tiles, steps=steps, double_buffered=double_buffered)
        checks.assert_matches(out, lab.matmul_reference(a, b), rtol=1e-5, what=f"{name} matmul {m}x{k}@{k}x{n}")
        out = checks.poisoned((m, n))
        with record_launches() as launches:
            lab.linear_relu_dropout_register_tiled(d_a, d_b, d_bias, d_mask, 0.3, out=out, tiles=tiles,
                                                   steps=steps, double_buffered=double_buffered)
        assert len(launches) == 1, launches.names()
        checks.assert_matches(out, lab.linear_relu_dropout_reference(a, b, bias, mask, 0.3), rtol=1e-5,
                              what=f"{name} fused {m}x{k}@{k}x{n}")


def test_gemm_steps_that_do_not_fit_are_a_clear_error(lab):
    square = cuda.to_device(np.ones((32, 32), np.float32))
    for tiles, on, says in (((16, 8, 8, 4, 4), {"vector_loads": True}, "needs interior"),
                            ((16, 8, 8, 4, 4), {"interior": True, "warp_rows": 4}, "must tile"),
                            ((16, 8, 2, 4, 4), {"interior": True, "unroll": True}, "multiple of 4")):
        with pytest.raises(ValueError, match=says):
            lab.matmul_register_tiled(square, square, tiles=tiles, steps=lab.GemmSteps(**on))


def test_bad_input_is_a_clear_error(lab):
    a, b = cuda.to_device(np.ones((4, 3), np.float32)), cuda.to_device(np.ones((5, 2), np.float32))
    with pytest.raises(ValueError, match="columns must equal"):
        lab.matmul_naive(a, b)
    square = cuda.to_device(np.ones((3, 3), np.float32))
    with pytest.raises(ValueError, match="tile"):
        lab.matmul_tiled(square, square, tile=33)
    with pytest.raises(ValueError, match="dropout probability"):
        lab.keep_scale(1.0)
    with pytest.raises(ValueError, match="tm and tn"):
        lab.matmul_register_tiled(a, cuda.to_device(np.ones((3, 2), np.float32)), tiles=(16, 16, 4, 3, 4))
    bias, mask = cuda.to_device(np.ones(2, np.float32)), cuda.to_device(np.ones((4, 2), np.float32))
    with pytest.raises(ValueError, match="uint8"):
        lab.linear_relu_dropout_tiled(a, cuda.to_device(np.ones((3, 2), np.float32)), bias, mask, 0.1)


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------
# "float32 in, float32 out" and "no float64 constant": the grader compiles every kernel a graded test
# launched for a real GPU and fails the test on float64 arithmetic (kernellab.grading.compile_check).

CONTRACT = [
    clause("bias_relu_dropout", "The finished element: relu(acc + bias), then dropout: 0 unless kept (keep != 0), "
           "scaled by 1/(1-p).", "test_fused_epilogue_matches_numpy", "test_linear_ledger_agrees_with_the_meter"),
    clause("bias_relu_dropout", "float32 in, float32 out", "test_fused_epilogue_matches_numpy"),
    clause("bias_relu_dropout", "no float64 constant (use ZERO).", "test_fused_epilogue_matches_numpy"),
    clause("tiled_dot", "a[row, :] @ b[:, col] through tile x tile shared tiles, tile = the (square) block's side, "
           "any from 1 to MAX_TILE.", "test_tiled_matmul_matches_numpy", "test_tiled_matmul_any_tile_and_short_k"),
    clause("tiled_dot", "Every thread of the block calls it, also those past the edge of C: they help load the "
           "tiles, and the barriers need them.", "test_tiled_matmul_matches_numpy",
           "test_fused_epilogue_matches_numpy"),
    clause("tiled_dot", "acc = sum over k of a[row, k] * b[k, col], through tile x tile tiles of A and B staged in "
           "shared memory;", "test_tiled_matmul_matches_numpy", "test_tiled_matmul_memory_budget"),
    clause("tiled_dot", "out-of-range elements count as ZERO", "test_tiled_matmul_matches_numpy",
           "test_tiled_matmul_any_tile_and_short_k"),
    clause("tiled_dot", "coalesced global loads (the tests count the sectors per request).",
           "test_tiled_matmul_memory_budget", "test_fused_epilogue_memory_budget"),
    clause("tiled_dot", "per step, 1 global read of A and 1 of B per thread: A is loaded ceil(N / tile) times in "
           "all.", "test_tiled_matmul_memory_budget", "test_fused_epilogue_memory_budget"),
    clause("linear_relu_dropout_tiled_kernel", "As matmul_tiled_kernel, with bias_relu_dropout(acc, bias[col], "
           "mask[row, col], scale) stored.", "test_fused_epilogue_matches_numpy",
           "test_linear_ledger_agrees_with_the_meter"),
    clause("linear_relu_dropout_tiled_kernel", "the matmul's reads, plus 1 read of bias and of mask and 1 write of "
           "out per element.", "test_fused_epilogue_memory_budget", "test_linear_ledger_agrees_with_the_meter"),
    clause("linear_ledger", "The bytes one form of out = dropout(relu(a @ b + bias)) moves, per op and array, for a "
           "matmul whose blocks compute block_rows x block_cols of C (arrays named a, b, bias, mask, out).",
           "test_linear_ledger_is_right", "test_linear_ledger_agrees_with_the_meter"),
    clause("linear_ledger", "a Ledger (kernellab.lab) of every op's reads and writes per array, in elements, for the "
           "fused or the unfused form (the notebook's section 3 says what each form moves).",
           "test_linear_ledger_is_right"),
]
