"""Lab 09: where the time goes: coalescing, arithmetic intensity, the roofline, reading a profile.

What you will learn
- Why neighbouring threads should touch neighbouring bytes: a warp's load is served in 32-byte
  sectors, 4 per request when 32 lanes read 32 consecutive float32, up to 32 when they stride.
- A kernel's arithmetic intensity (FLOP per byte moved) and which ceiling bounds it: DRAM
  bandwidth, the FP32 FMA peak, or the launch floor at small sizes.
- How to place a kernel on the roofline from measured counts and read its distance to the roof,
  with DRAM bytes from Nsight Compute, not the bytes the code requests.
- How a transpose goes through a padded shared-memory tile so that both its reads and its
  writes are coalesced.
- Why coalescing is not enough to reach the ceiling: the instructions a kernel issues per element
  (signed indices, a division per element) and, with several elements per thread, the loads it
  keeps in flight (the given tuned kernels, `scale_rows_wide` and `transpose_wide`, measured
  beside yours).

Exercises (each stub says `Lab 09.M`):
  09.1  intensity(flops, nbytes)                      FLOP per byte
  09.2  time_model(flops, nbytes, ceilings)           seconds each ceiling allows: memory, compute, launch
  09.3  bound(flops, nbytes, ceilings)                "memory" | "compute" | "launch": the slowest
  09.4  roofline_point(flops, dram_bytes, seconds, ceilings) -> RooflinePoint
  09.5  profile_point(row, seconds, ceilings)         the same from a Nsight Compute profile row
  09.6  scale_rows_kernel       coalesced rewrite of scale_rows_strided_kernel; 1 read of x,
                                1 read of scale, 1 write of out per element
  09.7  transpose_kernel        out = x.T through a (32, 33) shared tile; 1 read, 1 write per element

Ceilings are a dict, as the bench records store them (measured in the same run):
    {"copy_gbps": GB/s, read + write bytes, "fp32_fma_tflops": TFLOP/s, "launch_floor_ms": ms}

Tolerances: the numbers of 09.1, 09.2, 09.4 and 09.5 within 1e-9 relative (math.isclose) of
the formulas below, in float64, where another order of the same operations moves only the last
few of 16 digits; scale_rows
within 1e-6 relative (norm of the difference over the norm of the float64 reference), since one
float32 product rounds by at most 6e-8; transpose exactly (a copy rounds nothing).

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

import typing

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
import kernellab.lab  # noqa: F401
import numpy as np
from numba import cuda, float32, uint64

DEFAULT_BLOCK = 128
TILE = 32              # the transpose tile is TILE x TILE elements...
BLOCK_ROWS = 8         # ...copied by a block of (TILE, BLOCK_ROWS) threads, TILE // BLOCK_ROWS rows each
PADDED = TILE + 1      # the shared tile's row length: a shape must be a constant where it is used


# --- 09.1 - 09.3: intensity and the bound ---------------------------------------------------------

def intensity(flops, nbytes):
    """Arithmetic intensity in FLOP per byte; ValueError for flops < 0 or nbytes <= 0."""
    # FILL ME IN (roughly 3 lines): reject flops < 0 or nbytes <= 0 with ValueError, then divide.
    raise NotImplementedError("Lab 09.1: intensity")


def time_model(flops, nbytes, ceilings):
    """The least time each ceiling allows, in seconds: {"memory", "compute", "launch"}.

    memory: nbytes at copy_gbps (GB/s = 1e9 B/s); compute: flops at fp32_fma_tflops
    (1e12 FLOP/s); launch: launch_floor_ms (1e-3 s), the cost of a launch that does nothing.
    No input check is asked for: the tests pass flops > 0 and nbytes > 0 only, so checks like
    intensity's (a ValueError) are fine too.
    """
    # FILL ME IN (roughly 3 lines): one dict, every time in seconds (mind the units).
    raise NotImplementedError("Lab 09.2: time_model")


def bound(flops, nbytes, ceilings):
    """Which ceiling bounds the kernel: the key of time_model's largest time. On an exact tie
    any of the tied keys is right (the tests draw no ties)."""
    # FILL ME IN (roughly 2 lines): the slowest ceiling is the one that bounds the kernel.
    raise NotImplementedError("Lab 09.3: bound")


# --- 09.4 - 09.5: the roofline point --------------------------------------------------------------

class RooflinePoint(typing.NamedTuple):
    intensity: float     # FLOP per DRAM byte
    attained: float      # FLOP/s, from the measured time
    roof: float          # FLOP/s the roofline allows at that intensity
    pct_of_roof: float   # 100 * attained / roof (not clamped: above 100 is a measurement problem)


def roofline_point(flops, dram_bytes, seconds, ceilings):
    """A kernel on the roofline: intensity = flops / dram_bytes, attained = flops / seconds,
    roof = min(FP32 FMA peak, intensity * copy bandwidth), both in FLOP/s, and
    pct_of_roof = 100 * attained / roof. ValueError for seconds <= 0. The tests pass flops > 0
    and dram_bytes > 0 only: with a zero there is no point on a log-log roofline, and what
    yours does then (intensity's ValueError, a ZeroDivisionError) is not graded."""
    # FILL ME IN (roughly 6 lines): ValueError for seconds <= 0; intensity from the DRAM bytes;
    # attained and roof in FLOP/s; return RooflinePoint(intensity, attained, roof, pct_of_roof).
    raise NotImplementedError("Lab 09.4: roofline_point")


def profile_point(row, seconds, ceilings):
    """roofline_point of a profile row (PROFILE_FORMAT): its flops over its DRAM bytes, read +
    write; `seconds` is the bench timing (ncu's gpu_time_ns is measured under the profiler)."""
    # FILL ME IN (roughly 2 lines): which of the row's byte counts did the DRAM really move?
    raise NotImplementedError("Lab 09.5: profile_point")


# --- 09.6: coalescing ----------------------------------------------------------------------------

@cuda.jit
def scale_rows_strided_kernel(x, scale, out):
    """Given: out[r, c] = x[r, c] * scale[r], with neighbouring threads on neighbouring ROWS."""
    i = cuda.grid(1)
    rows, cols = out.shape
    if i < rows * cols:
        row = i % rows       # lanes i and i + 1 are a whole row (cols * 4 bytes) apart:
        col = i // rows      # a warp's 32 loads land in up to 32 different 32-byte sectors
        out[row, col] = x[row, col] * scale[row]


@cuda.jit
def scale_rows_kernel(x, scale, out):
    # FILL ME IN (roughly 5 lines): the same result and the same 1D launch as
    # scale_rows_strided_kernel (the launcher's: one thread per element), but lanes i and i + 1
    # take neighbouring columns of one row. A grid-stride loop over i passes too: under that
    # launch it runs once per thread.
    # Budget: per element 1 read of x, 1 read of scale, 1 write of out; the tests count them
    # and the sectors per request of your loads and stores.
    raise NotImplementedError("Lab 09.6: scale_rows_kernel")


def _scale_rows_launch(kernel, x, scale, out, block):
    if out is None:
        out = cuda.device_array_like(x)
    kernel[(x.size + block - 1) // block, block](x, scale, out)   # one thread per element
    return out


def scale_rows_strided(x, scale, out=None, block=DEFAULT_BLOCK):
    """out = x * scale[:, None] with the strided kernel (given)."""
    return _scale_rows_launch(scale_rows_strided_kernel, x, scale, out, block)


def scale_rows(x, scale, out=None, block=DEFAULT_BLOCK):
    """out = x * scale[:, None] with your coalesced kernel: the same 1D launch shape."""
    return _scale_rows_launch(scale_rows_kernel, x, scale, out, block)


@cuda.jit
def copy4_consecutive_kernel(x, out):
    """Given: each thread copies 4 consecutive elements, the pattern of a float4 vector load.

    Numba issues them as 4 scalar loads (`cuda.compile_ptx` shows four ld.global.f32): it cannot
    prove 16-byte alignment. Each load request then has lanes 16 bytes apart: 16 sectors per
    request, and each sector is requested 4 times (L1 serves the repeats; DRAM reads it once).
    """
    first = 4 * cuda.grid(1)
    for k in range(4):
        if first + k < out.size:
            out[first + k] = x[first + k]


def copy4_consecutive(x, out=None, block=DEFAULT_BLOCK):
    """out = x (1D) with copy4_consecutive_kernel, one thread per 4 elements (given)."""
    if out is None:
        out = cuda.device_array_like(x)
    copy4_consecutive_kernel[(x.size + 4 * block - 1) // (4 * block), block](x, out)
    return out


# --- 09.7: transpose through shared memory --------------------------------------------------------

@cuda.jit
def transpose_naive_kernel(x, out):
    """Given: out[c, r] = x[r, c]; the reads are coalesced, the writes stride by a whole row of out."""
    c, r = cuda.grid(2)
    if r < x.shape[0] and c < x.shape[1]:
        out[c, r] = x[r, c]


@cuda.jit
def transpose_kernel(x, out):
    # 09.7: out[c, r] = x[r, c] through a padded (TILE, PADDED) shared tile, one block of
    # (TILE, BLOCK_ROWS) threads per TILE x TILE tile (transpose_grid). Contract: reads and writes
    # both coalesced, no shared-memory bank conflict (the tests count both), any rows and cols.
    # Budget: 1 global read and 1 global write per element, about 14 lines. Hint 09.7 in
    # notebook 09.
    raise NotImplementedError("Lab 09.7: transpose_kernel")


def transpose_grid(x):
    """(blocks along x's columns, blocks along x's rows): one block per TILE x TILE tile."""
    rows, cols = x.shape
    return (cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE


def transpose(x, out=None):
    """out = x.T with transpose_kernel: grid transpose_grid(x), block (TILE, BLOCK_ROWS)."""
    if out is None:
        out = cuda.device_array((x.shape[1], x.shape[0]), dtype=x.dtype)
    transpose_kernel[transpose_grid(x), (TILE, BLOCK_ROWS)](x, out)
    return out


def transpose_naive(x, out=None, block=(32, 8)):
    """out = x.T with the given naive kernel, one thread per element."""
    if out is None:
        out = cuda.device_array((x.shape[1], x.shape[0]), dtype=x.dtype)
    rows, cols = x.shape
    transpose_naive_kernel[((cols + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1]),
                           block](x, out)
    return out


# --- given: the tuned versions, and what closed the gap to the ceiling -------------------------------
# Measured on the H200 at 8192 x 8192 (data/reference/h200/lab09.json; notebook 09 prints it): the
# coalesced scale_rows issues as many instructions as the strided one, its SM busier than its DRAM.
# Two things close the gap:
# - Index arithmetic. A signed index carries a check for negative indices (Python's wrap-around) on
#   every access; an unsigned one (uint64) does not. Integer division (row = i // cols) is dozens of
#   instructions; a 2-D grid gives the row for free.
# - Loads in flight, once a thread handles several elements. The compiler cannot tell `x` from `out`
#   (they might overlap), so it never moves a load above an earlier store: a loop of load, store,
#   load, store keeps one load in flight per thread. Loading all of a thread's elements first keeps
#   WIDE of them in flight.

WIDE = 4                       # elements per thread of the tuned scale_rows, a block apart
WIDE_BLOCK = 256               # its threads per block: a block covers WIDE * WIDE_BLOCK columns of a row
WIDE_TILE = 64                 # the tuned transpose's tile: 64 x 64, padded...
WIDE_TILE_ROWS = 4             # ...copied by (64, 4) threads, 16 elements each
WIDE_PADDED = WIDE_TILE + 1    # its shared row length (a shape must be a constant where it is used)


@cuda.jit
def scale_rows_wide_kernel(x, scale, out):
    """Given: out[r, c] = x[r, c] * scale[r]; grid (column segments, rows), each thread WIDE
    columns a block apart (each warp's loads still 128 consecutive bytes), all its loads before
    any store, indices unsigned. Per element: 1 read of x, 1 write; scale once per thread."""
    rows, cols = out.shape
    row = cuda.blockIdx.y
    first = cuda.blockIdx.x * (WIDE * WIDE_BLOCK) + cuda.threadIdx.x
    values = cuda.local.array(WIDE, float32)          # constant indices: kept in registers
    for k in range(WIDE):                             # WIDE loads in flight...
        col = first + k * WIDE_BLOCK
        values[k] = x[uint64(row), uint64(col)] if col < cols else float32(0)
    factor = scale[uint64(row)]
    for k in range(WIDE):                             # ...then WIDE stores
        col = first + k * WIDE_BLOCK
        if col < cols:
            out[uint64(row), uint64(col)] = values[k] * factor


def scale_rows_wide(x, scale, out=None):
    """out = x * scale[:, None] with the tuned kernel (given)."""
    if out is None:
        out = cuda.device_array_like(x)
    rows, cols = x.shape
    segments = (cols + WIDE * WIDE_BLOCK - 1) // (WIDE * WIDE_BLOCK)
    scale_rows_wide_kernel[(segments, rows), WIDE_BLOCK](x, scale, out)   # rows <= 65,535 (grid y)
    return out


@cuda.jit
def transpose_wide_kernel(x, out):
    """Given: out = x.T through a padded 64 x 64 shared tile, block (64, 4): each thread loads
    its 16 elements before the barrier and stores 16 after, indices unsigned."""
    tile = cuda.shared.array((WIDE_TILE, WIDE_PADDED), float32)
    rows, cols = x.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    first_row, first_col = cuda.blockIdx.y * WIDE_TILE, cuda.blockIdx.x * WIDE_TILE
    for k in range(0, WIDE_TILE, WIDE_TILE_ROWS):
        r, c = first_row + ty + k, first_col + tx
        if r < rows and c < cols:
            tile[uint64(ty + k), uint64(tx)] = x[uint64(r), uint64(c)]
    cuda.syncthreads()
    for k in range(0, WIDE_TILE, WIDE_TILE_ROWS):
        r, c = first_col + ty + k, first_row + tx     # out's row = x's column
        if c < rows and r < cols:
            out[uint64(r), uint64(c)] = tile[uint64(tx), uint64(ty + k)]


def transpose_wide(x, out=None):
    """out = x.T with the tuned kernel (given)."""
    if out is None:
        out = cuda.device_array((x.shape[1], x.shape[0]), dtype=x.dtype)
    rows, cols = x.shape
    grid = ((cols + WIDE_TILE - 1) // WIDE_TILE, (rows + WIDE_TILE - 1) // WIDE_TILE)
    transpose_wide_kernel[grid, (WIDE_TILE, WIDE_TILE_ROWS)](x, out)
    return out


# --- the float64 references (given): the graded tests, the experiment and the notebook use these ---

def scale_rows_reference(x, scale):
    """out[r, c] = x[r, c] * scale[r], in float64."""
    return np.asarray(x, dtype=np.float64) * np.asarray(scale, dtype=np.float64)[:, None]


def copy_reference(x):
    """out = x, in float64."""
    return np.array(x, dtype=np.float64)


def transpose_reference(x):
    """out = x.T, in float64."""
    return np.asarray(x, dtype=np.float64).T


# Argument types for compiling the kernels without launching them (`kernellab occupancy`).
SIGNATURES = {
    "scale_rows_strided_kernel": "void(float32[:, ::1], float32[::1], float32[:, ::1])",
    "scale_rows_kernel": "void(float32[:, ::1], float32[::1], float32[:, ::1])",
    "copy4_consecutive_kernel": "void(float32[::1], float32[::1])",
    "transpose_naive_kernel": "void(float32[:, ::1], float32[:, ::1])",
    "transpose_kernel": "void(float32[:, ::1], float32[:, ::1])",
    "scale_rows_wide_kernel": "void(float32[:, ::1], float32[::1], float32[:, ::1])",
    "transpose_wide_kernel": "void(float32[:, ::1], float32[:, ::1])",
}

# The access patterns of the lab, each with the reason it exists; the experiment, the tour and
# the notebook read this table.
VARIANTS = {
    "scale_rows_strided": (scale_rows_strided, "neighbouring threads on neighbouring rows: strided"),
    "scale_rows": (scale_rows, "neighbouring threads on neighbouring columns: coalesced"),
    "copy4_consecutive": (copy4_consecutive, "4 consecutive elements per thread, as 4 scalar 4-byte loads"),
    "transpose_naive": (transpose_naive, "coalesced reads, strided writes"),
    "transpose": (transpose, "both coalesced, through a padded shared tile"),
    "scale_rows_wide": (scale_rows_wide, f"tuned: {WIDE} columns per thread, all loads before any store, "
                                         "unsigned indices, no division"),
    "transpose_wide": (transpose_wide, f"tuned: a {WIDE_TILE} x {WIDE_TILE} padded tile, 16 elements per "
                                       "thread, unsigned indices"),
}
