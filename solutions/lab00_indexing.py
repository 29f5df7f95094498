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
    past 2**53)."""
    if n < 0 or block <= 0:
        raise ValueError(f"need n >= 0 and block > 0, got n={n}, block={block}")
    return (n + block - 1) // block


# --- 00.2 / 00.3: one thread per element -------------------------------------------------------

@cuda.jit
def axpb_kernel(x, a, b, out):
    i = cuda.grid(1)          # like blockIdx.x * blockDim.x + threadIdx.x in CUDA C
    if i < out.size:          # the guard: the last block has threads past the end
        out[i] = a * x[i] + b  # 1 read (x[i]), 1 write (out[i])
    # per thread: 1 global read + 1 global write = 8 bytes for float32


def axpb(x, a, b, out=None, block=DEFAULT_BLOCK):
    """out = a * x + b, one thread per element, in blocks of `block` threads.

    Contract: x is a device array; `out=None` allocates the output on the device; returns out
    (on the device). Budget: exactly one launch of axpb_kernel."""
    if out is None:
        out = cuda.device_array_like(x)           # the output lives on the device
    grid = blocks_for(x.size, block)              # enough blocks to cover every element
    axpb_kernel[grid, block](x, a, b, out)        # block: a multiple of the 32-thread warp
    return out


# --- 00.4: 2D indexing ---------------------------------------------------------------------------

@cuda.jit
def add_row_bias_kernel(x, bias, out):
    col, row = cuda.grid(2)   # x runs along columns: neighbouring threads touch neighbouring bytes
    if row < out.shape[0] and col < out.shape[1]:  # guard both dimensions
        out[row, col] = x[row, col] + bias[col]    # 2 reads (x, bias), 1 write
    # per thread: 2 global reads + 1 global write


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
    start = cuda.grid(1)
    stride = cuda.gridsize(1)                  # threads in the whole grid
    for i in range(start, out.size, stride):  # each thread walks the array in grid-size steps
        out[i] = a * x[i] + b                  # 1 read, 1 write per element
    # per element: still 1 read + 1 write; per thread: ceil(n / gridsize) of each


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
