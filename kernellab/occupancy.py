"""How many blocks of a kernel fit on one SM: the CUDA driver's occupancy rule, in Python.

`occupancy()` reproduces `cuOccupancyMaxActiveBlocksPerMultiprocessor` for the compute
capabilities in `ARCHITECTURES`. The specification is NVIDIA's `cuda_occupancy.h` (which equalled
the H200 driver on 1.5 M configurations, shared/NOTES.md); tests/instruments/test_occupancy.py compiles that
header and checks this module against it. The rule is the minimum of four limits, each a
separate function so Lab 06 can have students write them and compare:

- warps:          `blocks_limited_by_warps`          (a partial warp costs a whole warp)
- registers:      `blocks_limited_by_registers`      (per warp, in 256-register units, per sub-partition)
- shared memory:  `blocks_limited_by_shared_memory`  (1 KiB reserved per block on cc >= 8.0, rounded
                                                     to the allocation unit; the carveout rounds up)
- blocks:         the architecture's resident-block cap

The header also has a barrier limit (cc >= 9.0) and a virtual-resource limit (cc >= 10.0). Numba
kernels use one barrier, which allows at least as many blocks as the block cap, and no virtual
resources, so neither can bind here and neither is modelled. `__launch_bounds__` does not enter.

This module is pure arithmetic: no GPU, no Numba, no other kernellab module.
`kernellab.kernels.driver.driver_active_blocks` asks a real driver.
"""

from __future__ import annotations

import dataclasses
import numbers
import re
from typing import Callable, NamedTuple, Union

KiB = 1024
UNLIMITED = 2**31 - 1
"""A limit that does not bind (0 registers, or no shared memory on cc 7.x): the header's INT_MAX."""

LIMITERS = ("warps", "registers", "shared_memory", "blocks")


@dataclasses.dataclass(frozen=True)
class Architecture:
    """Per-SM and per-block limits of one compute capability (shared/NOTES.md, cuda_occupancy.h)."""

    cc: tuple[int, int]
    name: str
    max_threads_per_sm: int
    max_blocks_per_sm: int
    shared_per_sm: int                  # bytes, the largest carveout
    shared_per_block_optin: int         # bytes a kernel may use after raising its max-dynamic attribute
    reserved_shared_per_block: int      # bytes the driver keeps for itself in every block
    shared_allocation_unit: int         # bytes; each block's shared memory is rounded up to this
    carveouts: tuple[int, ...]          # bytes: the shared-memory sizes the SM can be configured to
    warp_size: int = 32
    max_threads_per_block: int = 1024
    registers_per_sm: int = 64 * KiB
    registers_per_block: int = 64 * KiB
    max_registers_per_thread: int = 255
    register_allocation_unit: int = 256  # registers, granted to a warp at a time
    register_sub_partitions: int = 4    # the register file is split across these; a warp lives in one
    shared_per_block: int = 48 * KiB    # default per-block limit, and the most static shared memory

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    @property
    def label(self) -> str:
        return f"cc {self.cc[0]}.{self.cc[1]} ({self.name})"


def _kib(*sizes: int) -> tuple[int, ...]:
    return tuple(size * KiB for size in sizes)


_AMPERE_100 = _kib(0, 8, 16, 32, 64, 100, 132, 164)
_AMPERE_GA10X = _kib(0, 8, 16, 32, 64, 100)
_HOPPER = _kib(0, 8, 16, 32, 64, 100, 132, 164, 196, 228)

ARCHITECTURES: dict[tuple[int, int], Architecture] = {
    a.cc: a for a in (
        Architecture((7, 0), "Volta", 2048, 32, 96 * KiB, 96 * KiB, 0, 256, _kib(0, 8, 16, 32, 64, 96)),
        Architecture((7, 5), "Turing", 1024, 16, 64 * KiB, 64 * KiB, 0, 256, _kib(32, 64)),
        Architecture((8, 0), "Ampere A100", 2048, 32, 164 * KiB, 163 * KiB, KiB, 128, _AMPERE_100),
        Architecture((8, 6), "Ampere GA10x", 1536, 16, 100 * KiB, 99 * KiB, KiB, 128, _AMPERE_GA10X),
        Architecture((8, 7), "Ampere Orin", 1536, 16, 164 * KiB, 163 * KiB, KiB, 128, _AMPERE_100),
        Architecture((8, 9), "Ada", 1536, 24, 100 * KiB, 99 * KiB, KiB, 128, _AMPERE_GA10X),
        Architecture((9, 0), "Hopper", 2048, 32, 228 * KiB, 227 * KiB, KiB, 128, _HOPPER),
        Architecture((10, 0), "Blackwell B200", 2048, 32, 228 * KiB, 227 * KiB, KiB, 128, _HOPPER),
        Architecture((12, 0), "Blackwell GeForce", 1536, 24, 100 * KiB, 99 * KiB, KiB, 128, _AMPERE_GA10X),
    )
}

