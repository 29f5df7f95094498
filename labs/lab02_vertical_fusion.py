"""Lab 02: vertical fusion.

The lesson: fusing a chain of elementwise ops into one kernel keeps its intermediates in
registers, and a memory-bound chain's time follows the bytes it moves, so the ratio of the bytes,
which a ledger counts before anything is timed, is a first estimate of what fusing pays
(notebooks/02_vertical_fusion.ipynb).
Dropout comes two ways: a given keep-mask (1 byte read per element) or a counter-based generator
that recomputes the mask from (seed, index) in the kernel (0 bytes).

Exercises (each stub says `Lab 02.M`):
  02.1  chain_element                   dropout(relu(x*w + b)) + r on values already in registers
                                        budget: no memory traffic at all
  02.2  fused_chain_kernel              the whole chain, one element per thread
                                        budget: 4 float32 reads (x, w, b, r), 1 byte read of the
                                        mask when one is given, 1 float32 write per element
  02.3  fused_chain_grid_stride_kernel  the same chain, each thread looping over the array
                                        budget: the same per element, whatever the grid
  02.4  fused_chain_ledger(n, with_mask) the bytes the fused kernel moves, per array
  02.5  predicted_speedup(unfused, fused) the speed-up a memory-bound chain should see
Given, for the benchmark: fused_chain_4_per_thread, the same chain with 4 elements per thread,
and fused_chain_vectorized, 4 neighbouring elements per thread in 16-byte loads and stores.

Convention: inputs are float32 device arrays of one length n; `mask` (optional) is a uint8
device array (nonzero = keep). Every launcher takes `out=None` (allocates) and returns the output.
The tests draw finite inputs only (no NaN or inf). A budget is an exact count, not a ceiling:
x, w, b and r are read even where dropout drops the element (the ledger of 02.4 says n reads
whatever the mask, and the meter must agree). Tolerance: a chain's output passes within a
relative error of 1e-5 of reference_chain (float64), the norm of the difference over the norm of
the reference (of the unsigned terms (|x w| + |b|) / (1 - p) + |r| where it cancels), since
the chain's 4 float32 roundings come to at most about 3e-7; fused against unfused, 1e-6 (the
same float32 operations). predicted_speedup within 1e-6 relative (pytest.approx); ledgers exactly.

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import Ledger, device_facts
from kernellab.lab import FLOAT32X4, load_float32x4, store_float32x4   # the given vectorised chain's
from numba import cuda
import functools

import numpy as np


DEFAULT_BLOCK = 256
MASK = np.uint8(0).itemsize      # bytes per mask element
ZERO = np.float32(0.0)           # float32: max(v, 0.0), or a sum started at 0.0, is float64

# The counter-based generator: murmur3's 32-bit finaliser applied to (index * golden ratio) ^ seed.
# It runs in uint64 with the top half masked off: products of two 32-bit numbers never overflow
# (no wrap-around warnings in NumPy or the simulator), and every constant is unsigned, since
# Numba turns signed-with-unsigned integer arithmetic into float64.
LOW32 = np.uint64(0xFFFFFFFF)
GOLDEN = np.uint64(0x9E3779B1)
MIX1 = np.uint64(0x85EBCA6B)
MIX2 = np.uint64(0xC2B2AE35)
SHIFT16 = np.uint64(16)
SHIFT13 = np.uint64(13)


# --- given: dropout's keep decision, on the device and on the host --------------------------------

@cuda.jit(device=True)
def hash32(i, seed):
    """A well-mixed 32-bit number from (index, seed): the same value every time, on any thread."""
    h = ((np.uint64(i) * GOLDEN) & LOW32) ^ seed
    h ^= h >> SHIFT16
    h = (h * MIX1) & LOW32
    h ^= h >> SHIFT13
    h = (h * MIX2) & LOW32
    h ^= h >> SHIFT16
    return h


@cuda.jit(device=True)
def dropout_keep(i, mask, seed, threshold):
    """Keep element i? From the mask when one is given (mask.size > 0), else from the hash."""
    if mask.size > 0:
        return mask[i] != 0          # 1 byte read
    return hash32(i, seed) >= threshold  # no memory traffic at all


def dropout_constants(p):
    """(threshold, scale) for drop probability p: keep when hash >= threshold, scale by 1/(1-p)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")
    threshold = np.uint64(min(round(p * 2.0**32), 2**32 - 1))
    return threshold, np.float32(1.0 / (1.0 - p))


