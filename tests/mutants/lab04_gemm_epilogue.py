"""Planted bugs in Lab 04's solution: the graded tests must catch every one.

(what the bug is, text in solutions/lab04_gemm_epilogue.py, its replacement)
"""

MUTANTS = [
    ("no barrier after loading the tiles",
     "        cuda.syncthreads()                      # the tiles are complete\n", ""),
    ("no barrier before the next step overwrites the tiles",
     "        cuda.syncthreads()                      # all are done before the next step overwrites them\n", ""),
    ("off-by-one in the inner product over the tile", "        for k in range(tile):\n            acc +=",
     "        for k in range(tile - 1):\n            acc +="),
    ("missing bounds guard on A's columns", "        if row < m and k0 + tx < k_total:", "        if row < m:"),
    ("wrong stride through K (the constant TILE, not the block's side)",
     "    for k0 in range(0, k_total, tile):", "    for k0 in range(0, k_total, TILE):"),
    ("multiplies the A tile by itself (reads the wrong array)", "            acc += a_tile[ty, k] * b_tile[k, tx]",
     "            acc += a_tile[ty, k] * a_tile[k, tx]"),
    ("writes in the wrong place",
     "    acc = tiled_dot(a, b, row, col)\n    if row < c.shape[0] and col < c.shape[1]:\n        c[row, col] = acc",
     "    acc = tiled_dot(a, b, row, col)\n    if row < c.shape[0] and col < c.shape[1]:\n"
     "        c[row, (col + 1) % c.shape[1]] = acc"),
    ("grid's x and y swapped", "    return (blocks_for(n, tile), blocks_for(m, tile)), (tile, tile)",
     "    return (blocks_for(m, tile), blocks_for(n, tile)), (tile, tile)"),
    ("computes on the host, no kernel", "    matmul_tiled_kernel[grid, block](a, b, out)",
     "    out.copy_to_device((a.copy_to_host() @ b.copy_to_host()).astype(np.float32))"),
    ("tiled_dot accumulates in float64 (acc = 0.0; the values still agree)",
     "    acc = ZERO\n    for k0 in range(0, k_total, tile):",
     "    acc = 0.0\n    for k0 in range(0, k_total, tile):"),
    ("epilogue drops the relu", "    if value > ZERO and keep != 0:", "    if keep != 0:"),
    ("fused launcher runs the unfused chain",
     "    linear_relu_dropout_tiled_kernel[grid, block](a, b, bias, mask, keep_scale(p), out)",
     "    linear_relu_dropout_unfused(a, b, bias, mask, p, out=out, tile=tile)"),
    ("ledger reads A once per block row", ".add(matmul, \"a\", reads=m * k * blocks_for(n, block_cols))",
     ".add(matmul, \"a\", reads=m * k * blocks_for(m, block_rows))"),
]
