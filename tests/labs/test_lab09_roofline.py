"""Graded checks for Lab 09: coalescing, arithmetic intensity and the roofline.

The pure-Python parts are checked against the formulas their docstrings state, on ceilings and
kernels drawn fresh each run (seed printed), with cases each classic bug cannot pass: a unit
left unconverted, a bound read from intensity alone, the requested bytes taken for DRAM bytes.
The kernels' correctness tests draw their shapes and block sizes (Hypothesis, within the
contract: 1 row or column, exact multiples of the block or the tile, awkward sizes) and run into
poisoned outputs; the budget tests run on awkward non-square sizes, and the traffic meter counts their
memory budget and, on the same kind of launch, the sectors of each warp request (coalescing) and
the wavefronts of each shared-memory access (bank conflicts).
"""

import math

import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect_coalesced, expect_conflict_free
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, integers, one_of
from kernellab.grading.tape import kernel_resources, meter, record_launches

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child
H = {"copy_gbps": 4000.0, "fp32_fma_tflops": 60.0, "launch_floor_ms": 0.02}


def random_ceilings(rng):
    return {"copy_gbps": float(rng.uniform(500, 5000)), "fp32_fma_tflops": float(rng.uniform(10, 100)),
            "launch_floor_ms": float(rng.uniform(0.002, 0.05))}


def ceilings_with_ridge(rng, low, high):
    """Random ceilings whose ridge point (peak FLOP/s over bandwidth) lies in [low, high) FLOP/B."""
    ceilings = random_ceilings(rng)
    ceilings["fp32_fma_tflops"] = float(rng.uniform(low, high)) * ceilings["copy_gbps"] / 1e3
    return ceilings


def close(got, want, what):
    assert math.isclose(got, want, rel_tol=1e-9), f"{what}: got {got!r}, expected {want!r}"


# --- 09.1 - 09.3 ----------------------------------------------------------------------------------

@pytest.mark.points(1)
@drawn(examples=10, flops=integers(0, 10**13), nbytes=integers(1, 10**11))
def test_intensity(lab, rng, flops, nbytes):
    """intensity is FLOP per byte, a real number (drawn: integer counts, 0 FLOPs and 1 byte
    included), 0 for no FLOPs, and rejects bad input."""
    close(lab.intensity(flops, nbytes), flops / nbytes, f"intensity({flops}, {nbytes})")
    real = float(rng.uniform(1, 1e12))
    close(lab.intensity(real, 4096), real / 4096, f"intensity({real}, 4096)")
    close(lab.intensity(3, 2), 1.5, "intensity(3, 2), a real number")
    assert lab.intensity(0, 4096) == 0
    close(lab.intensity(7, 1), 7.0, "intensity(7, 1), 1 byte: the limit")
    for bad in ((1e6, 0), (1e6, -8), (-1.0, 64)):
        with pytest.raises(ValueError):
            lab.intensity(*bad)


@pytest.mark.points(2)
def test_time_model_in_seconds(lab, rng):
    """Each ceiling's time, in seconds: bytes at GB/s, FLOPs at TFLOP/s, the floor in ms."""
    for _ in range(5):
        ceilings = random_ceilings(rng)
        flops, nbytes = float(rng.uniform(1e6, 1e13)), int(rng.integers(10**3, 10**10))
        times = lab.time_model(flops, nbytes, ceilings)
        assert set(times) == {"memory", "compute", "launch"}, f"keys {sorted(times)}"
        close(times["memory"], nbytes / (ceilings["copy_gbps"] * 1e9), "memory time")
        close(times["compute"], flops / (ceilings["fp32_fma_tflops"] * 1e12), "compute time")
        close(times["launch"], ceilings["launch_floor_ms"] * 1e-3, "launch time")


