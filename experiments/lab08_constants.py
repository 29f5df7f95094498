"""Lab 08's constants, shared by its declaration (lab08_graphs) and its parts (lab08_measure,
lab08_figures, lab08_claims): here, the parts import them without importing the declaration, which
imports the parts."""

import numpy as np

NUMBER = "08"
KERNELS = 100                                   # kernels in the measured pipelines
TINY_N = 128                                    # elements: one block, a launch-bound kernel
GAP_SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 23, 1 << 25)
LONG_KERNEL_MS = 0.020                          # the gap target applies to kernels this long
GAP_TARGET = 0.05
ALONE_REPS = 50                                 # samples of the kernel timed alone (and of its bracket)
BATCH_FEATURES = 4096
BATCH_SIZES = (1, 8, 64, 512)
BATCH_STEPS = 20
BATCH_CALLS = 120                               # calls in each stream of batch sizes a server sees
BUCKETS = tuple(1 << k for k in range(10))      # pad-to-bucket: powers of two, 1 ... 512
LARGEST_BATCH = BUCKETS[-1]
IDENTITY = (np.float32(1.0), np.float32(0.0))   # a step that keeps the values, for timing
CHAIN_STEPS = tuple((np.float32(a), np.float32(b))  # the profiled chain, float32 as the kernel declares
                    for a, b in ((1.5, -0.25), (0.5, 1.0), (-1.25, 0.5), (0.75, 0.0)))
CHAIN_N = 1 << 25                               # 128 MiB: twice the L2, so DRAM bytes are DRAM bytes
GAP_LINEAR_PCT = 1.0                            # the gap axis is linear within +-1% (symlog)
