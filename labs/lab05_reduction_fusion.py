"""Lab 05: reduction fusion (row softmax and layernorm).

What you will learn
- Why reductions are where fusion saves the most bytes: a softmax written as three kernels
  (row max; exp-sum; normalize) reads the matrix three times; fused, it reads it once.
- One block per row: the block's threads share a row, combine their partial results through
  shared memory (a tree of `syncthreads` steps), and keep their part of the row in registers.
- The online algorithm: a running maximum and a running sum rescaled whenever the maximum
  grows, so max and sum take one pass instead of two, for rows of any length.
- The same three forms for layernorm (mean; variance; normalize), with Welford's running mean.
- What keeping a row in registers costs: registers per thread grow with the values each thread
  holds, and past a point they cut occupancy (see the experiments and the notebook).

Exercises (each stub says `Lab 05.M`; the notebook has a hint for 05.1 to 05.3, collapsed):
  05.1  softmax_fused_kernel (in fused_kernels)    one block per row, the row cached in registers
                                                   budget: 1 read of x and 1 write of out per element
  05.2  softmax_online_kernel                      running max and rescaled sum, one pass; then a
                                                   second pass normalizes
                                                   budget: 2 reads of x, 1 write of out per element
  05.3  layernorm_fused_kernel (in fused_kernels)  mean and variance from the cached row
                                                   budget: 1 read of x, gamma and beta, 1 write of
                                                   out per element
  05.4  softmax_ledger, layernorm_ledger           the bytes each form moves, per array

Convention: x is a (rows, cols) float32 device array, reduced along each row; gamma and beta are
(cols,). Every launcher takes device arrays, `out=None` (allocates) and returns the output. All
kernels here launch one block per row; block sizes are powers of two (the reductions halve them).
The tests draw finite inputs only: a row holding -inf (a masked entry) or NaN is not graded, so
an online recipe that turns exp(-inf - -inf) into NaN there is not marked down.

Tolerances (relative error: the norm of the difference over the norm of the float64 reference):
softmax 1e-5, since a float32 exp and a block sum of a few hundred terms come to about 1e-7;
layernorm 1e-4, on rows whose mean is as large as 300, where a float32 mean costs about 1e-5 and
E[x^2] - mean^2 costs 6e-4 or more. Ledgers exactly.

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import Ledger, is_simulator, jit
from numba import cuda, float32
import collections
import functools
import math

import numpy as np


ITEMS_PER_THREAD = 8     # values of its row each thread of the fused kernels holds, by default
MAX_ITEMS = 32           # the most any fused kernel is built for (compiled under the register cap of a 256-thread block)
MAX_BLOCK = 1024
SCRATCH = MAX_BLOCK      # floats of shared memory for a reduction: one per thread of the largest block
DEFAULT_EPS = 1e-5
ZERO = np.float32(0.0)   # float32 constants: max(v, 0.0), or a sum started at 0.0, is float64
ONE = np.float32(1.0)
NEG_INF = np.float32(-np.inf)


# --- Launch shape --------------------------------------------------------------------------------

def row_block(cols, block=None):
    """Threads per row: by default the smallest power of two from 32 to 1024 with at most
    ITEMS_PER_THREAD values of the row per thread (8192 columns: 1024 threads)."""
    if block is None:
        block = 32
        while block < MAX_BLOCK and block * ITEMS_PER_THREAD < cols:
            block *= 2
    if not (1 <= block <= MAX_BLOCK and block & (block - 1) == 0):
        raise ValueError(f"block must be a power of two from 1 to {MAX_BLOCK} (the reductions "
                         f"halve it), got {block}")
    return block


def check_rows(x, out=None):
    if len(x.shape) != 2 or x.dtype != np.float32:
        raise ValueError(f"x must be a float32 matrix (rows, cols), got {x.shape} {x.dtype}")
    if x.shape[1] == 0:
        raise ValueError("rows must have at least one column")
    if out is not None and tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"out has shape {tuple(out.shape)}, x has {tuple(x.shape)}")


def check_affine(x, gamma, beta):
    cols = x.shape[1]
    if tuple(gamma.shape) != (cols,) or tuple(beta.shape) != (cols,):
        raise ValueError(f"gamma and beta need one value per column, ({cols},); got "
                         f"{tuple(gamma.shape)} and {tuple(beta.shape)}")


# --- The float64 NumPy references every form is checked against (tests, experiments, notebook) ---

def softmax_reference(x):
    """softmax along each row of a host matrix, in float64."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layernorm_reference(x, gamma, beta, eps=DEFAULT_EPS):
    """layernorm along each row of a host matrix, in float64 (the variance about the mean)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=1, keepdims=True) + eps) * gamma + beta


# --- Given: block-wide reductions through shared memory ----------------------------------------------

@cuda.jit(device=True)
def tree_block_reduce(value, scratch, take_max):
    """max (take_max) or sum of `value` over the block, returned to every thread.

    A tree: each step, the lower half of the active threads combine their slot with one from the
    upper half; log2(block) steps, each ending in a barrier. Shared memory only, so it also runs
    in the simulator, which has no warp shuffles. Every thread of the block must call it.
    """
    tid = cuda.threadIdx.x
    scratch[tid] = value
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if tid < stride:
            other = scratch[tid + stride]
            scratch[tid] = max(scratch[tid], other) if take_max else scratch[tid] + other
        cuda.syncthreads()
        stride //= 2
    result = scratch[0]
    cuda.syncthreads()          # all have read the result before scratch is used again
    return result


@cuda.jit(device=True)
def warp_combine(value, take_max):
    """Combine the 32 values of a warp with register shuffles: 5 steps, no shared memory, no
    barrier (lane 0 ends with the result)."""
    offset = 16
    while offset > 0:
        other = cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
        value = max(value, other) if take_max else value + other
        offset //= 2
    return value


@cuda.jit(device=True)
def shuffle_block_reduce(value, scratch, take_max):
    """The same reduction on a GPU: each warp shuffles down to one value, warp 0 combines those.
    Three barriers whatever the block size, against the tree's log2(block) + 2."""
    if cuda.blockDim.x < 32:    # a partial warp cannot shuffle with a full mask
        return tree_block_reduce(value, scratch, take_max)
    lane = cuda.threadIdx.x % 32
    warp = cuda.threadIdx.x // 32
    value = warp_combine(value, take_max)
    if lane == 0:
        scratch[warp] = value   # one value per warp
    cuda.syncthreads()
    if warp == 0:
        identity = NEG_INF if take_max else ZERO
        value = warp_combine(scratch[lane] if lane < cuda.blockDim.x // 32 else identity, take_max)
        if lane == 0:
            scratch[0] = value
    cuda.syncthreads()
    result = scratch[0]
    cuda.syncthreads()          # all have read the result before scratch is used again
    return result


# The simulator has no warp shuffles: there the tree runs; on a GPU, the shuffles.
block_reduce = tree_block_reduce if is_simulator() else shuffle_block_reduce


@cuda.jit(device=True, inline="always")
def block_max(value, scratch):
    return block_reduce(value, scratch, True)


@cuda.jit(device=True, inline="always")
def block_sum(value, scratch):
    return block_reduce(value, scratch, False)


# --- Softmax, unfused: three kernels, three passes over x --------------------------------------------

@cuda.jit
def row_max_kernel(x, row_max):
    scratch = cuda.shared.array(SCRATCH, float32)
    row = cuda.blockIdx.x                                   # one block per row
    local = NEG_INF
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):  # a warp reads 32 neighbours
        local = max(local, x[row, col])                     # pass 1: 1 read of x per element
    result = block_max(local, scratch)
    if cuda.threadIdx.x == 0:
        row_max[row] = result                               # 1 write per row