def kernels_with_bound(rng, ceilings):
    """(flops, bytes, bound) cases: each regime, near the ridge on both sides, and small sizes
    whose intensity alone would say memory or compute."""
    bandwidth, peak = ceilings["copy_gbps"] * 1e9, ceilings["fp32_fma_tflops"] * 1e12
    floor = ceilings["launch_floor_ms"] * 1e-3
    cases = []
    for _ in range(3):
        big = floor * float(rng.uniform(20, 2000))            # well above the floor
        margin = float(rng.uniform(1.3, 3.0))
        cases.append((big * peak / margin, int(big * bandwidth), "memory"))           # near the ridge
        cases.append((big * peak, int(big * bandwidth / margin), "compute"))
        cases.append((big * peak / 1e3, int(big * bandwidth), "memory"))
        cases.append((big * peak, int(big * bandwidth / 1e3), "compute"))
        small = floor / float(rng.uniform(2, 20))              # below the floor
        cases.append((small * peak / 1e2, int(small * bandwidth), "launch"))          # memory-ish
        cases.append((small * peak, int(small * bandwidth / 1e2) + 1, "launch"))      # compute-ish
    return cases


@pytest.mark.points(2)
def test_bound_classifies(lab, rng):
    """bound names the slowest ceiling: memory, compute, or the launch floor at small sizes.

    The ridge points of the two machines are far apart (2-3 and 30-60 FLOP/B), so no fixed
    intensity threshold classifies both."""
    for ceilings in (ceilings_with_ridge(rng, 2, 3), ceilings_with_ridge(rng, 30, 60)):
        for flops, nbytes, want in kernels_with_bound(rng, ceilings):
            got = lab.bound(flops, nbytes, ceilings)
            assert got == want, (f"bound({flops:.3g} FLOP, {nbytes} B, {ceilings}) = {got!r}, "
                                 f"expected {want!r}")


# --- 09.4 - 09.5 ----------------------------------------------------------------------------------

def expected_point(flops, nbytes, seconds, ceilings):
    intensity = flops / nbytes
    roof = min(ceilings["fp32_fma_tflops"] * 1e12, intensity * ceilings["copy_gbps"] * 1e9)
    return intensity, flops / seconds, roof, 100 * flops / seconds / roof


POINT_FIELDS = ("intensity", "attained", "roof", "pct_of_roof")


def assert_point(got, want, what):
    """A RooflinePoint (its fields read by name, so a plain tuple fails) equal to the formulas."""
    missing = [name for name in POINT_FIELDS if not hasattr(got, name)]
    assert not missing, f"{what}: return RooflinePoint(intensity, attained, roof, pct_of_roof), got {got!r}"
    assert len(got) == 4, f"{what}: return RooflinePoint(intensity, attained, roof, pct_of_roof), got {got!r}"
    for name, w in zip(POINT_FIELDS, want):
        close(getattr(got, name), w, f"{what}: {name}")


@pytest.mark.points(2)
def test_roofline_point(lab, rng):
    """(intensity, attained FLOP/s, roof FLOP/s, % of roof) under both roofs, not clamped."""
    ceilings = random_ceilings(rng)
    ridge = ceilings["fp32_fma_tflops"] * 1e12 / (ceilings["copy_gbps"] * 1e9)
    for intensity in (ridge / float(rng.uniform(5, 50)), ridge * float(rng.uniform(5, 50))):
        nbytes = int(rng.integers(10**6, 10**10))
        flops = intensity * nbytes
        best = max(nbytes / (ceilings["copy_gbps"] * 1e9), flops / (ceilings["fp32_fma_tflops"] * 1e12))
        for seconds in (best * float(rng.uniform(1.1, 5)), best * 0.8):   # the second: above the roof
            assert_point(lab.roofline_point(flops, nbytes, seconds, ceilings),
                         expected_point(flops, nbytes, seconds, ceilings),
                         f"roofline_point({flops:.3g}, {nbytes}, {seconds:.3g})")
    flops, seconds = int(rng.integers(3, 1000)), float(rng.uniform(1.1, 2.9))   # a few FLOP/s: a real number
    assert_point(lab.roofline_point(flops, 4096, seconds, ceilings), expected_point(flops, 4096, seconds, ceilings),
                 f"roofline_point({flops}, 4096, {seconds!r}), attained a real number")
    for bad_seconds in (0.0, -1e-3):
        with pytest.raises(ValueError):
            lab.roofline_point(1e9, 1e6, bad_seconds, ceilings)