def seed_constant(seed):
    """The seed as the kernels take it (uint64 holding 32 bits)."""
    if not 0 <= int(seed) < 2**32:
        raise ValueError(f"seed must be in [0, 2**32), got {seed}")
    return np.uint64(seed)


def keep_mask(n, p, seed):
    """The mask the kernels' generator draws, computed on the host (uint8, 1 = keep)."""
    h = ((np.arange(n, dtype=np.uint64) * GOLDEN) & LOW32) ^ seed_constant(seed)
    h ^= h >> SHIFT16
    h = (h * MIX1) & LOW32
    h ^= h >> SHIFT13
    h = (h * MIX2) & LOW32
    h ^= h >> SHIFT16
    return (h >= dropout_constants(p)[0]).astype(np.uint8)


def reference_chain(x, w, b, r, p, seed, mask=None):
    """The chain in float64 NumPy: what every version must compute."""
    keep = (mask if mask is not None else keep_mask(x.size, p, seed)) != 0
    f64 = [np.asarray(a, dtype=np.float64) for a in (x, w, b, r)]
    y = np.maximum(f64[0] * f64[1] + f64[2], 0.0)
    return np.where(keep, y / (1.0 - p), 0.0) + f64[3]


def blocks_for(n, block):
    return (n + block - 1) // block


@functools.lru_cache(maxsize=None)
def no_mask():
    """An empty mask, made once (not on every call, inside the timed region)."""
    return cuda.device_array(0, dtype=np.uint8)


def _dropout_args(x, p, seed, mask):
    """Dropout's launch arguments: the mask (empty: use the generator) and typed constants.

    The constants are NumPy uint64/float32 scalars: a Python float argument would be typed float64
    and drag the whole kernel into double precision.
    """
    threshold, scale = dropout_constants(p)
    if mask is None:
        mask = no_mask()                               # size 0: use the generator
    elif mask.size != x.size:
        raise ValueError(f"mask has {mask.size} elements, x has {x.size}")
    return mask, seed_constant(seed), threshold, scale


def _check_inputs(x, w, b, r):
    for name, a in (("w", w), ("b", b), ("r", r)):
        if a.shape != x.shape:
            raise ValueError(f"{name} has shape {a.shape}, x has {x.shape}: the chain is elementwise")


# --- given: the naive chain, one kernel per op ---------------------------------------------------

