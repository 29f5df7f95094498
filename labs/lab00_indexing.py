"""Lab 00: thread indexing and launch configuration.

The lesson: how a launch's grid of threads covers the data, and how large the grid must be for a
memory-bound kernel to keep enough bytes in flight (notebooks/00_indexing.ipynb).

Exercises (each stub says `Lab 00.M`):
  00.1  blocks_for(n, block)          ceil(n / block) without floats
  00.2  axpb_kernel                   out[i] = a * x[i] + b        1 global read, 1 write per thread
  00.3  axpb                          the launcher: allocate, choose the grid, launch
  00.4  add_row_bias_kernel           out[r, c] = x[r, c] + bias[c] 2 global reads, 1 write per thread
  00.5  axpb_grid_stride_kernel       out[i] = a * x[i] + b for any grid: each thread loops

Given: reference_axpb and reference_add_row_bias, the specs in float64 NumPy (the tests check
your kernels against them).

Convention for every launcher in this course: inputs are device arrays, `out=None` allocates the
output on the device, and the launcher returns the output (still on the device). The caller passes
scalars as float32 (`np.float32(1.5)`), as the tests and the notebook do, and a launcher passes them
on as given: a Python float is a float64 argument, the launch then compiles a float64 kernel, and FP64 runs at 1:2 of FP32 on an H200 (1:64 on a GeForce RTX 4090).

Tolerance: a kernel's output passes within a relative error of 1e-6 of the float64 reference
(the norm of the difference over the norm of the reference): one float32 multiply and one add
round to under 1.2e-7 of |a x| + |b| for each element, and the tests draw |b| > |a x|, so that
no element is zero and b dominates the norm.
blocks_for is checked exactly.

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
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
    """The fewest blocks of `block` threads that give each of `n` elements a thread.

    Contract: ValueError for n < 0 or block <= 0; exact for every n (a float loses exactness
    past 2**53). Hint 00.1 in the notebook."""
    raise NotImplementedError("Lab 00.1: blocks_for")

# --- 00.2 / 00.3: one thread per element -------------------------------------------------------

@cuda.jit
def axpb_kernel(x, a, b, out):
    # out[i] = a * x[i] + b, where i is this thread's element; a thread whose i is past the end
    # of out touches nothing. Budget: 1 global read and 1 global write per element, neighbouring
    # threads on neighbouring elements (coalesced); the tests count both.
    raise NotImplementedError("Lab 00.2: axpb_kernel")


def axpb(x, a, b, out=None, block=DEFAULT_BLOCK):
    """out = a * x + b, one thread per element, in blocks of `block` threads.

    Contract: x is a device array; `out=None` allocates the output on the device; returns out
    (on the device). Budget: exactly one launch of axpb_kernel. Hint 00.3 in the notebook."""
    raise NotImplementedError("Lab 00.3: axpb")


# --- 00.4: 2D indexing ---------------------------------------------------------------------------

@cuda.jit
def add_row_bias_kernel(x, bias, out):
    # out[row, col] = x[row, col] + bias[col] for this thread's element; a thread outside the
    # matrix touches nothing. The launcher below runs a block's x dimension along the columns.
    # Budget: 2 global reads (x, bias) and 1 global write per element, a warp's threads on
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
    # out = a * x + b over every element, whatever the size of the grid (a grid-stride loop).
    # Budget: 1 read and 1 write per element, no more; at every step neighbouring threads on
    # neighbouring elements (coalesced: the tests count the sectors per warp request).
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