@pytest.mark.points(2)
def test_profile_point_uses_dram_bytes(lab, rng):
    """profile_point divides by the row's DRAM bytes (read + write), not its requested bytes,
    and uses the given seconds, not the profiler's gpu_time_ns."""
    ceilings = random_ceilings(rng)
    for _ in range(3):
        read, write = (int(v) for v in rng.integers(10**6, 10**9, size=2))
        seconds = float(rng.uniform(1e-4, 1e-2))
        row = {"benchmark": "b", "variant": "v", "size": 1, "kernel": "k",
               "dram_bytes_read": read, "dram_bytes_write": write,
               "requested_bytes": int((read + write) * rng.uniform(1.5, 3)),
               "flops": float(rng.uniform(1e8, 1e12)), "gpu_time_ns": seconds * 1e9 * 1.7,
               "l1_sectors_per_request": 4.0, "achieved_occupancy_pct": 80.0,
               "sm_throughput_pct": 30.0, "dram_throughput_pct": 70.0, "registers_per_thread": 24}
        assert_point(lab.profile_point(row, seconds, ceilings),
                     expected_point(row["flops"], read + write, seconds, ceilings), "profile_point")


# --- 09.6: coalescing ----------------------------------------------------------------------------

def scale_case(rng, rows_range=(5, 12)):
    """An awkward non-square matrix and its row scales, for the budget tests."""
    rows = int(rng.integers(*rows_range))
    cols = checks.awkward_size(rng, 32, 1, 2)
    return checks.nonzero(rng, (rows, cols)), checks.nonzero(rng, rows)


@pytest.mark.points(2)
@drawn(examples=4, rows=integers(1, 24), cols=integers(1, 40), block=one_of(128, 32, 64, 256),
       always=({"rows": 4, "cols": 64, "block": 32},    # an exact multiple of the block
               {"rows": 1, "cols": 37, "block": 64}))   # one row
def test_scale_rows_matches_numpy(lab, rng, rows, cols, block):
    """out[r, c] = x[r, c] * scale[r] in one launch of the launcher's shape, for any matrix and
    block size (drawn: 1 row or column, non-square, exact multiples of the block, blocks of 32 to 256)."""
    x, scale = checks.nonzero(rng, (rows, cols)), checks.nonzero(rng, rows)
    out = checks.poisoned(x.shape)
    with record_launches() as launches:
        lab.scale_rows(cuda.to_device(x), cuda.to_device(scale), out=out, block=block)
    checks.assert_launched(launches, "scale_rows_kernel", count=1)
    checks.assert_matches(out, lab.scale_rows_reference(x, scale), rtol=1e-6,
                          what=f"scale_rows on {x.shape} in blocks of {block}")


@simulator_only
@pytest.mark.points(1)
def test_scale_rows_memory_budget(lab, rng):
    """Budget: per element 1 read of x, 1 read of scale, 1 write of out."""
    x, scale = scale_case(rng)
    d_x, d_scale, out = cuda.to_device(x), cuda.to_device(scale), checks.poisoned(x.shape)
    with meter(x=d_x, scale=d_scale, out=out) as traffic:
        lab.scale_rows(d_x, d_scale, out=out)
    assert (traffic["x"].reads, traffic["scale"].reads) == (x.size, x.size), traffic.table()
    assert (traffic["out"].writes, traffic["out"].reads) == (x.size, 0), traffic.table()


@simulator_only
@pytest.mark.points(2)
def test_scale_rows_is_coalesced(lab, rng):
    """Neighbouring lanes touch neighbouring bytes: about 4 sectors per request for x and out, the
    ideal for 4-byte lanes (the strided kernel needs up to 32)."""
    x, scale = scale_case(rng, (33, 40))
    d_x, d_scale, out = cuda.to_device(x), cuda.to_device(scale), checks.poisoned(x.shape)
    with meter(x=d_x, scale=d_scale, out=out, trace=("global",)) as traffic:
        lab.scale_rows(d_x, d_scale, out=out)
    expect_coalesced(traffic, hint="row = i // cols, col = i % cols: lanes i and i + 1 on "
                                   "neighbouring columns of one row")


# --- 09.7: transpose through shared memory --------------------------------------------------------

