"""Lab 03: horizontal fusion.

What you will learn
- Why many small independent kernels are slow: each launch costs the host microseconds to
  submit, and a small kernel leaves most of the GPU idle while it runs.
- How to merge independent elementwise tasks on different arrays into one launch: the grid is
  the concatenation of each task's blocks, and each block picks its task from its block index
  with a table of prefix sums (where each task's blocks start).
- How to predict the time of separate and merged launches from two numbers measured on the
  device (the cost of a launch, the copy bandwidth), and where fusing stops paying.

The four tasks (independent: different arrays, sizes and ops), written into one flat output:
  scale   y0 = alpha * x0
  add     y1 = x1 + z1
  relu    y2 = max(x2, 0)
  square  y3 = x3 * x3
out = [y0 | y1 | y2 | y3]; `split_output(out, sizes)` gives the four views.

Exercises (each stub says `Lab 03.M`):
  03.1  task_block_starts(sizes, block)  where each task's blocks start: prefix sums of
                                         ceil(size / block), with the total at the end
  03.2  horizontal_kernel                each block finds its task and does that task's part
                                         budget: every input element read once, every output
                                         element written once, across the whole grid
  03.3  horizontal_tasks                 the launcher: the tables, the grid, one launch
  03.4  predicted_time_us(...)           a launch-or-bandwidth model of one call's time

Convention: inputs are float32 device arrays; every launcher takes `out=None` (allocates) and
returns the output. The kernels write into the one flat `out` at each task's offset
(`task_output_starts`): a launcher never slices `out` into views, because each device-array
slice is a new array object built in Python on every call (the lab's benchmark measures what
that costs, on its own).

Tolerance: each task's output within a relative error of 1e-6 of reference_tasks (float64; the
norm of the difference over the norm of the reference), merged against separate 1e-6: each
element is one float32 operation, rounded to under 6e-8. task_block_starts and the ledger
exactly; predicted_time_us within 1e-6 relative (pytest.approx).

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import Ledger
from numba import cuda
import functools
import itertools

import numpy as np


DEFAULT_BLOCK = 128
WIDE_BLOCK = 256             # the variants in larger blocks: a 1-element-per-thread block of 128
                             # retires fast, so the rate at which SMs start blocks can bound it
TASKS = ("scale", "add", "relu", "square")
ZERO = np.float32(0.0)       # float32: max(v, 0.0), or a sum started at 0.0, is float64


def blocks_for(n, block):
    return (n + block - 1) // block


def task_sizes_of(x0, x1, z1, x2, x3):
    """The four tasks' element counts (and a clear error when the add's operands differ)."""
    if x1.shape != z1.shape:
        raise ValueError(f"add needs x1 and z1 of one shape, got {x1.shape} and {z1.shape}")
    return tuple(int(a.size) for a in (x0, x1, x2, x3))


def task_output_starts(sizes):
    """Where each task's output starts in the flat `out`: (0, n0, n0 + n1, n0 + n1 + n2)."""
    return tuple(itertools.accumulate(sizes[:-1], initial=0))


def split_output(out, sizes):
    """The four tasks' outputs as consecutive views of one flat array, for reading results.

    Each view is a new array object built in Python, so the launchers pass `out` whole, with
    each task's offset, instead.
    """
    _check_output(out, sizes)
    return tuple(out[start:start + size] for start, size in zip(task_output_starts(sizes), sizes))


def _check_output(out, sizes):
    if out.size != sum(sizes):
        raise ValueError(f"out has {out.size} elements, the tasks need {sum(sizes)}")


def reference_tasks(x0, x1, z1, x2, x3, alpha):
    """The four results in float64, concatenated as `out` holds them."""
    x0, x1, z1, x2, x3 = (np.asarray(a, dtype=np.float64) for a in (x0, x1, z1, x2, x3))
    return np.concatenate([alpha * x0, x1 + z1, np.maximum(x2, 0.0), x3 * x3])