CCLike = Union[tuple, list, str, Architecture]
_CC_TEXT = re.compile(r"^(?:sm_|compute_)?(\d+)(?:\.(\d+))?[af]?$")


def parse_cc(cc: CCLike) -> tuple[int, int]:
    """(9, 0) from (9, 0), "9.0", "sm_90", "sm_90a", "compute_90" or "90" (the last digit is the minor)."""
    if isinstance(cc, Architecture):
        return cc.cc
    if isinstance(cc, (tuple, list)) and len(cc) in (2, 3) and all(_is_int(v) for v in cc[:2]):
        return int(cc[0]), int(cc[1])            # a third item is numba-cuda's 'a' suffix
    if isinstance(cc, str):
        match = _CC_TEXT.match(cc.strip().lower())
        if match:
            major, minor = match.groups()
            if minor is not None:
                return int(major), int(minor)
            if len(major) >= 2:
                return int(major[:-1]), int(major[-1])
    raise ValueError(f"cc must be a compute capability such as (9, 0), '9.0' or 'sm_90', not {cc!r}")


def architecture(cc: CCLike) -> Architecture:
    """The `Architecture` for any spelling `parse_cc` accepts; ValueError for one not modelled."""
    if isinstance(cc, Architecture):
        return cc
    key = parse_cc(cc)
    if key not in ARCHITECTURES:
        known = ", ".join(f"{a}.{b}" for a, b in ARCHITECTURES)
        raise ValueError(f"cc {key[0]}.{key[1]} is not modelled; supported: {known}")
    return ARCHITECTURES[key]


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_int(name: str, value, low: int, high: int | None = None) -> int:
    if not _is_int(value):
        raise ValueError(f"{name} must be an integer, not {type(value).__name__} {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {span}, got {value}")
    return value


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


# --- the four limits --------------------------------------------------------------------------