def transpose_cases(rng):
    """One wide and one tall matrix, neither dimension a multiple of the tile."""
    def awkward(low, high):
        while True:
            n = int(rng.integers(low, high))
            if n % 32:
                return n
    return [checks.nonzero(rng, (awkward(8, 30), awkward(40, 90))),
            checks.nonzero(rng, (awkward(40, 70), awkward(8, 30)))]


@pytest.mark.points(3)
@drawn(examples=2, rows=integers(1, 70), cols=integers(1, 40),
       always=({"rows": 64, "cols": 32},    # exact multiples of the tile, two tiles along the rows
               {"rows": 1, "cols": 7}))     # one row
def test_transpose_matches_numpy(lab, rng, rows, cols):
    """out = x.T for any rows and cols, one launch (drawn: 1 row or column, exact multiples of the
    tile, wide, tall, several tiles each way; stress mode: blocks and threads in shuffled order,
    shared memory poisoned)."""
    x = checks.nonzero(rng, (rows, cols))
    out = checks.poisoned(x.shape[::-1])
    with record_launches() as launches:
        lab.transpose(cuda.to_device(x), out=out)
    checks.assert_launched(launches, "transpose_kernel", count=1)
    checks.assert_matches(out, lab.transpose_reference(x), rtol=0, what=f"transpose of {x.shape}")


@simulator_only
@pytest.mark.points(1)
def test_transpose_memory_budget(lab, rng):
    """Budget: 1 global read of x and 1 global write of out per element."""
    x = transpose_cases(rng)[0]
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape[::-1])
    with meter(x=d_x, out=out) as traffic:
        lab.transpose(d_x, out=out)
    assert (traffic["x"].reads, traffic["x"].writes) == (x.size, 0), traffic.table()
    assert (traffic["out"].writes, traffic["out"].reads) == (x.size, 0), traffic.table()


@simulator_only
@pytest.mark.points(2)
def test_transpose_is_coalesced_both_ways(lab, rng):
    """Reads of x and writes of out both take about 4 sectors per request (the naive one writes
    up to 32), and the shared tile is read and written without a bank conflict: the padding
    column puts a column's 32 values in 32 different banks."""
    x = transpose_cases(rng)[1]
    d_x, out = cuda.to_device(x), checks.poisoned(x.shape[::-1])
    with meter(x=d_x, out=out, trace=("global", "shared")) as traffic:
        lab.transpose(d_x, out=out)
    expect_coalesced(traffic, hint="stage the tile in shared memory and write rows of out, lanes "
                                   "(threadIdx.x) along a row")
    expect_conflict_free(traffic, hint="tile = cuda.shared.array((TILE, PADDED), float32): a row "
                                       "of TILE + 1 words shifts each row by one bank, so a column's "
                                       "values fall in different banks")


@pytest.mark.points(1)
def test_transpose_tile_is_padded(lab):
    """The kernel's shared memory is one (TILE, TILE + 1) float32 tile (ptxas, no GPU needed)."""
    used = kernel_resources(lab.transpose_kernel, lab.SIGNATURES["transpose_kernel"],
                                      cc=(9, 0)).static_shared_bytes
    want = lab.TILE * (lab.TILE + 1) * 4
    assert used == want, (f"transpose_kernel uses {used} bytes of shared memory; a (TILE, TILE + 1) "
                          f"float32 tile is {want}")



# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

