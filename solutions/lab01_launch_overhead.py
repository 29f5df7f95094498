"""Lab 01: launch overhead: what a kernel launch costs before any arithmetic happens.

The lesson: a Numba kernel launch costs the host far more time than a tiny kernel costs the GPU,
so small work runs fast only in fewer, larger launches (notebooks/01_launch_overhead.ipynb, which
prints the measured costs). A NumPy host array as a kernel argument is a trap: an implicit copy
each way, every launch. Lab 08 removes most of the launch cost with CUDA graphs.

Exercises (each stub says `Lab 01.M`), with each kernel's memory budget:
  01.1  bump_kernel, launch_chain      `count` launches of a one-thread kernel
                                       1 read + 1 write of counter[0] per launch
  01.2  sum8_kernel, sum8              out = a + b + ... + h: 9 array arguments
                                       8 global reads + 1 write per thread
  01.3  scale_rows_kernel, scale_rows  one 2D launch for a whole (rows, n) batch
                                       1 global read + 1 write per element
  01.4  per_launch_cost                least-squares slope and intercept of total time against count
  01.5  predicted_time_us,             the floor model: max(launch cost, bytes / bandwidth),
        crossover_size                 and the size where the two are equal

Given: reference_scale and reference_sum8, the specs in float64 NumPy (the tests check your
kernels against them).

Convention for every launcher in this course: inputs are device arrays, `out=None` allocates the
output on the device, and the launcher returns the output (still on the device).

Tolerance: sum8 and scale_rows pass within a relative error of 1e-6 of the float64 reference
(the norm of the difference over the norm of the reference): 7 float32 adds of positive inputs,
in any order, round to under 5e-7, one multiply to 6e-8. per_launch_cost within 1e-9 relative
of the least-squares fit (float64 on the host); predicted_time_us within 1e-6 relative
(pytest.approx); crossover_size (an int) and the counter exactly.

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import is_simulator
from numba import cuda

import numpy as np

DEFAULT_BLOCK = 128


# --- Given: the specs in float64 NumPy, which the tests, the benchmarks and the notebook check ---

def reference_scale(x, a):
    """a * x in float64: what scale, scale_rows and scale_rows_separately must compute."""
    return a * np.asarray(x, dtype=np.float64)


def reference_sum8(arrays):
    """The element-wise sum of the arrays in float64: what sum8 must compute."""
    return np.sum([np.asarray(a, dtype=np.float64) for a in arrays], axis=0)


# --- Given: kernels whose launch is all they cost ------------------------------------------------

@cuda.jit
def empty_kernel():
    pass                      # no arguments, no work: the bare cost of a launch


@cuda.jit
def arrays1_kernel(a):
    pass                      # each array argument is marshalled on the host at every launch


@cuda.jit
def arrays2_kernel(a, b):
    pass


@cuda.jit
def arrays4_kernel(a, b, c, d):
    pass


@cuda.jit
def arrays8_kernel(a, b, c, d, e, f, g, h):
    pass


# Number of array arguments -> a kernel that takes that many and does nothing with them.
ARGUMENT_KERNELS = {0: empty_kernel, 1: arrays1_kernel, 2: arrays2_kernel, 4: arrays4_kernel,
                    8: arrays8_kernel}


# --- 01.1: a chain of tiny kernels ---------------------------------------------------------------

@cuda.jit
def bump_kernel(counter):
    if cuda.grid(1) == 0:     # one thread does the work, however many are launched
        counter[0] += 1       # 1 read and 1 write of counter[0]


def launch_chain(counter, count, stream=0):
    """counter[0] += count, by `count` one-thread launches of bump_kernel; returns counter."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    for _ in range(count):
        bump_kernel[1, 1, stream](counter)   # one block of one thread: the launch is the cost
    return counter


# --- 01.2: a kernel with many arguments ----------------------------------------------------------

