"""Planted bugs in Lab 04's solution, which the graded tests must catch, and valid alternatives,
which must score full marks.

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
    ("A tile staged transposed: a warp's lanes walk down a column of A (8 sectors a request, not 4)",
     "        if row < m and k0 + tx < k_total:\n            a_tile[ty, tx] = a[row, k0 + tx]"
     "    # a warp reads a contiguous piece of a row of A\n        else:\n            a_tile[ty, tx] = ZERO\n",
     "        if row - ty + tx < m and k0 + ty < k_total:\n            a_tile[tx, ty] = a[row - ty + tx, k0 + ty]\n"
     "        else:\n            a_tile[tx, ty] = ZERO\n"),
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
    ("epilogue keeps only mask value 1, not every nonzero value", "    if value > ZERO and keep != 0:",
     "    if value > ZERO and keep == 1:"),
    ("shared tiles sized for TILE (16), not MAX_TILE: a larger tile writes past them",
     "    a_tile = cuda.shared.array((MAX_TILE, MAX_TILE), float32)  # a shape must be a constant:\n"
     "    b_tile = cuda.shared.array((MAX_TILE, MAX_TILE), float32)  # room for the largest tile",
     "    a_tile = cuda.shared.array((TILE, TILE), float32)  # a shape must be a constant:\n"
     "    b_tile = cuda.shared.array((TILE, TILE), float32)  # room for the largest tile"),
    ("ledger's default block tile is not TILE x TILE", "def linear_ledger(m, n, k, fused, block_rows=TILE, block_cols=TILE):",
     "def linear_ledger(m, n, k, fused, block_rows=TILE, block_cols=MAX_TILE):"),
    ("epilogue computes in float64 (a float literal; the values still agree)", "    value = acc + bias\n",
     "    value = (acc + bias) * 0.1 * 10.0\n"),
    ("tiled_dot returns early for threads past the edge of C (they skip the loads and the barriers)",
     "    n = b.shape[1]\n    acc = ZERO\n", "    n = b.shape[1]\n    acc = ZERO\n    if row >= m or col >= n:\n        return acc\n"),
    ("fused kernel calls tiled_dot inside its guard (threads past the edge skip the loads and barriers)",
     "    acc = tiled_dot(a, b, row, col)\n    if row < out.shape[0] and col < out.shape[1]:\n        out[row, col] = bias_relu_dropout(",
     "    if row < out.shape[0] and col < out.shape[1]:\n        acc = tiled_dot(a, b, row, col)\n        out[row, col] = bias_relu_dropout("),
]

ALTERNATIVES = [
    ("the epilogue as one select on the truth of keep",
     "    value = acc + bias\n    if value > ZERO and keep != 0:\n        return value * scale\n    return ZERO",
     "    return max(acc + bias, ZERO) * scale if keep else ZERO"),
    ("tiled_dot counts its tile steps (k0 = step * tile)",
     "    for k0 in range(0, k_total, tile):", "    for step in range((k_total + tile - 1) // tile):\n        k0 = step * tile"),
]
