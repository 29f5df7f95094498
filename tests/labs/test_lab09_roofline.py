"""Graded checks for Lab 09: coalescing, arithmetic intensity and the roofline.

The pure-Python parts are checked against the formulas their docstrings state, on ceilings and
kernels drawn fresh each run (seed printed), with cases each classic bug cannot pass: a unit
left unconverted, a bound read from intensity alone, the requested bytes taken for DRAM bytes.
The kernels run on awkward non-square sizes into poisoned outputs; the traffic meter counts their
memory budget and, on the same kind of launch, the sectors of each warp request (coalescing) and
the wavefronts of each shared-memory access (bank conflicts).
"""

import math

import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect_coalesced, expect_conflict_free
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
def test_intensity(lab, rng):
    """intensity is FLOP per byte, 0 for no FLOPs, and rejects bad input."""
    for _ in range(5):
        flops, nbytes = float(rng.uniform(1, 1e12)), int(rng.integers(1, 10**10))
        close(lab.intensity(flops, nbytes), flops / nbytes, f"intensity({flops}, {nbytes})")
    assert lab.intensity(0, 4096) == 0
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


def assert_point(got, want, what):
    assert len(got) == 4, f"{what}: return (intensity, attained, roof, pct_of_roof), got {got!r}"
    for name, g, w in zip(("intensity", "attained", "roof", "pct_of_roof"), got, want):
        close(g, w, f"{what}: {name}")


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

def scale_case(lab, rng, rows_range=(5, 12)):
    rows = int(rng.integers(*rows_range))
    cols = checks.awkward_size(rng, 32, 1, 2)
    x, scale = checks.nonzero(rng, (rows, cols)), checks.nonzero(rng, rows)
    return x, scale, lab.scale_rows_reference(x, scale)


@pytest.mark.points(2)
def test_scale_rows_matches_numpy(lab, rng):
    """out[r, c] = x[r, c] * scale[r] on non-square awkward matrices, in one launch."""
    for rows_range in ((5, 12), (33, 40)):
        x, scale, ref = scale_case(lab, rng, rows_range)
        out = checks.poisoned(x.shape)
        with record_launches() as launches:
            lab.scale_rows(cuda.to_device(x), cuda.to_device(scale), out=out)
        checks.assert_launched(launches, "scale_rows_kernel", count=1)
        checks.assert_matches(out, ref, rtol=1e-6, what=f"scale_rows on {x.shape}")


@simulator_only
@pytest.mark.points(1)
def test_scale_rows_memory_budget(lab, rng):
    """Budget: per element 1 read of x, 1 read of scale, 1 write of out."""
    x, scale, _ = scale_case(lab, rng)
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
    x, scale, _ = scale_case(lab, rng, (33, 40))
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
def test_transpose_matches_numpy(lab, rng):
    """out = x.T on wide and tall awkward matrices, one launch (stress mode: blocks and threads
    in shuffled order, shared memory poisoned)."""
    for x in transpose_cases(rng):
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

