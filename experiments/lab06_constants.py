"""Lab 06's constants, shared by its declaration (lab06_occupancy) and its parts (lab06_measure,
lab06_figures, lab06_claims): here, the parts import them without importing the declaration, which
imports the parts."""

import numpy as np

NUMBER = "06"
H200 = (9, 0)

# The probes (lab06_measure), their benchmarks (the declaration) and the figures drawn from them.
PROBE_BLOCK = 64                                       # 2 warps: fine steps of occupancy
PROBE_LEVELS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)      # blocks per SM: 2 .. 64 resident warps
STREAM_N = 1 << 26                                     # 3 x 256 MiB: far past the 60 MiB L2
FMA_N = 1 << 24
FMA_ROUNDS = 256                                       # 512 flops per 8 bytes: compute-bound
FMA_A, FMA_B = np.float32(0.999), np.float32(0.001)    # float32 constants keep the math in float32
STREAM_A = np.float32(1.5)
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64}   # others in ARCHITECTURES: 128
SIM_N, SIM_BLOCKS = 300, 2                             # the simulator: the loops run several times per thread

# The article's "at most 32 KB of shared memory per block", measured: the tile depth sets the
# shared memory per block (384 B per unit of tile_k at 128 threads: 3 KiB .. 48 KiB), at a cap of
# 64 registers, where registers allow 8 blocks per SM, so that shared memory binds from ~27 KiB on.
SHARED_SWEEP_TILE_K = (8, 16, 32, 48, 64, 96, 128)
SHARED_SWEEP_CAP = 64

TARGET_PCT_OF_FP32_PEAK = 60     # issue 13: the compute-bound probe, on the clock's FP32 peak