def tasks_ledger(sizes, fused):
    """The bytes both versions move: each input read once, each output written once."""
    n0, n1, n2, n3 = sizes
    name = "horizontal" if fused else "separate"
    def op(task):
        return "horizontal" if fused else task
    return (Ledger(name)
            .add(op("scale"), "x0", reads=n0).add(op("scale"), "out", writes=n0)
            .add(op("add"), "x1", reads=n1).add(op("add"), "z1", reads=n1)
            .add(op("add"), "out", writes=n1)
            .add(op("relu"), "x2", reads=n2).add(op("relu"), "out", writes=n2)
            .add(op("square"), "x3", reads=n3).add(op("square"), "out", writes=n3))


def _prepare(x0, x1, z1, x2, x3, alpha, out):
    """The task sizes, alpha as float32 (a Python float would make the kernel compute in
    float64), the output (allocated when None) and where each task's output starts in it."""
    sizes = task_sizes_of(x0, x1, z1, x2, x3)
    if out is None:
        out = cuda.device_array(sum(sizes), dtype=np.float32)
    _check_output(out, sizes)
    return sizes, np.float32(alpha), out, task_output_starts(sizes)


# --- given: one launch per task ------------------------------------------------------------------
# Each kernel writes its task's elements into `out` from `start` on.

@cuda.jit
def scale_kernel(alpha, x, out, start):
    i = cuda.grid(1)
    if i < x.size:
        out[start + i] = alpha * x[i]    # 1 read, 1 write


@cuda.jit
def add_kernel(x, z, out, start):
    i = cuda.grid(1)
    if i < x.size:
        out[start + i] = x[i] + z[i]     # 2 reads, 1 write


@cuda.jit
def relu_kernel(x, out, start):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]                         # 1 read
        out[start + i] = v if v > ZERO else ZERO  # 1 write


@cuda.jit
def square_kernel(x, out, start):
    i = cuda.grid(1)
    if i < x.size:
        v = x[i]                         # 1 read: the meter counts each x[i] evaluated (x[i] * x[i]
        #   is two there; on a GPU the compiler merges them into one ld.global.f32)
        out[start + i] = v * v           # 1 write
# Summed: each input element read once, each output element written once; 4 launches.


def task_kernels(x0, x1, z1, x2, x3, alpha):
    """Each task's kernel and its inputs, in task order (the output and its start come last)."""
    return ((scale_kernel, (alpha, x0)), (add_kernel, (x1, z1)), (relu_kernel, (x2,)),
            (square_kernel, (x3,)))


def separate_tasks(x0, x1, z1, x2, x3, alpha=2.0, out=None, block=DEFAULT_BLOCK):
    """Four launches, one per task: four launch costs, four small grids."""
    sizes, alpha, out, out_starts = _prepare(x0, x1, z1, x2, x3, alpha, out)
    kernels = task_kernels(x0, x1, z1, x2, x3, alpha)
    for size, start, (kernel, inputs) in zip(sizes, out_starts, kernels):
        if size:                                       # an empty task needs no launch (grid 0 is invalid)
            kernel[blocks_for(size, block), block](*inputs, out, start)  # one thread per element
    return out


# --- 03.1: the block table -----------------------------------------------------------------------

def task_block_starts(sizes, block):
    """[0, b0, b0 + b1, ..., total]: task t owns blocks starts[t] .. starts[t + 1] - 1."""
    if block <= 0 or any(size < 0 for size in sizes):
        raise ValueError(f"need block > 0 and sizes >= 0, got block={block}, sizes={list(sizes)}")
    blocks = [blocks_for(int(size), block) for size in sizes]
    return np.concatenate([[0], np.cumsum(blocks)]).astype(np.int64)


# --- 03.2: one kernel, four tasks ----------------------------------------------------------------

