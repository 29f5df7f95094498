"""Planted bugs in Lab 06's solution: the graded tests must catch every one.

(what the bug is, text in solutions/lab06_occupancy.py, its replacement)
"""

MUTANTS = [
    ("a partial warp is rounded down",
     "    warps = -(-block_size // arch.warp_size)        # a partial warp takes a whole warp's slot",
     "    warps = max(1, block_size // arch.warp_size)    # a partial warp takes a whole warp's slot"),
    ("registers not granted in 256-register units",
     "per_warp = -(-registers_per_thread * arch.warp_size // unit) * unit   # granted per warp, in units",
     "per_warp = registers_per_thread * arch.warp_size   # granted per warp, in units"),
    ("register file not split into sub-partitions",
     "    return warps_per_part * parts // warps",
     "    return arch.registers_per_sm // per_warp // warps"),
    ("shared memory forgets the 1 KiB reservation",
     "allocated = -(-(shared_bytes_per_block + arch.reserved_shared_per_block) // unit) * unit",
     "allocated = -(-shared_bytes_per_block // unit) * unit"),
    ("shared memory ignores the carveout",
     "    return shared_per_sm(arch, carveout, allocated) // allocated",
     "    return shared_per_sm(arch, -1, allocated) // allocated"),
    ("occupancy divides by 64 warps on every cc",
     "    return SMOccupancy(active, warps, warps / arch.max_warps_per_sm,",
     "    return SMOccupancy(active, warps, warps / 64,"),
    ("TUNED keeps the 64-deep tile: shared memory binds at 56%",
     "TUNED = LinearReluConfig(block_size=128, tile_k=32, max_registers=40)",
     "TUNED = LinearReluConfig(block_size=128, tile_k=64, max_registers=40)"),
    ("missing syncthreads before the next stage overwrites the tiles",
     "            cuda.syncthreads()                                  # everyone is done before the next stage\n",
     ""),
    ("wrong stride staging the w tile",
     "            for e in range(t, tile_k * tile_n, threads):       # stage w",
     "            for e in range(t, tile_k * tile_n, 2 * threads):   # stage w"),
    ("off-by-one in the x-tile guard",
     "inside = row0 + r < m and k0 + c < k",
     "inside = row0 + r < m and k0 + c <= k"),
]
