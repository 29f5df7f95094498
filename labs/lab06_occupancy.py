"""Lab 06: occupancy, what limits the blocks an SM holds, and whether holding more is faster.

What you will learn
- An SM holds as many blocks as its scarcest resource allows: warp slots, registers, shared
  memory, or the block cap. Occupancy = resident warps / the most warps the SM can hold.
- Where the arithmetic hides traps: a partial warp costs a whole warp; registers are granted per
  warp in 256-register units and per sub-partition (a quarter of the register file each); every
  block carries a 1 KiB shared-memory reservation (cc >= 8.0) before rounding to 128 B.
- How to read a kernel's real resources without a GPU (`kernel_resources` from kernellab.lab:
  ptxas's registers, static shared memory and spills).
- How to tune block size, the register cap (`max_registers`) and the tile size to reach a target
  occupancy, and what the cap costs (spills to local memory).
- Whether occupancy buys speed: measured on an H200 for a memory-bound and a compute-bound
  kernel (experiments/lab06_occupancy.py), which puts the seed article's advice to the test.

Exercises (each stub says `Lab 06.M`); 06.1-06.4 are host-side arithmetic, checked against the
calculator `kernellab.occupancy` (NVIDIA's cuda_occupancy.h rules) on thousands of random configurations:
  06.1  blocks_limited_by_warps(arch, block_size)                        warp slots
  06.2  blocks_limited_by_registers(arch, block_size, registers)         the register file
  06.3  blocks_limited_by_shared_memory(arch, shared_bytes, carveout)    shared memory
  06.4  occupancy(cc, block_size, registers, ...)                        the minimum, and what sets it
  06.5  TUNED (a LinearReluConfig)      block size, register cap and tile depth that give
                                        linear_relu_kernel >= 75% occupancy on an H200
Memory budget of linear_relu_kernel (given, not an exercise): each block stages a tile_m x tile_k
slice of x and a tile_k x 64 slice of w in shared memory per step along k, so x is read
ceil(n / 64) times and w ceil(m / tile_m) times from global memory; out is written once.

`arch` below is a `kernellab.occupancy.Architecture`: the per-SM limits of one compute
capability, as data (`ARCHITECTURES[(9, 0)]` is the H200's Hopper). Print one to see its fields.

Tolerance: 06.1-06.4 exactly (integers and the limiting resource's name). linear_relu with TUNED
within a relative error of 1e-5 of linear_relu_reference (float64; the norm of the difference
over the norm of the reference): its float32 dot products of under 96 terms round to at most
about 6e-6 of their terms' magnitudes.

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import LIMITERS, UNLIMITED, architecture, jit, shared_per_sm
from numba import cuda, float32

import functools
from typing import NamedTuple

import numpy as np



# --- 06.1: warp slots ----------------------------------------------------------------------------

def blocks_limited_by_warps(arch, block_size):
    """Blocks per SM the warp slots allow (0 when the block is larger than a block may be)."""
    # 06.1: how many blocks of block_size threads the SM's warp slots hold. Contract: 0 for a
    # block larger than a block may be (arch.max_threads_per_block); a partial warp takes a whole
    # warp slot. Hint 06.1 in notebook 06 (about 4 lines).
    raise NotImplementedError("Lab 06.1: blocks_limited_by_warps")


# --- 06.2: the register file ---------------------------------------------------------------------

def blocks_limited_by_registers(arch, block_size, registers_per_thread):
    """Blocks per SM the register file allows; UNLIMITED for a kernel that uses no registers."""
    # 06.2: how many blocks the register file holds, by the rules of notebook 06's section 2
    # (registers granted per warp in units; each warp's registers in one sub-partition). Contract:
    # 0 above arch.max_registers_per_thread or when one block does not fit; UNLIMITED when the
    # kernel uses no registers. Hints 06.2 in notebook 06 (about 11 lines).
    raise NotImplementedError("Lab 06.2: blocks_limited_by_registers")


# --- 06.3: shared memory -------------------------------------------------------------------------

def blocks_limited_by_shared_memory(arch, shared_bytes_per_block, carveout=-1):
    """Blocks per SM shared memory allows, for static + dynamic bytes per block.

    `shared_per_sm(arch, carveout, allocated)` (given) is the shared memory the driver configures
    on the SM: the carveout rounded up to a supported size, bumped up when one block would not fit.
    """
    # 06.3: how many blocks the SM's shared memory holds, counting what the hardware adds to each
    # block (notebook 06, section 2). Contract: UNLIMITED when a block takes no shared memory at
    # all. Hint 06.3 in notebook 06 (about 5 lines).
    raise NotImplementedError("Lab 06.3: blocks_limited_by_shared_memory")


# --- 06.4: the calculator ------------------------------------------------------------------------

class SMOccupancy(NamedTuple):
    active_blocks: int          # blocks of this kernel resident on one SM
    active_warps: int           # their warps
    occupancy: float            # active_warps / the SM's maximum warps
    limiters: tuple             # every limit equal to the minimum, in the order of LIMITERS


def occupancy(cc, block_size, registers_per_thread, static_shared=0, dynamic_shared=0,
              max_dynamic_shared=None, carveout=-1):
    """Blocks, warps and occupancy of one SM for a kernel, and which limits set them.

    max_dynamic_shared is the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES attribute (None: the
    default, 48 KiB - static); a launch asking for more dynamic shared memory gets 0 blocks.
    """
    # 06.4: the SM's resident blocks, warps and occupancy for this kernel, and every limit that
    # sets them (in the order of LIMITERS). Contract: architecture(cc) raises ValueError for an
    # unknown cc; an argument out of range (block_size 1..1024, registers 0..255, static 0..48 KiB,
    # dynamic >= 0, carveout -1..100, max_dynamic_shared up to arch.shared_per_block_optin - static)
    # raises ValueError naming it; a launch asking for more dynamic shared memory than
    # max_dynamic_shared gets 0 blocks. Hint 06.4 in notebook 06 (about 25 lines).
    raise NotImplementedError("Lab 06.4: occupancy")


# --- 06.5: tuning a real kernel --------------------------------------------------------------------

TILE_COLS = 16      # threads across a block's tile of out: 16 x MICRO = 64 columns per block
MICRO = 4           # each thread computes a MICRO x MICRO patch of out, held in registers
ZERO = np.float32(0.0)  # float32: max(v, 0.0), or a sum started at 0.0, is float64
TARGET_OCCUPANCY = 0.75
TARGET_CC = (9, 0)  # the H200


class LinearReluConfig(NamedTuple):
    block_size: int             # threads: 16 across the columns of out, block_size / 16 down its rows
    tile_k: int                 # depth of the x and w tiles staged in shared memory per step
    max_registers: int | None   # the compiler's register cap (None: as many as it likes)

    @property
    def tile_m(self):
        return self.block_size // TILE_COLS * MICRO     # rows of out per block

    @property
    def tile_n(self):
        return TILE_COLS * MICRO                        # columns of out per block

    @property
    def shared_bytes(self):
        return (self.tile_m + self.tile_n) * self.tile_k * 4   # the x tile and the w tile


AS_WRITTEN = LinearReluConfig(block_size=128, tile_k=64, max_registers=None)

# 06.5: a configuration (block size, register cap, tile depth) that gives linear_relu_kernel at
# least 75% occupancy on an H200 (cc 9.0); it must still compute relu(x @ w + b). Hint 06.5 in
# notebook 06 (1 line, found by changing one knob at a time).
TUNED = AS_WRITTEN


@functools.lru_cache(maxsize=None)
def linear_relu_kernel_for(config):
    """The kernel for one configuration. The tile sizes are the shared arrays' shapes, which must
    be compile-time constants: each configuration is its own kernel, as a C++ template would be."""
    if config.block_size % TILE_COLS or not 0 < config.block_size <= 1024 or config.tile_k < 1:
        raise ValueError(f"block_size must be a multiple of {TILE_COLS} up to 1024 and tile_k >= 1: {config}")
    if config.shared_bytes > 48 * 1024:
        raise ValueError(f"{config} needs {config.shared_bytes} B of shared memory per block; "
                         "static shared memory stops at 48 KiB: use a smaller tile_k or block_size")
    threads, tile_m, tile_n, tile_k = config.block_size, config.tile_m, config.tile_n, config.tile_k
    w_at = tile_m * tile_k                               # the w tile starts after the x tile
    words = w_at + tile_k * tile_n                       # a compile-time constant: the array's size

    @jit(max_registers=config.max_registers)
    def linear_relu_kernel(x, w, b, out):
        tiles = cuda.shared.array(words, float32)        # the x tile (row-major), then the w tile
        t = cuda.threadIdx.x
        tx, ty = t % TILE_COLS, t // TILE_COLS           # this thread's column and row of patches
        row0, col0 = cuda.blockIdx.y * tile_m, cuda.blockIdx.x * tile_n
        m, k = x.shape
        n = w.shape[1]
        acc = cuda.local.array((MICRO, MICRO), float32)  # registers: the thread's patch of out
        w_row = cuda.local.array(MICRO, float32)
        for i in range(MICRO):
            for j in range(MICRO):
                acc[i, j] = 0.0
        for k0 in range(0, k, tile_k):
            for e in range(t, tile_m * tile_k, threads):       # stage x: 1 global read per element
                r, c = e // tile_k, e % tile_k
                inside = row0 + r < m and k0 + c < k
                tiles[e] = x[row0 + r, k0 + c] if inside else ZERO
            for e in range(t, tile_k * tile_n, threads):       # stage w: 1 global read per element
                r, c = e // tile_n, e % tile_n
                inside = k0 + r < k and col0 + c < n
                tiles[w_at + e] = w[k0 + r, col0 + c] if inside else ZERO
            cuda.syncthreads()                                  # the tiles are complete
            for kk in range(tile_k):
                for j in range(MICRO):
                    w_row[j] = tiles[w_at + kk * tile_n + tx + j * TILE_COLS]
                for i in range(MICRO):
                    a = tiles[(ty * MICRO + i) * tile_k + kk]
                    for j in range(MICRO):
                        acc[i, j] += a * w_row[j]              # MICRO^2 FMAs per 2 * MICRO shared reads
            cuda.syncthreads()                                  # everyone is done before the next stage
        for i in range(MICRO):
            r = row0 + ty * MICRO + i
            for j in range(MICRO):
                c = col0 + tx + j * TILE_COLS
                if r < m and c < n:
                    out[r, c] = max(acc[i, j] + b[c], ZERO)     # 1 read of b, 1 write of out
        # global per block and k step: tile_m*tile_k reads of x + tile_k*64 of w; out written once

    return linear_relu_kernel


linear_relu_kernel = linear_relu_kernel_for(TUNED)   # what the tests compile and measure

SIGNATURES = {
    "linear_relu_kernel": "void(float32[:, ::1], float32[:, ::1], float32[::1], float32[:, ::1])",
}


def linear_relu(x, w, b, out=None, config=TUNED, kernel=None):
    """out = relu(x @ w + b), one block per tile_m x 64 tile of out.

    `kernel` defaults to linear_relu_kernel_for(config); the benchmark passes copies of it
    compiled under other names.
    """
    m, k = x.shape
    n = w.shape[1]
    if w.shape[0] != k or b.shape != (n,):
        raise ValueError(f"shapes do not chain: x {x.shape}, w {w.shape}, b {b.shape}")
    if out is None:
        out = cuda.device_array((m, n), dtype=np.float32)
    grid = (-(-n // config.tile_n), -(-m // config.tile_m))   # x across out's columns, y down its rows
    (kernel or linear_relu_kernel_for(config))[grid, config.block_size](x, w, b, out)
    return out



def linear_relu_reference(x, w, b):
    """relu(x @ w + b) in float64 NumPy from host arrays: what every check of linear_relu compares with."""
    return np.maximum(np.asarray(x, np.float64) @ np.asarray(w, np.float64) + b, 0.0)

# The configurations of linear_relu the tour and the benchmark compare, each with its reason.
VARIANTS = {
    "as_written": (AS_WRITTEN, "no register cap: what the compiler chose"),
    "article_rules": (LinearReluConfig(128, 64, 64),
                      "the seed article's caps: <= 64 registers, <= 32 KB shared per block"),
    "tuned": (TUNED, "06.5: register cap and tile depth for >= 75% occupancy on an H200"),
}
