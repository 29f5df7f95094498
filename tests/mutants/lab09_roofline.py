"""Planted bugs in Lab 09's solution, which the graded tests must catch, and valid alternatives.

(what it is, text in solutions/lab09_roofline.py, its replacement); ALTERNATIVES must score
full marks.
"""

MUTANTS = [
    ("intensity inverted (bytes per FLOP)", "    return flops / nbytes\n", "    return nbytes / flops if flops else 0.0\n"),
    ("intensity accepts zero bytes", "if flops < 0 or nbytes <= 0:", "if flops < 0 or nbytes < 0:"),
    ("bandwidth left in GB/s", 'nbytes / (ceilings["copy_gbps"] * 1e9)', 'nbytes / ceilings["copy_gbps"]'),
    ("TFLOP/s taken for GFLOP/s", 'flops / (ceilings["fp32_fma_tflops"] * 1e12)', 'flops / (ceilings["fp32_fma_tflops"] * 1e9)'),
    ("launch floor left in ms", 'ceilings["launch_floor_ms"] * 1e-3}', 'ceilings["launch_floor_ms"]}'),
    ("bound picks the fastest ceiling", "return max(times, key=times.get)", "return min(times, key=times.get)"),
    ("bound ignores the launch floor", "return max(times, key=times.get)",
     'return "memory" if times["memory"] >= times["compute"] else "compute"'),
    ("bound from intensity against a fixed ridge", "return max(times, key=times.get)",
     'return "launch" if times["launch"] >= max(times.values()) else ("memory" if flops < 10 * nbytes else "compute")'),
    ("roof is the higher ceiling", "roof = min(ceilings", "roof = max(ceilings"),
    ("roof bandwidth left in GB/s", 'point_intensity * ceilings["copy_gbps"] * 1e9)', 'point_intensity * ceilings["copy_gbps"])'),
    ("% of roof as a fraction", "100.0 * attained / roof)", "attained / roof)"),
    ("% of roof clamped at 100", "100.0 * attained / roof)", "min(100.0, 100.0 * attained / roof))"),
    ("attained in bytes/s", "    attained = flops / seconds", "    attained = dram_bytes / seconds"),
    ("no check of the time", "    if seconds <= 0:\n", "    if seconds < 0:\n"),
    ("intensity from requested bytes", 'dram_bytes = row["dram_bytes_read"] + row["dram_bytes_write"]',
     'dram_bytes = row["requested_bytes"]'),
    ("DRAM reads only", 'dram_bytes = row["dram_bytes_read"] + row["dram_bytes_write"]', 'dram_bytes = row["dram_bytes_read"]'),
    ("the profiler's time", "return roofline_point(row[\"flops\"], dram_bytes, seconds, ceilings)",
     "return roofline_point(row[\"flops\"], dram_bytes, row[\"gpu_time_ns\"] * 1e-9, ceilings)"),
    ("rewrite still strided", "        row = i // cols      # lanes i and i + 1 are neighbouring columns: 4 bytes apart, so\n"
     "        col = i % cols ", "        row = i % rows\n        col = i // rows "),
    ("coalesced rewrite without a guard", "    if i < rows * cols:\n        row = i // cols", "    if True:\n        row = i // cols"),
    ("scale indexed by column", "out[row, col] = x[row, col] * scale[row]   # 2 reads", "out[row, col] = x[row, col] * scale[col % rows]   # 2 reads"),
    ("missing syncthreads", "    cuda.syncthreads()                            # the whole tile", "    pass                                          # the whole tile"),
    ("write guard for a square matrix", "        if r < cols and c < rows:", "        if r < rows and c < cols:"),
    ("read tail not guarded", "        if r < rows and c < cols:\n            tile[ty + k, tx] = x[r, c]",
     "        if True:\n            tile[ty + k, tx] = x[r, c]"),
    ("tile not padded", "cuda.shared.array((TILE, PADDED), float32)", "cuda.shared.array((TILE, TILE), float32)"),
    ("tile padded along the wrong axis (same bytes, a column read is 32-way conflicted)",
     "cuda.shared.array((TILE, PADDED), float32)", "cuda.shared.array((PADDED, TILE), float32)"),
    ("writes read x again, no tile", "            out[r, c] = tile[tx, ty + k]", "            out[r, c] = x[c, r]"),
    ("tile read back untransposed", "            out[r, c] = tile[tx, ty + k]", "            out[r, c] = tile[ty + k, tx]"),
    # Each of these escaped the checks before issue 56; the check named kills it.
    ("intensity by floor division, an integer where a real is stated (test_intensity's drawn integer counts)",
     "    return flops / nbytes\n", "    return flops // nbytes\n"),
    ("roofline_point returns a plain tuple, not a RooflinePoint (test_roofline_point reads the fields by name)",
     "    return RooflinePoint(point_intensity, attained, roof, 100.0 * attained / roof)",
     "    return (point_intensity, attained, roof, 100.0 * attained / roof)"),
    ("scale_rows_kernel assumes blocks of DEFAULT_BLOCK threads (test_scale_rows_matches_numpy's drawn blocks)",
     "    i = cuda.grid(1)\n    rows, cols = out.shape\n    if i < rows * cols:\n        row = i // cols",
     "    i = cuda.blockIdx.x * DEFAULT_BLOCK + cuda.threadIdx.x\n    rows, cols = out.shape\n"
     "    if i < rows * cols:\n        row = i // cols"),
]

ALTERNATIVES = [
    ("bound breaks a tie the other way (the last of the tied keys)",
     "return max(times, key=times.get)",
     "return max(reversed(list(times)), key=times.get)"),
    ("time_model rejects negative flops or bytes, as intensity does",
     "    return {\"memory\": nbytes / (ceilings[\"copy_gbps\"] * 1e9),",
     "    if flops < 0 or nbytes < 0:\n"
     "        raise ValueError(f\"need flops, nbytes >= 0, got {flops}, {nbytes}\")\n"
     "    return {\"memory\": nbytes / (ceilings[\"copy_gbps\"] * 1e9),"),
    ("roofline_point rejects flops <= 0 too (no point on a log-log roofline)",
     "    if seconds <= 0:\n        raise ValueError(f\"need seconds > 0, got {seconds}\")",
     "    if seconds <= 0 or flops <= 0:\n        raise ValueError(f\"need seconds > 0 and flops > 0, got {seconds}, {flops}\")"),
    ("scale_rows kernel as a grid-stride loop (under the launcher's one thread per element)",
     "    i = cuda.grid(1)\n    rows, cols = out.shape\n    if i < rows * cols:\n"
     "        row = i // cols",
     "    rows, cols = out.shape\n    for i in range(cuda.grid(1), rows * cols, cuda.gridsize(1)):\n"
     "        row = i // cols"),
    ("tile stored transposed (columns of the tile), read back along its rows: conflict-free too",
     "            tile[ty + k, tx] = x[r, c]\n    cuda.syncthreads()                            # the whole tile is in before anyone reads it\n    for k in range(0, TILE, BLOCK_ROWS):          # write: lanes walk a row of out (coalesced)\n        r, c = first_col + ty + k, first_row + tx  # out's row = x's column\n        if r < cols and c < rows:\n            out[r, c] = tile[tx, ty + k]",
     "            tile[tx, ty + k] = x[r, c]\n    cuda.syncthreads()                            # the whole tile is in before anyone reads it\n    for k in range(0, TILE, BLOCK_ROWS):          # write: lanes walk a row of out (coalesced)\n        r, c = first_col + ty + k, first_row + tx  # out's row = x's column\n        if r < cols and c < rows:\n            out[r, c] = tile[ty + k, tx]"),
]