@cuda.jit
def row_exp_sum_kernel(x, row_max, row_sum):
    scratch = cuda.shared.array(SCRATCH, float32)
    row = cuda.blockIdx.x
    top = row_max[row]                                      # 1 read per thread
    local = ZERO
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        local += math.exp(x[row, col] - top)                # pass 2: 1 read of x per element
    result = block_sum(local, scratch)
    if cuda.threadIdx.x == 0:
        row_sum[row] = result                               # 1 write per row


@cuda.jit
def softmax_normalize_kernel(x, row_max, row_sum, out):
    row = cuda.blockIdx.x
    top = row_max[row]                                      # 1 read per thread of each statistic
    inverse = ONE / row_sum[row]
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        out[row, col] = math.exp(x[row, col] - top) * inverse  # pass 3: 1 read, 1 write per element
    # in all: 3 reads of x and 1 write of out per element (16 bytes), plus a few per row


def row_statistics(x):
    """Two float32 arrays of one value per row: what the unfused forms keep between their kernels.

    Allocate them once and pass them to every call (`statistics=`), as a framework's caching
    allocator does, so that a benchmark times the kernels and not two allocations per call.
    """
    return tuple(cuda.device_array(x.shape[0], dtype=np.float32) for _ in range(2))


def softmax_unfused(x, out=None, block=None, statistics=None):
    """softmax along rows as three kernels (max; exp-sum; normalize), statistics in memory between.

    `statistics`: `row_statistics(x)`, made once; without it, each call allocates its own.
    """
    check_rows(x, out)
    rows, cols = x.shape
    out = cuda.device_array_like(x) if out is None else out
    block = row_block(cols, block)
    row_max, row_sum = statistics or row_statistics(x)
    row_max_kernel[rows, block](x, row_max)              # one block per row, each kernel
    row_exp_sum_kernel[rows, block](x, row_max, row_sum)
    softmax_normalize_kernel[rows, block](x, row_max, row_sum, out)
    return out


