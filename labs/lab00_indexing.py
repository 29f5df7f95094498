"""Lab 00: thread indexing and launch configuration.

What you will learn
- How a thread finds its element: `cuda.grid(1)` is `blockIdx.x * blockDim.x + threadIdx.x`.
- Why every kernel needs a bounds guard: n is rarely a multiple of the block size.
- 2D indexing (row, column) and the launch shape that covers a matrix.
- Grid-stride loops: one launch shape that covers any n.
- How to choose a grid, and whether the advice "grid = 2-4x the SM count" holds on a GPU.
- What the simulator is (a faithful interpreter of what each thread does) and is not (a clock).

Exercises (each stub says `Lab 00.M`):
  00.1  blocks_for(n, block)          ceil(n / block) without floats
  00.2  axpb_kernel                   out[i] = a * x[i] + b        1 global read, 1 write per thread
  00.3  axpb                          the launcher: allocate, choose the grid, launch
  00.4  add_row_bias_kernel           out[r, c] = x[r, c] + bias[c] 2 global reads, 1 write per thread
  00.5  axpb_grid_stride_kernel       out[i] = a * x[i] + b for any grid: each thread loops

Given: reference_axpb and reference_add_row_bias, the specs in float64 NumPy (the tests check
your kernels against them).

Convention for every launcher in this course: inputs are device arrays, `out=None` allocates the
output on the device, and the launcher returns the output (still on the device). Scalars are passed
as float32 (`np.float32(1.5)`): a Python float is a float64 argument, the launch then compiles a
float64 kernel, and FP64 runs at 1:2 of FP32 on an H200 (1:64 on a GeForce RTX 4090).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import device_facts
from numba import cuda

import numpy as np

DEFAULT_BLOCK = 128


# --- Given: the specs in float64 NumPy, which the tests, the benchmark and the notebook check ---

def reference_axpb(x, a, b):
    """a * x + b in float64: what every version of axpb must compute."""
    return a * np.asarray(x, dtype=np.float64) + b


def reference_add_row_bias(x, bias):
    """x[r, c] + bias[c] in float64 (NumPy broadcasts bias along the rows)."""
    return np.asarray(x, dtype=np.float64) + np.asarray(bias, dtype=np.float64)


# --- 00.1: grid arithmetic ---------------------------------------------------------------------

def blocks_for(n, block):
    """Blocks of `block` threads needed to give each of `n` elements a thread."""
    # FILL ME IN (roughly 3 lines): reject n < 0 or block <= 0 with ValueError, then round up
    # without floating point (floats lose exactness past 2**53 elements).
    raise NotImplementedError("Lab 00.1: blocks_for")

# --- 00.2 / 00.3: one thread per element -------------------------------------------------------

@cuda.jit
def axpb_kernel(x, a, b, out):
    # FILL ME IN (roughly 3 lines): this thread's index (cuda.grid), a bounds guard, and the
    # write. Budget: 1 global read and 1 global write per thread; the tests count them, and the
    # sectors per warp request: neighbouring threads on neighbouring elements (coalesced).
    raise NotImplementedError("Lab 00.2: axpb_kernel")


def axpb(x, a, b, out=None, block=DEFAULT_BLOCK):
    """out = a * x + b, one thread per element: ceil(n / block) blocks of `block` threads."""
    # FILL ME IN (roughly 5 lines): allocate `out` on the device when it is None
    # (cuda.device_array_like), compute the grid with blocks_for, launch
    # axpb_kernel[grid, block](...), and return out. Exactly one launch.
    raise NotImplementedError("Lab 00.3: axpb")


# --- 00.4: 2D indexing ---------------------------------------------------------------------------

@cuda.jit
def add_row_bias_kernel(x, bias, out):
    # FILL ME IN (roughly 3 lines): `col, row = cuda.grid(2)`, guard both dimensions, write.
    # Budget: 2 global reads (x, bias) and 1 global write per thread; neighbouring threads on
    # neighbouring columns (coalesced: the tests count the sectors per warp request).
    raise NotImplementedError("Lab 00.4: add_row_bias_kernel")


def add_row_bias(x, bias, out=None, block=(32, 4)):
    """out[r, c] = x[r, c] + bias[c]; block is (threads along columns, threads along rows)."""
    if out is None:
        out = cuda.device_array_like(x)
    rows, cols = x.shape
    grid = (blocks_for(cols, block[0]), blocks_for(rows, block[1]))  # cover columns, then rows
    add_row_bias_kernel[grid, block](x, bias, out)  # 32 along x: one warp reads one row segment
    return out


# --- 00.5: grid-stride loop ----------------------------------------------------------------------

@cuda.jit
def axpb_grid_stride_kernel(x, a, b, out):
    # FILL ME IN (roughly 4 lines): start at cuda.grid(1), step by cuda.gridsize(1), and cover
    # every element whatever the grid. Budget: 1 read and 1 write per element, no more; every
    # pass coalesced, neighbouring threads on neighbouring elements (the tests count the sectors
    # per warp request).
    raise NotImplementedError("Lab 00.5: axpb_grid_stride_kernel")


def axpb_grid_stride(x, a, b, out=None, blocks=None, block=DEFAULT_BLOCK):
    """out = a * x + b with a fixed grid (default: 4 blocks per SM, the article's advice)."""
    if out is None:
        out = cuda.device_array_like(x)
    if blocks is None:  # 4 blocks per SM (the article's advice), but never more than n needs
        blocks = min(4 * device_facts().sm_count, blocks_for(x.size, block))
    axpb_grid_stride_kernel[blocks, block](x, a, b, out)
    return out


# Argument types for compiling the kernels without launching them (`kernellab occupancy`).
SIGNATURES = {
    "axpb_kernel": "void(float32[::1], float32, float32, float32[::1])",
    "add_row_bias_kernel": "void(float32[:, ::1], float32[::1], float32[:, ::1])",
    "axpb_grid_stride_kernel": "void(float32[::1], float32, float32, float32[::1])",
}

# The versions of `out = a * x + b`, each with the reason it exists; the tour and the
# benchmark read this table.
VARIANTS = {
    "one_thread_per_element": (axpb, "the textbook launch: grid = ceil(n / block)"),
    "grid_stride": (axpb_grid_stride, "a fixed grid that loops: launch shape independent of n"),
}