@cuda.jit
def horizontal_kernel(block_starts, out_starts, alpha, x0, x1, z1, x2, x3, out):
    block = cuda.blockIdx.x
    if block < block_starts[1]:                      # task 0 owns blocks [0, block_starts[1])
        i = block * cuda.blockDim.x + cuda.threadIdx.x
        if i < x0.size:
            out[out_starts[0] + i] = alpha * x0[i]   # 1 read, 1 write
    elif block < block_starts[2]:                    # task 1 owns [block_starts[1], block_starts[2])
        i = (block - block_starts[1]) * cuda.blockDim.x + cuda.threadIdx.x
        if i < x1.size:
            out[out_starts[1] + i] = x1[i] + z1[i]   # 2 reads, 1 write
    elif block < block_starts[3]:
        i = (block - block_starts[2]) * cuda.blockDim.x + cuda.threadIdx.x
        if i < x2.size:
            v = x2[i]                                # 1 read
            out[out_starts[2] + i] = v if v > ZERO else ZERO  # 1 write
    else:
        i = (block - block_starts[3]) * cuda.blockDim.x + cuda.threadIdx.x
        if i < x3.size:
            v = x3[i]                                # 1 read
            out[out_starts[3] + i] = v * v           # 1 write
    # every block takes one branch: one task's part; the branch is uniform across the block,
    # so no warp diverges. Summed: the same bytes as the four launches, in one launch.


# --- 03.3: the launcher --------------------------------------------------------------------------

def horizontal_tasks(x0, x1, z1, x2, x3, alpha=2.0, out=None, block=DEFAULT_BLOCK):
    """One launch for the four tasks: the grid is their blocks laid end to end.

    The tables travel as tuples of Python ints, inside the launch's own arguments (no copy to
    the device), and the kernel writes into `out` at each task's offset (no slices).
    """
    sizes, alpha, out, out_starts = _prepare(x0, x1, z1, x2, x3, alpha, out)
    block_starts = tuple(int(s) for s in task_block_starts(sizes, block))
    grid = block_starts[-1]                    # every task's blocks, end to end
    if grid:                                   # nothing to do for four empty tasks
        horizontal_kernel[grid, block](block_starts, out_starts, alpha, x0, x1, z1, x2, x3, out)
    return out


# --- 03.4: a model of one call's time ------------------------------------------------------------

def predicted_time_us(launches, nbytes, launch_us, gbps):
    """One call's time if the host's launches and the GPU's memory traffic overlap.

    The GPU runs a kernel while the host submits the next one, so whichever is slower sets the
    pace: `launches` submissions of `launch_us` each, or `nbytes` at `gbps` GB/s.
    """
    return max(launches * launch_us, nbytes / (gbps * 1e3))


# The versions of the four tasks, each with the reason it exists; the tour and the benchmark read this.
# A variant in blocks of 256 is its launcher with that block (a call that passes `block` overrides it).
VARIANTS = {
    "separate": (separate_tasks, "one launch per task: 4 launch costs, 4 small grids"),
    "horizontal": (horizontal_tasks, "one launch; each block picks its task from its block index"),
    "separate_block256": (functools.partial(separate_tasks, block=WIDE_BLOCK),
                          "the four launches in blocks of 256: half as many blocks to start, an SM "
                          "full with 8 of them instead of 16"),
    "horizontal_block256": (functools.partial(horizontal_tasks, block=WIDE_BLOCK),
                            "the one launch in blocks of 256: the same kernel, half as many blocks, "
                            "each twice as large"),
}


# --- Solution side: the merged kernel, four elements per thread (not in the starter, where it would
# answer 03.2) -------------------------------------------------------------------------------------
# One element per thread in blocks of 128 makes a block that retires after one load and one store;
# with four, a quarter of the blocks start, and each thread has four loads in flight before its
# first store (Lab 02's given 4-per-thread kernel does the same for one task).