CONTRACT = [
    clause("intensity", "Arithmetic intensity in FLOP per byte;", "test_intensity"),
    clause("intensity", "ValueError for flops < 0 or nbytes <= 0.", "test_intensity"),
    clause("intensity", "FILL ME IN (roughly 3 lines): reject flops < 0 or nbytes <= 0 with ValueError, then divide.",
           "test_intensity"),
    clause("time_model", "The least time each ceiling allows, in seconds: {\"memory\", \"compute\", \"launch\"}.",
           "test_time_model_in_seconds"),
    clause("time_model", "memory: nbytes at copy_gbps (GB/s = 1e9 B/s);", "test_time_model_in_seconds"),
    clause("time_model", "compute: flops at fp32_fma_tflops (1e12 FLOP/s);", "test_time_model_in_seconds"),
    clause("time_model", "launch: launch_floor_ms (1e-3 s), the cost of a launch that does nothing.",
           "test_time_model_in_seconds"),
    clause("time_model", "No input check is asked for: the tests pass flops > 0 and nbytes > 0 only, so checks like "
           "intensity's (a ValueError) are fine too.", "test_time_model_in_seconds"),
    clause("time_model", "FILL ME IN (roughly 3 lines): one dict, every time in seconds (mind the units).",
           "test_time_model_in_seconds"),
    clause("bound", "Which ceiling bounds the kernel: the key of time_model's largest time.", "test_bound_classifies"),
    clause("bound", "On an exact tie any of the tied keys is right (the tests draw no ties).", "test_bound_classifies"),
    clause("bound", "FILL ME IN (roughly 2 lines): the slowest ceiling is the one that bounds the kernel.",
           "test_bound_classifies"),
    clause("roofline_point", "A kernel on the roofline: intensity = flops / dram_bytes, attained = flops / seconds, "
           "roof = min(FP32 FMA peak, intensity * copy bandwidth), both in FLOP/s, and pct_of_roof = 100 * attained "
           "/ roof.", "test_roofline_point"),
    clause("roofline_point", "ValueError for seconds <= 0.", "test_roofline_point"),
    clause("roofline_point", "The tests pass flops > 0 and dram_bytes > 0 only: with a zero there is no point on a "
           "log-log roofline, and what yours does then (intensity's ValueError, a ZeroDivisionError) is not graded.",
           "test_roofline_point"),
    clause("roofline_point", "FILL ME IN (roughly 6 lines): ValueError for seconds <= 0;", "test_roofline_point"),
    clause("roofline_point", "intensity from the DRAM bytes;", "test_roofline_point"),
    clause("roofline_point", "attained and roof in FLOP/s;", "test_roofline_point"),
    clause("roofline_point", "return RooflinePoint(intensity, attained, roof, pct_of_roof).", "test_roofline_point",
           "test_profile_point_uses_dram_bytes"),
    clause("profile_point", "roofline_point of a profile row (PROFILE_FORMAT): its flops over its DRAM bytes, read "
           "+ write;", "test_profile_point_uses_dram_bytes"),
    clause("profile_point", "`seconds` is the bench timing (ncu's gpu_time_ns is measured under the profiler).",
           "test_profile_point_uses_dram_bytes"),
    clause("profile_point", "FILL ME IN (roughly 2 lines): which of the row's byte counts did the DRAM really move?",
           "test_profile_point_uses_dram_bytes"),
    clause("scale_rows_kernel", "FILL ME IN (roughly 5 lines): the same result and the same 1D launch as "
           "scale_rows_strided_kernel (the launcher's: one thread per element), but lanes i and i + 1 take "
           "neighbouring columns of one row.", "test_scale_rows_matches_numpy", "test_scale_rows_is_coalesced"),
    clause("scale_rows_kernel", "A grid-stride loop over i passes too: under that launch it runs once per thread.",
           "test_scale_rows_matches_numpy"),
    clause("scale_rows_kernel", "Budget: per element 1 read of x, 1 read of scale, 1 write of out;",
           "test_scale_rows_memory_budget"),
    clause("scale_rows_kernel", "the tests count them and the sectors per request of your loads and stores.",
           "test_scale_rows_memory_budget", "test_scale_rows_is_coalesced"),
    clause("transpose_kernel", "09.7: out[c, r] = x[r, c] through a padded (TILE, PADDED) shared tile, one block of "
           "(TILE, BLOCK_ROWS) threads per TILE x TILE tile (transpose_grid).", "test_transpose_matches_numpy",
           "test_transpose_tile_is_padded"),
    clause("transpose_kernel", "reads and writes both coalesced, no shared-memory bank conflict (the tests "
           "count both)", "test_transpose_is_coalesced_both_ways"),
    clause("transpose_kernel", "any rows and cols.", "test_transpose_matches_numpy"),
    clause("transpose_kernel", "1 global read and 1 global write per element", "test_transpose_memory_budget"),
]
