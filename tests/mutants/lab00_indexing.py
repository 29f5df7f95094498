"""Planted bugs in Lab 00's solution, which the graded tests must catch, and valid alternatives,
which must score full marks.

(what it is, text in solutions/lab00_indexing.py, its replacement)
"""

MUTANTS = [
    ("off-by-one in the grid arithmetic", "return (n + block - 1) // block", "return n // block + 1"),
    ("missing bounds guard", "    if i < out.size:          # the guard: the last block has threads past the end\n        out[i]",
     "    if True:\n        out[i]"),
    ("off-by-one in the guard", "if i < out.size:          # the guard", "if i <= out.size - 2:    # the guard"),
    ("wrong stride in the grid-stride loop", "stride = cuda.gridsize(1)", "stride = cuda.blockDim.x"),
    ("reads the wrong array", "out[row, col] = x[row, col] + bias[col]", "out[row, col] = x[row, col] + bias[row]"),
    ("writes in the wrong place", "out[row, col] = x[row, col]", "out[col % out.shape[0], row % out.shape[1]] = x[row, col]"),
    ("swapped 2D index roles", "col, row = cuda.grid(2)", "row, col = cuda.grid(2)"),
    ("grid-stride loop re-reads x", "        out[i] = a * x[i] + b                  # 1 read",
     "        out[i] = a * x[i] + b * (x[i] / x[i])  # 1 read"),
    ("launcher ignores the block size", "    axpb_kernel[grid, block](x, a, b, out)", "    axpb_kernel[blocks_for(x.size, 32), 32](x, a, b, out)"),
    ("thread index transposed: threadIdx.x * gridDim.x + blockIdx.x (right values, strided lanes)",
     "    i = cuda.grid(1)          # like", "    i = cuda.threadIdx.x * cuda.gridDim.x + cuda.blockIdx.x  # like"),
    ("2D index from a hard-coded 32 x 4 block", "col, row = cuda.grid(2)",
     "col, row = cuda.blockIdx.x * 32 + cuda.threadIdx.x, cuda.blockIdx.y * 4 + cuda.threadIdx.y"),
    ("grid stride starts at a thread-major index (each thread its own chunk)",
     "    start = cuda.grid(1)\n    stride = cuda.gridsize(1)                  # threads in the whole grid\n"
     "    for i in range(start, out.size, stride):",
     "    per = (out.size + cuda.gridsize(1) - 1) // cuda.gridsize(1)\n    start = cuda.grid(1) * per\n"
     "    for i in range(start, min(start + per, out.size)):"),
    ("grid stride of half the grid: elements visited twice from the second pass on",
     "stride = cuda.gridsize(1)", "stride = cuda.gridsize(1) // 2"),
    ("an empty input returns before the block is checked (blocks_for(0, 0) gives 0)",
     "    if n < 0 or block <= 0:\n        raise", "    if n == 0:\n        return 0\n    if n < 0 or block <= 0:\n        raise"),
    ("computes on the host, no kernel", "    axpb_kernel[grid, block](x, a, b, out)",
     "    out.copy_to_device((a * x.copy_to_host() + b).astype(x.dtype))"),
]

ALTERNATIVES = [
    ("grid-stride loop over contiguous block chunks: lanes step by the block, still coalesced",
     "    start = cuda.grid(1)\n    stride = cuda.gridsize(1)                  # threads in the whole grid\n"
     "    for i in range(start, out.size, stride):",
     "    chunk = (out.size + cuda.gridDim.x - 1) // cuda.gridDim.x\n"
     "    first = cuda.blockIdx.x * chunk\n"
     "    for i in range(first + cuda.threadIdx.x, min(first + chunk, out.size), cuda.blockDim.x):"),
]