def warps_per_block(arch: CCLike, block_size: int) -> int:
    """Warps a block occupies: a partial warp holds a whole warp's slot and registers."""
    arch = architecture(arch)
    return -(-block_size // arch.warp_size)


def blocks_limited_by_warps(arch: CCLike, block_size: int) -> int:
    """Blocks per SM allowed by the SM's warp slots."""
    arch = architecture(arch)
    if block_size > arch.max_threads_per_block:
        return 0
    return arch.max_warps_per_sm // warps_per_block(arch, block_size)


def registers_per_warp(arch: CCLike, registers_per_thread: int) -> int:
    """Registers granted to one warp: 32 threads' worth, rounded up to the 256-register unit."""
    arch = architecture(arch)
    return _round_up(registers_per_thread * arch.warp_size, arch.register_allocation_unit)


def blocks_limited_by_registers(arch: CCLike, block_size: int, registers_per_thread: int) -> int:
    """Blocks per SM allowed by the register file.

    Each of the 4 sub-partitions holds a quarter of the registers and a warp's registers sit in
    one sub-partition, so the SM holds 4 * floor((65536 / 4) / regs_per_warp) warps, which can be
    fewer than floor(65536 / regs_per_warp). A block must also fit the per-block register limit,
    which the hardware checks as if its warps were rounded up to a multiple of 4.
    """
    arch = architecture(arch)
    if registers_per_thread > arch.max_registers_per_thread:
        return 0
    per_warp = registers_per_warp(arch, registers_per_thread)
    if per_warp == 0:
        return UNLIMITED
    warps = warps_per_block(arch, block_size)
    as_checked = per_warp * _round_up(warps, arch.register_sub_partitions)
    if as_checked > arch.registers_per_block:
        return 0
    warps_per_sub_partition = (arch.registers_per_sm // arch.register_sub_partitions) // per_warp
    return warps_per_sub_partition * arch.register_sub_partitions // warps


def shared_allocation(arch: CCLike, shared_bytes_per_block: int) -> int:
    """Shared memory the SM sets aside for one block: the request plus the driver's reservation
    (1 KiB on cc >= 8.0), rounded up to the allocation unit (128 B; 256 B on cc 7.x). The
    reservation comes before the rounding, so a kernel with no shared memory still takes 1 KiB."""
    arch = architecture(arch)
    return _round_up(shared_bytes_per_block + arch.reserved_shared_per_block, arch.shared_allocation_unit)


def _supported_carveout(arch: Architecture, size: int) -> int:
    """The smallest shared-memory size the SM supports that holds `size` bytes."""
    for option in arch.carveouts:
        if option >= size:
            return option
    raise ValueError(f"{size} bytes of shared memory exceed the largest carveout on {arch.label}")


def shared_per_sm(arch: CCLike, carveout: int = -1, allocated_per_block: int = 0) -> int:
    """Shared memory the driver configures on the SM for a launch.

    carveout -1 (the default) asks for the most shared memory; 0..100 asks for that percentage
    of the maximum, rounded up to a size the SM supports. When one block would not fit in the
    preferred size, the driver takes the smallest supported size that holds one block instead.
    """
    arch = architecture(arch)
    carveout = _check_int("carveout", carveout, -1, 100)
    wanted = arch.shared_per_sm if carveout == -1 else carveout * arch.shared_per_sm // 100
    preferred = _supported_carveout(arch, wanted)
    if preferred >= allocated_per_block:
        return preferred
    return _supported_carveout(arch, allocated_per_block)


def blocks_limited_by_shared_memory(arch: CCLike, shared_bytes_per_block: int, carveout: int = -1) -> int:
    """Blocks per SM allowed by shared memory, for `shared_bytes_per_block` = static + dynamic
    bytes the kernel uses. UNLIMITED when a block takes no shared memory at all (cc 7.x only)."""
    arch = architecture(arch)
    allocated = shared_allocation(arch, shared_bytes_per_block)
    if allocated == 0:
        return UNLIMITED
    return shared_per_sm(arch, carveout, allocated) // allocated


# --- the calculator ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Occupancy:
    """One kernel configuration's occupancy on one SM, with what limits it.

    `limiters` lists every limit equal to the result, in the order of `LIMITERS`;
    `blocks_by_limit` gives each limit's block count (UNLIMITED where it does not bind).
    """

    cc: tuple[int, int]
    block_size: int
    active_blocks: int
    active_warps: int
    max_warps: int
    occupancy: float
    limiters: tuple[str, ...]
    blocks_by_limit: dict = dataclasses.field(hash=False)
    warps_per_block: int
    registers_per_block: int            # registers allocated to a block
    shared_per_block: int               # bytes of shared memory allocated to a block, reservation included
    carveout_bytes: int                 # shared memory per SM the driver would configure

    def __str__(self) -> str:
        return (f"cc {self.cc[0]}.{self.cc[1]}, block {self.block_size}: {self.active_blocks} blocks/SM, "
                f"{self.active_warps}/{self.max_warps} warps ({self.occupancy:.0%}), "
                f"limited by {' and '.join(self.limiters)}")


def occupancy(cc: CCLike, block_size: int, registers_per_thread: int, static_shared: int = 0,
              dynamic_shared: int = 0, max_dynamic_shared: int | None = None,
              carveout: int = -1) -> Occupancy:
    """Active blocks per SM for a kernel, as cuOccupancyMaxActiveBlocksPerMultiprocessor reports.

    static_shared/dynamic_shared are bytes per block. max_dynamic_shared is the kernel's
    MAX_DYNAMIC_SHARED_SIZE_BYTES attribute; None is the driver's default for a kernel that never
    raised it (48 KiB - static). A launch asking for more dynamic shared memory than that gets 0.
    carveout is cudaFuncAttributePreferredSharedMemoryCarveout: -1 (default) or a percentage.
    """
    arch = architecture(cc)
    block_size = _check_int("block_size", block_size, 1, arch.max_threads_per_block)
    registers_per_thread = _check_int("registers_per_thread", registers_per_thread, 0,
                                      arch.max_registers_per_thread)
    static_shared = _check_int("static_shared", static_shared, 0, arch.shared_per_block)
    dynamic_shared = _check_int("dynamic_shared", dynamic_shared, 0)
    max_dynamic_shared = _max_dynamic(arch, static_shared, max_dynamic_shared)
    carveout = _check_int("carveout", carveout, -1, 100)

    warps = warps_per_block(arch, block_size)
    allocated = shared_allocation(arch, static_shared + dynamic_shared)
    # The driver refuses a max-dynamic attribute beyond the opt-in limit (checked above), so the
    # header's per-block shared limit can only be exceeded through this attribute check.
    if dynamic_shared > max_dynamic_shared:
        by_shared = 0
        carveout_bytes = shared_per_sm(arch, carveout)
    else:
        by_shared = blocks_limited_by_shared_memory(arch, static_shared + dynamic_shared, carveout)
        carveout_bytes = shared_per_sm(arch, carveout, allocated)
    limits = {
        "warps": blocks_limited_by_warps(arch, block_size),
        "registers": blocks_limited_by_registers(arch, block_size, registers_per_thread),
        "shared_memory": by_shared,
        "blocks": arch.max_blocks_per_sm,
    }
    active = min(limits.values())
    return Occupancy(
        cc=arch.cc,
        block_size=block_size,
        active_blocks=active,
        active_warps=active * warps,
        max_warps=arch.max_warps_per_sm,
        occupancy=active * warps / arch.max_warps_per_sm,
        limiters=tuple(name for name in LIMITERS if limits[name] == active),
        blocks_by_limit=limits,
        warps_per_block=warps,
        registers_per_block=registers_per_warp(arch, registers_per_thread) * warps,
        shared_per_block=allocated,
        carveout_bytes=carveout_bytes,
    )


def _max_dynamic(arch: Architecture, static_shared: int, max_dynamic_shared: int | None) -> int:
    """The max-dynamic attribute: default 48 KiB - static; the driver refuses more than opt-in - static."""
    if max_dynamic_shared is None:
        return arch.shared_per_block - static_shared
    return _check_int("max_dynamic_shared", max_dynamic_shared, 0,
                      arch.shared_per_block_optin - static_shared)


class PotentialBlockSize(NamedTuple):
    """cudaOccupancyMaxPotentialBlockSize's answer: the block size with the most resident threads
    per SM (the largest such size on a tie), and the grid that fills `sm_count` SMs with it."""

    min_grid_size: int
    block_size: int


def max_potential_block_size(cc: CCLike, registers_per_thread: int, static_shared: int = 0,
                             dynamic_shared: int | Callable[[int], int] = 0, block_size_limit: int = 0,
                             max_dynamic_shared: int | None = None, carveout: int = -1,
                             *, sm_count: int = 1) -> PotentialBlockSize:
    """The header's launch configurator (cudaOccMaxPotentialOccupancyBlockSize[VariableSMem]).

    Tries block sizes from the limit down in steps of a warp and keeps the one with the most
    active threads per SM, stopping early at full occupancy. `dynamic_shared` is bytes per block
    or a function of the block size. `block_size_limit` 0 means no limit beyond the device's.
    Returns (min_grid_size, block_size) with min_grid_size = active blocks per SM * sm_count: with
    the default sm_count=1 it is the per-SM figure; pass the device's SM count for the runtime's
    whole-device figure. (0, 0) when no block size can run.
    """
    arch = architecture(cc)
    sm_count = _check_int("sm_count", sm_count, 1)
    limit = _check_int("block_size_limit", block_size_limit, 0)
    limit = arch.max_threads_per_block if limit == 0 else min(limit, arch.max_threads_per_block)
    best_threads, best = 0, PotentialBlockSize(0, 0)
    for aligned in range(_round_up(limit, arch.warp_size), 0, -arch.warp_size):
        block = min(limit, aligned)
        dynamic = dynamic_shared(block) if callable(dynamic_shared) else dynamic_shared
        if callable(dynamic_shared) and not (_is_int(dynamic) and dynamic >= 0):
            raise ValueError(f"dynamic_shared({block}) must return a non-negative integer, "
                             f"not {dynamic!r}")
        result = occupancy(arch, block, registers_per_thread, static_shared, dynamic,
                           max_dynamic_shared, carveout)
        threads = block * result.active_blocks
        if threads > best_threads:
            best_threads, best = threads, PotentialBlockSize(result.active_blocks * sm_count, block)
        if best_threads == arch.max_threads_per_sm:
            break
    return best