@cuda.jit
def affine_kernel(x, w, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * w[i] + b[i]     # 3 reads (x, w, b), 1 write


@cuda.jit
def relu_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        v = x[i]                         # 1 read
        out[i] = v if v > ZERO else ZERO  # 1 write


@cuda.jit
def dropout_kernel(x, mask, seed, threshold, scale, out):
    i = cuda.grid(1)
    if i < out.size:
        v = x[i]                                        # 1 read, kept or not
        keep = dropout_keep(i, mask, seed, threshold)   # 1 byte read with a mask, 0 without
        out[i] = v * scale if keep else ZERO            # 1 write


@cuda.jit
def add_kernel(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]             # 2 reads, 1 write
# Summed per element: 3+1 (affine) + 1+1 (relu) + 1+1 (dropout) + 2+1 (add) = 11 float32
# accesses = 44 bytes, 3 of the 4 written arrays being intermediates nobody needs afterwards.


def unfused_temporaries(x):
    """The three intermediates the unfused chain round-trips through device memory.

    Allocate them once and pass them to every call (`temporaries=`), as a framework's caching
    allocator does: a benchmark of the unfused chain then times its launches and bytes, not
    three `cudaMalloc`s per call (Lab 02's notebook measures those on their own).
    """
    return tuple(cuda.device_array_like(x) for _ in range(3))


def unfused_chain(x, w, b, r, p=0.1, seed=0, mask=None, out=None, block=DEFAULT_BLOCK,
                  temporaries=None):
    """Four launches, intermediates in device memory: what eager frameworks do, op by op.

    `temporaries`: three arrays like `x` from `unfused_temporaries(x)`; without them, each call
    allocates its own (and pays for it).
    """
    _check_inputs(x, w, b, r)
    mask, seed, threshold, scale = _dropout_args(x, p, seed, mask)
    if out is None:
        out = cuda.device_array_like(x)
    t_affine, t_relu, t_dropout = temporaries or unfused_temporaries(x)   # round trips
    grid = blocks_for(x.size, block)                                 # one thread per element
    affine_kernel[grid, block](x, w, b, t_affine)
    relu_kernel[grid, block](t_affine, t_relu)
    dropout_kernel[grid, block](t_relu, mask, seed, threshold, scale, t_dropout)
    add_kernel[grid, block](t_dropout, r, out)
    return out


def unfused_chain_ledger(n, with_mask=False):
    """The bytes the four kernels move: every intermediate is written once and read once."""
    ledger = (Ledger("unfused")
              .add("affine", "x", reads=n).add("affine", "w", reads=n).add("affine", "b", reads=n)
              .add("affine", "t_affine", writes=n, temporary=True)
              .add("relu", "t_affine", reads=n, temporary=True)
              .add("relu", "t_relu", writes=n, temporary=True)
              .add("dropout", "t_relu", reads=n, temporary=True)
              .add("dropout", "t_dropout", writes=n, temporary=True))
    if with_mask:
        ledger.add("dropout", "mask", reads=n, itemsize=MASK)
    return (ledger.add("add", "t_dropout", reads=n, temporary=True)
            .add("add", "r", reads=n).add("add", "out", writes=n))


# --- 02.1 / 02.2: the fused chain ---------------------------------------------------------------

@cuda.jit(device=True)
def chain_element(xv, wv, bv, rv, keep, scale):
    """dropout(relu(x*w + b)) + r for one element whose inputs are already in registers.

    The inputs are finite: relu as a ternary (`v if v > ZERO else ZERO`, as relu_kernel, sends
    NaN to 0) or as a comparison (`if v < ZERO`, keeps NaN, as reference_chain's np.maximum)
    both pass."""
    # relu(xv * wv + bv), then dropout (times scale when keep, else zero), plus rv; float32
    # throughout (ZERO, not 0.0: a Python float makes it float64). Budget: no memory traffic at
    # all. Hint 02.1 in the notebook.
    raise NotImplementedError("Lab 02.1: chain_element")


@cuda.jit
def fused_chain_kernel(x, w, b, r, mask, seed, threshold, scale, out):
    # out = the whole chain (chain_element), one thread per element; dropout's decision from
    # dropout_keep. Budget per element, exactly: 4 float32 reads, the mask byte when one is
    # given, 1 write, and no intermediate in global memory; neighbouring threads on neighbouring
    # elements (coalesced: the tests count the sectors per warp request).
    raise NotImplementedError("Lab 02.2: fused_chain_kernel")


def fused_chain(x, w, b, r, p=0.1, seed=0, mask=None, out=None, block=DEFAULT_BLOCK):
    """One launch, one thread per element: each input read once, the output written once."""
    _check_inputs(x, w, b, r)
    mask, seed, threshold, scale = _dropout_args(x, p, seed, mask)
    if out is None:
        out = cuda.device_array_like(x)
    grid = blocks_for(x.size, block)        # one thread per element: enough blocks to cover n
    fused_chain_kernel[grid, block](x, w, b, r, mask, seed, threshold, scale, out)
    return out


# --- 02.3: the fused chain over a fixed grid -----------------------------------------------------

@cuda.jit
def fused_chain_grid_stride_kernel(x, w, b, r, mask, seed, threshold, scale, out):
    # The same work as 02.2 over every element, whatever the size of the grid (a grid-stride
    # loop). Budget per element: the same as 02.2 (no element twice), every pass coalesced.
    raise NotImplementedError("Lab 02.3: fused_chain_grid_stride_kernel")


def fused_chain_grid_stride(x, w, b, r, p=0.1, seed=0, mask=None, out=None, blocks=None,
                            block=DEFAULT_BLOCK):
    """One launch of a fixed grid (default 4 blocks per SM, the article's advice) that loops."""
    _check_inputs(x, w, b, r)
    mask, seed, threshold, scale = _dropout_args(x, p, seed, mask)
    if out is None:
        out = cuda.device_array_like(x)
    if blocks is None:
        blocks = 4 * device_facts().sm_count   # half a wave at 256 threads (8 blocks fill an SM), whatever n
    fused_chain_grid_stride_kernel[blocks, block](x, w, b, r, mask, seed, threshold, scale, out)
    return out


# --- given: the fused chain with more bytes in flight per thread ---------------------------------

@cuda.jit
def fused_chain_4_per_thread_kernel(x, w, b, r, mask, seed, threshold, scale, out):
    i = cuda.grid(1)
    step = cuda.gridsize(1)              # elements i, i + step, ...: each warp's loads stay coalesced
    if i + 3 * step < out.size:          # the common case: every load issued before any store
        j1, j2, j3 = i + step, i + 2 * step, i + 3 * step
        x0, x1, x2, x3 = x[i], x[j1], x[j2], x[j3]
        w0, w1, w2, w3 = w[i], w[j1], w[j2], w[j3]
        b0, b1, b2, b3 = b[i], b[j1], b[j2], b[j3]
        r0, r1, r2, r3 = r[i], r[j1], r[j2], r[j3]
        # The mask bytes too, before the first store: the compiler cannot tell that `out` and
        # `mask` never overlap, so it keeps a mask load written after a store to `out` after it;
        # each store needs its own mask byte, and the four bytes would come one after another.
        k0 = dropout_keep(i, mask, seed, threshold)
        k1 = dropout_keep(j1, mask, seed, threshold)
        k2 = dropout_keep(j2, mask, seed, threshold)
        k3 = dropout_keep(j3, mask, seed, threshold)
        out[i] = chain_element(x0, w0, b0, r0, k0, scale)
        out[j1] = chain_element(x1, w1, b1, r1, k1, scale)
        out[j2] = chain_element(x2, w2, b2, r2, k2, scale)
        out[j3] = chain_element(x3, w3, b3, r3, k3, scale)
    else:                                # the ragged end of the array
        for k in range(4):
            j = i + k * step
            if j < out.size:
                keep = dropout_keep(j, mask, seed, threshold)
                out[j] = chain_element(x[j], w[j], b[j], r[j], keep, scale)
    # per element: the same 20 (21) bytes; per thread, 4 times as many loads waiting at once


def fused_chain_4_per_thread(x, w, b, r, p=0.1, seed=0, mask=None, out=None, block=DEFAULT_BLOCK):
    """One launch, 4 elements per thread: four times the loads in flight per thread."""
    _check_inputs(x, w, b, r)
    mask, seed, threshold, scale = _dropout_args(x, p, seed, mask)
    if out is None:
        out = cuda.device_array_like(x)
    grid = blocks_for(x.size, 4 * block)    # each thread covers 4 elements
    fused_chain_4_per_thread_kernel[grid, block](x, w, b, r, mask, seed, threshold, scale, out)
    return out


# --- given: the fused chain in 16-byte accesses --------------------------------------------------

@cuda.jit
def fused_chain_vectorized_kernel(x, w, b, r, mask, seed, threshold, scale, out):
    v = cuda.grid(1)                     # vector v: elements 4v .. 4v + 3 of every array
    i = FLOAT32X4 * v
    if i + FLOAT32X4 <= out.size:        # a whole vector: one 16-byte load per input, one store
        x0, x1, x2, x3 = load_float32x4(x, v)
        w0, w1, w2, w3 = load_float32x4(w, v)
        b0, b1, b2, b3 = load_float32x4(b, v)
        r0, r1, r2, r3 = load_float32x4(r, v)
        store_float32x4(out, v, (
            chain_element(x0, w0, b0, r0, dropout_keep(i, mask, seed, threshold), scale),
            chain_element(x1, w1, b1, r1, dropout_keep(i + 1, mask, seed, threshold), scale),
            chain_element(x2, w2, b2, r2, dropout_keep(i + 2, mask, seed, threshold), scale),
            chain_element(x3, w3, b3, r3, dropout_keep(i + 3, mask, seed, threshold), scale)))
    else:                                # the last n % 4 elements, one at a time
        for j in range(i, out.size):
            keep = dropout_keep(j, mask, seed, threshold)
            out[j] = chain_element(x[j], w[j], b[j], r[j], keep, scale)
    # per element: the same 20 (21) bytes, in a quarter of the load and store instructions


def fused_chain_vectorized(x, w, b, r, p=0.1, seed=0, mask=None, out=None, block=DEFAULT_BLOCK):
    """One launch, 4 neighbouring elements per thread in 16-byte loads and stores, as Triton's
    kernels move them (whole device arrays: they start 16-byte aligned)."""
    _check_inputs(x, w, b, r)
    mask, seed, threshold, scale = _dropout_args(x, p, seed, mask)
    if out is None:
        out = cuda.device_array_like(x)
    grid = blocks_for(x.size, FLOAT32X4 * block)    # each thread covers one vector of 4
    fused_chain_vectorized_kernel[grid, block](x, w, b, r, mask, seed, threshold, scale, out)
    return out


# --- 02.4 / 02.5: the ledger and the prediction --------------------------------------------------

def fused_chain_ledger(n, with_mask=False):
    """The bytes the fused kernel moves: each input read once, the output written once."""
    # A Ledger("fused") whose one op, "fused_chain", declares every array fused_chain_kernel
    # reads and writes, n elements each (the mask only when with_mask, at MASK bytes each).
    # unfused_chain_ledger above shows the form; the tests compare yours with the truth and with
    # the meter's count of what fused_chain_kernel really did.
    raise NotImplementedError("Lab 02.4: fused_chain_ledger")


def predicted_speedup(unfused, fused):
    """Unfused time / fused time when both are memory-bound: the ratio of the bytes they move."""
    # From the two ledgers alone. Hint 02.5 in the notebook.
    raise NotImplementedError("Lab 02.5: predicted_speedup")


# The versions of the chain, each with the reason it exists; the tour and the benchmark read this.
VARIANTS = {
    "unfused": (unfused_chain, "one kernel per op: 4 launches, 3 intermediates through device memory"),
    "fused": (fused_chain, "one kernel, one thread per element: intermediates stay in registers"),
    "fused_grid_stride": (fused_chain_grid_stride,
                          "one kernel over a fixed grid of 4 blocks per SM, each thread looping"),
    "fused_4_per_thread": (fused_chain_4_per_thread,
                           "one kernel, 4 elements per thread: 4 times the loads in flight"),
    "fused_vectorized": (fused_chain_vectorized,
                         "one kernel, 4 neighbouring elements per thread in 16-byte loads and stores"),
}


# Argument types for compiling the kernels without launching them (`kernellab occupancy`,
# the resources-vs-driver check).
SIGNATURES = {
    "affine_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1])",
    "relu_kernel": "void(float32[::1], float32[::1])",
    "dropout_kernel": "void(float32[::1], uint8[::1], uint64, uint64, float32, float32[::1])",
    "add_kernel": "void(float32[::1], float32[::1], float32[::1])",
    "fused_chain_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1], uint8[::1], uint64, uint64, float32, float32[::1])",
    "fused_chain_grid_stride_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1], uint8[::1], uint64, uint64, float32, float32[::1])",
    "fused_chain_4_per_thread_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1], uint8[::1], uint64, uint64, float32, float32[::1])",
    "fused_chain_vectorized_kernel": "void(float32[::1], float32[::1], float32[::1], float32[::1], uint8[::1], uint64, uint64, float32, float32[::1])",
}