ELEMENTS_PER_THREAD = 4
SOLUTION_SIDE = ("ELEMENTS_PER_THREAD", "SOLUTION_SIDE", "task_value", "horizontal_4_per_thread_kernel",
                 "horizontal_4_per_thread_tasks", "SOLUTION_VARIANTS")   # the names the starter lacks


@cuda.jit(device=True, inline="always")
def task_value(task, alpha, v, w):
    """Task `task`'s op on one element: v its input, w the add's second operand (else unused)."""
    if task == 0:
        return alpha * v
    if task == 1:
        return v + w
    if task == 2:
        return v if v > ZERO else ZERO
    return v * v


@cuda.jit
def horizontal_4_per_thread_kernel(block_starts, out_starts, alpha, x0, x1, z1, x2, x3, out):
    block = cuda.blockIdx.x
    task = 3                                         # the block's task, as in horizontal_kernel
    if block < block_starts[1]:
        task = 0
    elif block < block_starts[2]:
        task = 1
    elif block < block_starts[3]:
        task = 2
    x = (x0, x1, x2, x3)[task]
    step = cuda.blockDim.x                           # a block owns 4 x step elements of its task:
    i = (block - block_starts[task]) * ELEMENTS_PER_THREAD * step + cuda.threadIdx.x
    start = out_starts[task]                         # i, i + step, ...: each warp's accesses coalesced
    if i + 3 * step < x.size:                        # the common case: every load before any store
        v0, v1, v2, v3 = x[i], x[i + step], x[i + 2 * step], x[i + 3 * step]
        w0, w1, w2, w3 = v0, v1, v2, v3
        if task == 1:                                # only the add reads a second input
            w0, w1, w2, w3 = z1[i], z1[i + step], z1[i + 2 * step], z1[i + 3 * step]
        out[start + i] = task_value(task, alpha, v0, w0)
        out[start + i + step] = task_value(task, alpha, v1, w1)
        out[start + i + 2 * step] = task_value(task, alpha, v2, w2)
        out[start + i + 3 * step] = task_value(task, alpha, v3, w3)
    else:                                            # the task's ragged end
        for k in range(ELEMENTS_PER_THREAD):
            j = i + k * step
            if j < x.size:
                v = x[j]
                out[start + j] = task_value(task, alpha, v, z1[j] if task == 1 else v)
    # per element: the same bytes as horizontal_kernel; per thread, 4 (the add: 8) loads in flight


def horizontal_4_per_thread_tasks(x0, x1, z1, x2, x3, alpha=2.0, out=None, block=DEFAULT_BLOCK):
    """One launch, each thread four elements of its task: a quarter of the blocks of
    `horizontal_tasks`, each block's table entry counting blocks of 4 x `block` elements."""
    sizes, alpha, out, out_starts = _prepare(x0, x1, z1, x2, x3, alpha, out)
    block_starts = tuple(int(s) for s in task_block_starts(sizes, ELEMENTS_PER_THREAD * block))
    grid = block_starts[-1]
    if grid:
        horizontal_4_per_thread_kernel[grid, block](block_starts, out_starts, alpha, x0, x1, z1, x2, x3, out)
    return out


# The solution side's versions, beside VARIANTS (the benchmarks time both tables).
SOLUTION_VARIANTS = {
    "horizontal_4_per_thread": (horizontal_4_per_thread_tasks,
                                "one launch, 4 elements per thread: a quarter of the blocks, 4 loads "
                                "in flight per thread before its first store"),
}


# Argument types for compiling the kernels without launching them (`kernellab occupancy`,
# the resources-vs-driver check).
SIGNATURES = {
    "scale_kernel": "void(float32, float32[::1], float32[::1], int64)",
    "add_kernel": "void(float32[::1], float32[::1], float32[::1], int64)",
    "relu_kernel": "void(float32[::1], float32[::1], int64)",
    "square_kernel": "void(float32[::1], float32[::1], int64)",
    "horizontal_kernel": "void(UniTuple(int64, 5), UniTuple(int64, 4), float32, float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])",
}