# --- 05.2: softmax online, one pass for max and sum ------------------------------------------------

@cuda.jit
def softmax_online_kernel(x, out):
    # Contract: out[row] = softmax(x[row]), one block per row; max and sum in one pass
    # over the row (a running max, the running sum rescaled when the max grows), then a second pass
    # writes out; coalesced loads (the tests count the sectors per request); float32 throughout.
    # Budget: 2 reads of x and 1 write of out per element.
    raise NotImplementedError("Lab 05.2: softmax_online_kernel")


def softmax_online(x, out=None, block=None):
    """softmax along rows in one kernel: one pass for max and sum, one to normalize; any row length."""
    check_rows(x, out)
    rows, cols = x.shape
    out = cuda.device_array_like(x) if out is None else out
    softmax_online_kernel[rows, row_block(cols, block)](x, out)  # one block per row
    return out


# --- Layernorm, unfused: mean; variance; normalize ------------------------------------------------------

@cuda.jit
def row_mean_kernel(x, mean):
    scratch = cuda.shared.array(SCRATCH, float32)
    row = cuda.blockIdx.x
    local = ZERO
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        local += x[row, col]                                # pass 1: 1 read per element
    result = block_sum(local, scratch) / float32(x.shape[1])
    if cuda.threadIdx.x == 0:
        mean[row] = result


@cuda.jit
def row_rstd_kernel(x, mean, eps, rstd):
    scratch = cuda.shared.array(SCRATCH, float32)
    row = cuda.blockIdx.x
    centre = mean[row]
    local = ZERO
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        deviation = x[row, col] - centre                    # pass 2: 1 read per element
        local += deviation * deviation
    variance = block_sum(local, scratch) / float32(x.shape[1])
    if cuda.threadIdx.x == 0:
        rstd[row] = ONE / math.sqrt(variance + eps)


@cuda.jit
def layernorm_normalize_kernel(x, mean, rstd, gamma, beta, out):
    row = cuda.blockIdx.x
    centre = mean[row]
    scale = rstd[row]
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        # pass 3: reads x, gamma, beta, writes out
        out[row, col] = (x[row, col] - centre) * scale * gamma[col] + beta[col]


def layernorm_unfused(x, gamma, beta, out=None, eps=DEFAULT_EPS, block=None, statistics=None):
    """layernorm along rows as three kernels (mean; rstd; normalize).

    `statistics`: `row_statistics(x)`, made once; without it, each call allocates its own.
    """
    check_rows(x, out)
    check_affine(x, gamma, beta)
    rows, cols = x.shape
    out = cuda.device_array_like(x) if out is None else out
    block = row_block(cols, block)
    mean, rstd = statistics or row_statistics(x)
    row_mean_kernel[rows, block](x, mean)                 # one block per row, each kernel
    row_rstd_kernel[rows, block](x, mean, np.float32(eps), rstd)
    layernorm_normalize_kernel[rows, block](x, mean, rstd, gamma, beta, out)
    return out


# --- Layernorm online: Welford's running mean, then one normalizing pass -----------------------------

@cuda.jit
def layernorm_online_kernel(x, gamma, beta, eps, out):
    scratch = cuda.shared.array(SCRATCH, float32)
    row = cuda.blockIdx.x
    cols = float32(x.shape[1])
    count = ZERO
    mean = ZERO
    m2 = ZERO                                               # sum of squared deviations from `mean`
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        value = x[row, col]                                 # read 1 of 2
        count += ONE
        delta = value - mean
        mean += delta / count
        m2 += delta * (value - mean)
    # Combine the threads' (count, mean, m2): the row's mean, then each m2 moved to that mean.
    row_mean = block_sum(count * mean, scratch) / cols
    offset = mean - row_mean
    variance = block_sum(m2 + count * offset * offset, scratch) / cols
    scale = ONE / math.sqrt(variance + eps)
    for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
        out[row, col] = (x[row, col] - row_mean) * scale * gamma[col] + beta[col]  # read 2 of 2