@cuda.jit
def sum8_kernel(a, b, c, d, e, f, g, h, out):
    i = cuda.grid(1)
    if i < out.size:          # the guard: the last block has threads past the end
        out[i] = a[i] + b[i] + c[i] + d[i] + e[i] + f[i] + g[i] + h[i]  # 8 reads, 1 write
    # per thread: 8 global reads + 1 global write = 36 bytes for float32


def sum8(arrays, out=None, block=DEFAULT_BLOCK):
    """out = the element-wise sum of 8 equally long device arrays, in one launch."""
    if len(arrays) != 8:
        raise ValueError(f"sum8 adds exactly 8 arrays, got {len(arrays)}")
    sizes = {a.size for a in arrays}
    if len(sizes) != 1:
        raise ValueError(f"sum8 needs arrays of one size, got sizes {sorted(sizes)}")
    if out is None:
        out = cuda.device_array_like(arrays[0])
    grid = (out.size + block - 1) // block        # one thread per element
    sum8_kernel[grid, block](*arrays, out)        # 9 array arguments: ~9x the marshalling of one
    return out


# --- 01.3: one launch per row, or one launch for all rows ----------------------------------------

@cuda.jit
def scale_kernel(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]     # 1 read, 1 write
    # per thread: 1 global read + 1 global write


