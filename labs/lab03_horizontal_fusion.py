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

Exercises (each stub says `Lab 03.M`; the notebook has a hint for each, collapsed):
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
    # FILL ME IN. Contract: ValueError for block <= 0 or a negative size; an np.int64 array of
    # len(sizes) + 1 entries, starting at 0; an empty task owns no block.
    raise NotImplementedError("Lab 03.1: task_block_starts")


# --- 03.2: one kernel, four tasks ----------------------------------------------------------------

@cuda.jit
def horizontal_kernel(block_starts, out_starts, alpha, x0, x1, z1, x2, x3, out):
    # FILL ME IN. Task t owns blocks [block_starts[t], block_starts[t + 1]) (task 3 owns the rest of
    # the grid) and writes its results to out[out_starts[t]:], one element per thread.
    # Budget: every input element read once, every output element written once, grid-wide.
    raise NotImplementedError("Lab 03.2: horizontal_kernel")


# --- 03.3: the launcher --------------------------------------------------------------------------

def horizontal_tasks(x0, x1, z1, x2, x3, alpha=2.0, out=None, block=DEFAULT_BLOCK):
    """One launch for the four tasks: the grid is their blocks laid end to end.

    The tables travel as tuples of Python ints, inside the launch's own arguments (no copy to
    the device), and the kernel writes into `out` at each task's offset (no slices).
    """
    sizes, alpha, out, out_starts = _prepare(x0, x1, z1, x2, x3, alpha, out)
    # FILL ME IN. One launch of horizontal_kernel, its tables passed as tuples of Python ints and
    # `out` whole (no slices); no launch when there is no block. Return out.
    raise NotImplementedError("Lab 03.3: horizontal_tasks")


# --- 03.4: a model of one call's time ------------------------------------------------------------

def predicted_time_us(launches, nbytes, launch_us, gbps):
    """One call's time if the host's launches and the GPU's memory traffic overlap.

    The GPU runs a kernel while the host submits the next one, so whichever is slower sets the
    pace: `launches` submissions of `launch_us` each, or `nbytes` at `gbps` GB/s.
    """
    # FILL ME IN: microseconds (1 GB/s moves 1e3 bytes per microsecond).
    raise NotImplementedError("Lab 03.4: predicted_time_us")


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


# Argument types for compiling the kernels without launching them (`kernellab occupancy`,
# the resources-vs-driver check).
SIGNATURES = {
    "scale_kernel": "void(float32, float32[::1], float32[::1], int64)",
    "add_kernel": "void(float32[::1], float32[::1], float32[::1], int64)",
    "relu_kernel": "void(float32[::1], float32[::1], int64)",
    "square_kernel": "void(float32[::1], float32[::1], int64)",
    "horizontal_kernel": "void(UniTuple(int64, 5), UniTuple(int64, 4), float32, float32[::1], float32[::1], float32[::1], float32[::1], float32[::1], float32[::1])",
}