def layernorm_online(x, gamma, beta, out=None, eps=DEFAULT_EPS, block=None):
    """layernorm along rows in one kernel: Welford's one pass for the statistics, one to normalize."""
    check_rows(x, out)
    check_affine(x, gamma, beta)
    rows, cols = x.shape
    out = cuda.device_array_like(x) if out is None else out
    layernorm_online_kernel[rows, row_block(cols, block)](x, gamma, beta, np.float32(eps), out)
    return out


# --- 05.1 / 05.3: fused, the row in registers ----------------------------------------------------------

FusedKernels = collections.namedtuple("FusedKernels", "softmax layernorm")


@functools.cache
def fused_kernels(items, max_registers=None):
    """The fused kernels for rows of up to `items` values per thread (any block size). A local array
    stays in registers only when its size and every index are compile-time constants, so each
    count is its own kernel. max_registers caps the registers (GPU only; ptxas spills the rest)."""
    if not 1 <= items <= MAX_ITEMS:
        raise ValueError(f"items must be 1..{MAX_ITEMS}, got {items}")
    ITEMS = items
    kernel = jit(max_registers=max_registers)  # cuda.jit that passes max_registers on a GPU

    @kernel
    def softmax_fused_kernel(x, out):
        # Contract: out[row] = softmax(x[row]), one block per row; each thread keeps its
        # ITEMS values of the row in registers (loops over range(ITEMS) only), reads them coalesced
        # (the tests count the sectors per request), and the block combines max and sum.
        # Budget: 1 read of x and 1 write of out per element, nothing else.
        raise NotImplementedError("Lab 05.1: softmax_fused_kernel")

    @kernel
    def layernorm_fused_kernel(x, gamma, beta, eps, out):
        # Contract: out = (x - mean) / sqrt(variance + eps) * gamma + beta per row, the row
        # cached as in softmax_fused_kernel; the variance about the mean, from the cache (not
        # E[x^2] - mean^2, which loses the digits when the mean is large: the tests take rows
        # whose mean is up to 300, to a relative error of 1e-4); float32 throughout.
        # Budget: 1 read of x, gamma and beta and 1 write of out per element.
        raise NotImplementedError("Lab 05.3: layernorm_fused_kernel")

    return FusedKernels(softmax_fused_kernel, layernorm_fused_kernel)