def scale(x, a, out=None, block=DEFAULT_BLOCK):
    """out = a * x for a vector, one thread per element."""
    if out is None:
        out = cuda.device_array_like(x)
    scale_kernel[(x.size + block - 1) // block, block](x, a, out)   # grid covers every element
    return out


@cuda.jit
def scale_row_kernel(x, row, a, out):
    i = cuda.grid(1)          # the row is the offset, out.shape[1] its length: no slice needed
    if i < out.shape[1]:
        out[row, i] = a * x[row, i]     # 1 read, 1 write, in row `row` only


def scale_rows_separately(x, a, out=None, block=DEFAULT_BLOCK):
    """out = a * x for a (rows, n) batch, one launch per row: pays the launch cost `rows` times.

    Each launch gets the whole batch and its row number (the offset; the length is the batch's
    row length), not `x[row]`: slicing a device array builds a new array object in Python on
    every call, which costs host time at every launch (the notebook prints how much).
    """
    if out is None:
        out = cuda.device_array_like(x)
    grid = (x.shape[1] + block - 1) // block
    for row in range(x.shape[0]):
        scale_row_kernel[grid, block](x, row, a, out)   # the same launch path as one row's kernel
    return out


@cuda.jit
def scale_rows_kernel(x, a, out):
    col, row = cuda.grid(2)   # x runs along a row: neighbouring threads touch neighbouring bytes
    if row < out.shape[0] and col < out.shape[1]:   # guard both dimensions
        out[row, col] = a * x[row, col]             # 1 read, 1 write
    # per thread: 1 global read + 1 global write, the same bytes as the separate launches


def scale_rows(x, a, out=None, block=(DEFAULT_BLOCK, 1)):
    """out = a * x for a (rows, n) batch in one 2D launch: pays the launch cost once."""
    if out is None:
        out = cuda.device_array_like(x)
    rows, n = x.shape
    grid = ((n + block[0] - 1) // block[0], (rows + block[1] - 1) // block[1])  # columns, then rows
    scale_rows_kernel[grid, block](x, a, out)     # one launch, however many rows
    return out


# --- 01.4: the cost per launch, from a sweep -----------------------------------------------------

def per_launch_cost(counts, total_us):
    """(per_launch_us, fixed_us): the least-squares line total = fixed + per_launch * count."""
    counts = np.asarray(counts, dtype=np.float64)
    total_us = np.asarray(total_us, dtype=np.float64)
    if counts.shape != total_us.shape or counts.ndim != 1:
        raise ValueError(f"need two 1D sequences of one length, got shapes {counts.shape} "
                         f"and {total_us.shape}")
    if np.unique(counts).size < 2:
        raise ValueError("need at least two different counts to fit a line")
    dc = counts - counts.mean()
    slope = float(np.sum(dc * (total_us - total_us.mean())) / np.sum(dc * dc))
    return slope, float(total_us.mean() - slope * counts.mean())


# --- 01.5: the floor, and where merging launches stops paying ------------------------------------

def predicted_time_us(n, launch_us, bytes_per_element, bandwidth_gbps):
    """Time of one memory-bound launch over n elements: whichever is longer, launch or data.

    Works element-wise on NumPy arrays of n.
    """
    data_us = np.asarray(n, dtype=np.float64) * bytes_per_element / (bandwidth_gbps * 1e3)
    return np.maximum(launch_us, data_us)          # 1 GB/s moves 1e3 bytes per microsecond


def crossover_size(launch_us, bytes_per_element, bandwidth_gbps):
    """Elements at which moving the data takes as long as a launch (rounded up)."""
    if launch_us < 0 or bytes_per_element <= 0 or bandwidth_gbps <= 0:
        raise ValueError(f"need launch_us >= 0 and positive bytes and bandwidth, got {launch_us}, "
                         f"{bytes_per_element}, {bandwidth_gbps}")
    return int(np.ceil(launch_us * bandwidth_gbps * 1e3 / bytes_per_element))


# --- Given, the expert variant: a launch with prebuilt arguments ---------------------------------

def prebuilt_launcher(kernel, griddim, blockdim, *args):
    """A no-argument function that launches `kernel[griddim, blockdim](*args)` with less host work.

    A plain launch re-does at every call what this does once: find the launch configuration,
    type the arguments, pick the compiled overload, and marshal every argument into the kernel's
    parameter list (an array becomes meminfo, parent, size, itemsize, data pointer, shape and
    strides). What is left per call is cuda.core's `launch`, which calls cuLaunchKernelEx. It
    uses numba-cuda internals (`_prepare_args`, `_codelibrary`): an illustration, not an API.
    The arguments are frozen: for other arrays, build another launcher. In the simulator there
    is no launch path to trim, so it launches normally.
    """
    for position, arg in enumerate(args):
        if isinstance(arg, np.ndarray):
            raise ValueError(f"argument {position} is a NumPy host array: a prebuilt launch "
                             "cannot copy it each time; pass a device array (cuda.to_device)")
    if is_simulator():
        return lambda: kernel[griddim, blockdim](*args)
    from cuda.core import LaunchConfig, launch
    from numba.cuda.cudadrv.driver import _to_core_stream
    from numba.cuda.errors import normalize_kernel_dimensions

    compiled = kernel.compile(tuple(kernel.typeof_pyval(arg) for arg in args))
    params = []
    for argtype, arg in zip(compiled.argument_types, args):
        compiled._prepare_args(argtype, arg, 0, [], params)   # what every plain launch redoes
    grid, block = normalize_kernel_dimensions(griddim, blockdim)
    config = LaunchConfig(grid=grid, block=block)
    function = compiled._codelibrary.get_cufunc().kernel
    stream = _to_core_stream(0)
    return lambda: launch(stream, config, function, *params)


# The ways to scale a batch of rows, each with the reason it exists; the tour and the benchmark
# read this table.
VARIANTS = {
    "separate": (scale_rows_separately, "one launch per row: the launch cost paid rows times"),
    "merged": (scale_rows, "one 2D launch for the batch: the launch cost paid once"),
}


# Argument types for compiling the kernels without launching them (`kernellab occupancy`,
# the resources-vs-driver check).
SIGNATURES = {
    "empty_kernel": "void()",
    "arrays1_kernel": "void(float32[::1])",
    "arrays2_kernel": "void(float32[::1], float32[::1])",
    "arrays4_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1])",
    "arrays8_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])",
    "bump_kernel": "void(float32[::1])",
    "sum8_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])",
    "scale_kernel": "void(float32[::1], float32, float32[::1])",
    "scale_row_kernel": "void(float32[:, ::1], int64, float32, float32[:, ::1])",
    "scale_rows_kernel": "void(float32[:, ::1], float32, float32[:, ::1])",
}
