"""Planted bugs in Lab 06's solution, which the graded tests must catch, and valid alternatives,
which must score full marks.

(what the bug is, text in solutions/lab06_occupancy.py, its replacement)
"""

MUTANTS = [
    ("occupancy leaves the carveout's range to the given shared_per_sm (never called without shared memory)",
     '''              "carveout": (carveout, -1, 100)}''', '''              "carveout": (carveout, -1000, 1000)}'''),
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
    ("a block of exactly max_threads_per_block counted as too large",
     "    if block_size > arch.max_threads_per_block:", "    if block_size >= arch.max_threads_per_block:"),
    ("exactly 255 registers per thread refused",
     "    if registers_per_thread > arch.max_registers_per_thread:",
     "    if registers_per_thread >= arch.max_registers_per_thread:"),
    ("a block that exactly fills the register file refused",
     "    if per_warp * (-(-warps // parts) * parts) > arch.registers_per_block:",
     "    if per_warp * (-(-warps // parts) * parts) >= arch.registers_per_block:"),
    ("dynamic shared memory exactly at max_dynamic_shared gets 0 blocks",
     "(0 if dynamic_shared > max_dynamic_shared", "(0 if dynamic_shared >= max_dynamic_shared"),
    ("static_shared's limit one short: 48 KiB itself rejected",
     '"static_shared": (static_shared, 0, arch.shared_per_block),',
     '"static_shared": (static_shared, 0, arch.shared_per_block - 1),'),
    ("max_dynamic_shared's limit forgets the static shared memory",
     '"max_dynamic_shared": (max_dynamic_shared, 0, arch.shared_per_block_optin - static_shared),',
     '"max_dynamic_shared": (max_dynamic_shared, 0, arch.shared_per_block_optin),'),
    ("an out-of-range argument's error does not name it",
     'raise ValueError(f"{name} must be in {low}..', 'raise ValueError(f"out of range: must be in {low}..'),
    ("blocks_limited_by_shared_memory's carveout defaults to 0, not -1",
     "def blocks_limited_by_shared_memory(arch, shared_bytes_per_block, carveout=-1):",
     "def blocks_limited_by_shared_memory(arch, shared_bytes_per_block, carveout=0):"),
    ("occupancy's carveout defaults to 0, not -1", "              max_dynamic_shared=None, carveout=-1):",
     "              max_dynamic_shared=None, carveout=0):"),
]

ALTERNATIVES = [
    ("warps rounded up with (n + 31) // 32",
     "    warps = -(-block_size // arch.warp_size)        # a partial warp",
     "    warps = (block_size + arch.warp_size - 1) // arch.warp_size  # a partial warp"),
    ("errors name arguments in the docstring's words (registers, static, dynamic)",
     '              "registers_per_thread": (registers_per_thread, 0, arch.max_registers_per_thread),\n'
     '              "static_shared": (static_shared, 0, arch.shared_per_block),\n'
     '              "dynamic_shared": (dynamic_shared, 0, None),',
     '              "registers": (registers_per_thread, 0, arch.max_registers_per_thread),\n'
     '              "static": (static_shared, 0, arch.shared_per_block),\n'
     '              "dynamic": (dynamic_shared, 0, None),'),
    ("max_dynamic_shared checked before static_shared (a static above 48 KiB names max_dynamic_shared)",
     '              "static_shared": (static_shared, 0, arch.shared_per_block),\n'
     '              "dynamic_shared": (dynamic_shared, 0, None),\n'
     '              "max_dynamic_shared": (max_dynamic_shared, 0, arch.shared_per_block_optin - static_shared),',
     '              "max_dynamic_shared": (max_dynamic_shared, 0, arch.shared_per_block_optin - static_shared),\n'
     '              "static_shared": (static_shared, 0, arch.shared_per_block),\n'
     '              "dynamic_shared": (dynamic_shared, 0, None),'),
]