def fused_items(cols, block, items=None):
    """Values per thread the fused kernel holds: ITEMS_PER_THREAD (one kernel serves every row
    that fits), more when a row of 1,024 threads needs it, or `items`; a ValueError when the
    row does not fit."""
    needed = -(-cols // block)
    if items is None:
        items = min(max(ITEMS_PER_THREAD, needed), MAX_ITEMS) if block == MAX_BLOCK else ITEMS_PER_THREAD
    if needed > items:
        raise ValueError(f"a row of {cols} values over {block} threads is {needed} values per thread; "
                         f"the fused kernel holds {items}: use a larger block (up to {MAX_BLOCK}), "
                         f"more items, or the online form")
    return items


def register_cap(block, max_registers=None):
    """A block must fit in one SM's 65,536 registers: at 1,024 threads, 64 each at most, or the
    launch fails (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES). Below 256 threads nothing binds."""
    fits = 65536 // block
    return max_registers if max_registers is not None or fits >= 255 else fits


def softmax_fused(x, out=None, block=None, items=None, max_registers=None):
    """softmax along rows in one kernel that reads each row once into registers."""
    check_rows(x, out)
    rows, cols = x.shape
    out = cuda.device_array_like(x) if out is None else out
    block = row_block(cols, block)
    kernel = fused_kernels(fused_items(cols, block, items), register_cap(block, max_registers)).softmax
    kernel[rows, block](x, out)                            # one block per row
    return out


def layernorm_fused(x, gamma, beta, out=None, eps=DEFAULT_EPS, block=None, items=None,
                    max_registers=None):
    """layernorm along rows in one kernel that reads each row once into registers."""
    check_rows(x, out)
    check_affine(x, gamma, beta)
    rows, cols = x.shape
    out = cuda.device_array_like(x) if out is None else out
    block = row_block(cols, block)
    kernel = fused_kernels(fused_items(cols, block, items),
                           register_cap(block, max_registers)).layernorm
    kernel[rows, block](x, gamma, beta, np.float32(eps), out)
    return out


# --- 05.4: the ledgers ---------------------------------------------------------------------------------

FORMS = ("unfused", "fused", "online")


def softmax_ledger(rows, cols, form, block):
    """The elements each form of softmax loads and stores, per array (x, out; row_max and row_sum
    are the unfused form's temporaries), with `block` threads per row. The tests compare each
    array's reads, writes, itemsize and which are temporary; `distinct=` is not compared."""
    # Contract: a Ledger (kernellab.lab) per form, in elements: fused reads x once and writes out
    # once; online reads x twice. Unfused: each kernel reads x once, row_max and row_sum are written
    # once per row, and every thread of a later kernel reads its row's statistics once (rows * block
    # reads per kernel that uses one), marked temporary=True. ValueError for any other form.
    raise NotImplementedError("Lab 05.4: softmax_ledger")


def layernorm_ledger(rows, cols, form, block):
    """The elements each form of layernorm loads and stores, per array (x, gamma, beta, out; mean
    and rstd are the unfused form's temporaries), with `block` threads per row. gamma's and
    beta's reads touch only cols distinct elements: declaring `distinct=cols` or leaving it out
    both pass (the tests compare reads, writes, itemsize and temporaries, as softmax_ledger)."""
    # Contract: as softmax_ledger, plus gamma and beta read once per element; the unfused form's
    # temporaries are mean and rstd.
    raise NotImplementedError("Lab 05.4: layernorm_ledger")


# The fused kernels by name (what the register report and the grader's compile check see): 8
# values per thread, the default (1024 threads at 8192 columns), and the other two ways to hold
# 8192 values in registers, 512 threads x 16 and 256 x 32, each compiled with the register cap
# its launcher gives that block (register_cap: at 512 threads, at most 128).
# (Called as the launchers call it: functools.cache tells fused_kernels(8) from fused_kernels(8, None).)
softmax_fused_kernel, layernorm_fused_kernel = fused_kernels(ITEMS_PER_THREAD, None)
softmax_fused_16_kernel = fused_kernels(16, register_cap(512)).softmax
softmax_fused_32_kernel = fused_kernels(MAX_ITEMS, register_cap(256)).softmax

_ROWS = "float32[:, ::1]"
SIGNATURES = {
    "row_max_kernel": f"void({_ROWS}, float32[::1])",
    "row_exp_sum_kernel": f"void({_ROWS}, float32[::1], float32[::1])",
    "softmax_normalize_kernel": f"void({_ROWS}, float32[::1], float32[::1], {_ROWS})",
    "softmax_online_kernel": f"void({_ROWS}, {_ROWS})",
    "softmax_fused_kernel": f"void({_ROWS}, {_ROWS})",
    "softmax_fused_16_kernel": f"void({_ROWS}, {_ROWS})",
    "softmax_fused_32_kernel": f"void({_ROWS}, {_ROWS})",
    "row_mean_kernel": f"void({_ROWS}, float32[::1])",
    "row_rstd_kernel": f"void({_ROWS}, float32[::1], float32, float32[::1])",
    "layernorm_normalize_kernel": f"void({_ROWS}, float32[::1], float32[::1], float32[::1], float32[::1], {_ROWS})",
    "layernorm_online_kernel": f"void({_ROWS}, float32[::1], float32[::1], float32, {_ROWS})",
    "layernorm_fused_kernel": f"void({_ROWS}, float32[::1], float32[::1], float32, {_ROWS})",
}

# The versions of each operation, each with the reason it exists; the tour and the benchmark read these.
VARIANTS = {
    "unfused": (softmax_unfused, "max; exp-sum; normalize: three kernels, x read three times"),
    "fused": (softmax_fused, "one block per row, the row in registers: x read once"),
    "online": (softmax_online, "running max and sum in one pass, then normalize: x read twice, any length"),
}
LAYERNORM_VARIANTS = {
    "unfused": (layernorm_unfused, "mean; variance; normalize: three kernels, x read three times"),
    "fused": (layernorm_fused, "one block per row, the row in registers: x read once"),
    "online": (layernorm_online, "Welford's running mean in one pass, then normalize: x read twice"),
}
