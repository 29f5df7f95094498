"""Graded checks for Lab 06: occupancy.

06.1-06.4 are compared with the calculator, `kernellab.occupancy` (NVIDIA's cuda_occupancy.h
rules, checked against the header and an H200's driver), on seeded random configurations for
every modelled compute capability, after the edge cases that catch the usual mistakes, each
named with the rule it tests. 06.5 compiles the lab's kernel (ptxas; in a child process in the
simulator) and feeds its real registers to the calculator.
"""

import dataclasses

import pytest

from kernellab.gpu import checks, device
from kernellab import occupancy as calculator
from kernellab.grading.contract import clause
from kernellab.grading.tape import kernel_resources, record_launches

cuda = device.cuda()
ARCHS = list(calculator.ARCHITECTURES.values())
HOPPER = calculator.ARCHITECTURES[(9, 0)]
VOLTA = calculator.ARCHITECTURES[(7, 0)]
TWICE_THE_BLOCK = dataclasses.replace(HOPPER, name="Hopper with twice the register file",
                                      registers_per_sm=2 * HOPPER.registers_per_block)
"""An Architecture whose register file holds more than one block may take (as cc 3.7's did): the only
kind on which "0 when one block does not fit" differs from the per-sub-partition count."""
RANDOM_PER_ARCH = 300
CARVEOUTS = (-1, -1, 0, 10, 25, 50, 75, 100)
TARGET_OCCUPANCY = 0.75      # 06.5, on an H200
TARGET_CC = (9, 0)


def assert_all_match(student, reference, cases, explain=None):
    """Every (args, rule) case gives the calculator's answer; the first miss names its rule (and
    what `explain(args)` says about it)."""
    wrong = []
    for args, rule in cases:
        got, expected = student(*args), reference(*args)
        if got != expected:
            wrong.append((args, rule, got, expected))
    if wrong:
        args, rule, got, expected = wrong[0]
        shown = ", ".join(a.label if isinstance(a, calculator.Architecture) else repr(a) for a in args)
        raise AssertionError(f"{len(wrong)} of {len(cases)} cases differ from the calculator; first: "
                             f"{student.__name__}({shown}) returned {got!r}, expected {expected!r} "
                             f"[{rule}]" + (f"; {explain(args)}" if explain else ""))


@pytest.mark.points(1)
def test_warps_limit(lab, rng):
    """06.1: blocks per SM allowed by warp slots, for every cc."""
    cases = [((HOPPER, 33), "a partial warp takes a whole warp's slot: 33 threads are 2 warps"),
             ((HOPPER, 1), "1 thread is 1 warp"),
             ((HOPPER, 1025), "a block larger than 1024 threads cannot run: 0"),
             ((HOPPER, 1024), "a block of exactly 1024 threads is not larger than a block may be: 2"),
             ((HOPPER, 64), "a whole number of warps takes no extra slot: 64 threads are 2 warps"),
             ((calculator.ARCHITECTURES[(8, 6)], 640), "cc 8.6 holds 48 warps, not 64")]
    for arch in ARCHS:
        for block in rng.integers(1, arch.max_threads_per_block + 1, RANDOM_PER_ARCH):
            cases.append(((arch, int(block)), "random"))
    assert_all_match(lab.blocks_limited_by_warps, calculator.blocks_limited_by_warps, cases)


@pytest.mark.points(2)
def test_register_limit(lab, rng):
    """06.2: blocks per SM allowed by the register file (256-register units, 4 sub-partitions)."""
    cases = [((HOPPER, 64, 40), "4 sub-partitions: 4 * (16384 // 1280) = 48 warps, not 65536 // 1280 = 51"),
             ((HOPPER, 256, 33), "registers go to a warp in units of 256: 33 * 32 = 1056 takes 1280"),
             ((HOPPER, 1024, 65), "a 1024-thread block with 65 registers does not fit at all: 0"),
             ((HOPPER, 256, 0), "a kernel that uses no registers is not limited by them: UNLIMITED"),
             ((HOPPER, 128, 256), "more than 255 registers per thread cannot run: 0"),
             ((HOPPER, 32, 255), "exactly 255 registers per thread is allowed: 255 * 32 takes 8192, 8 warps"),
             ((HOPPER, 1024, 64), "a block that exactly fills the register file fits: 32 warps * 2048 = 65536, 1"),
             ((TWICE_THE_BLOCK, 1024, 65), "a register file twice the per-block limit: 32 warps * 2304 = 73728 "
                                           "registers do not fit one block's 65536: 0"),
             ((TWICE_THE_BLOCK, 544, 120), "17 warps are checked as 20 (4 sub-partitions): 20 * 3840 > 65536: 0"),
             ((TWICE_THE_BLOCK, 1024, 64), "a block fits its 65536, and the file holds 2 of them")]
    for arch in ARCHS:
        blocks = rng.integers(1, arch.max_threads_per_block + 1, RANDOM_PER_ARCH)
        registers = rng.integers(1, arch.max_registers_per_thread + 1, RANDOM_PER_ARCH)
        cases += [((arch, int(b), int(r)), "random") for b, r in zip(blocks, registers)]
    assert_all_match(lab.blocks_limited_by_registers, calculator.blocks_limited_by_registers, cases)


@pytest.mark.points(2)
def test_shared_memory_limit(lab, rng):
    """06.3: blocks per SM allowed by shared memory (1 KiB reserved per block, 128 B granularity)."""
    cases = [((HOPPER, 0, -1), "no shared memory still takes the 1 KiB reservation: 228 KiB / 1 KiB"),
             ((HOPPER, 1, -1), "1 B takes the 1 KiB reservation plus one 128 B unit: 1152 B"),
             ((HOPPER, 16 * 1024 + 129, -1), "round to the 128 B allocation unit, after adding 1 KiB"),
             ((VOLTA, 0, -1), "cc 7.x reserves nothing: no shared memory, no limit (UNLIMITED)"),
             ((VOLTA, 1000, -1), "cc 7.x allocates in 256 B units"),
             ((HOPPER, 40_000, 10), "a carveout too small for one block is bumped up (shared_per_sm)"),
             ((HOPPER, HOPPER.shared_per_block_optin, -1), "the largest block (227 KiB + 1 KiB reserved) fits once")]
    for arch in ARCHS:
        sizes = rng.integers(0, arch.shared_per_block_optin + 1, RANDOM_PER_ARCH)
        small = rng.integers(0, 4096, RANDOM_PER_ARCH)
        carveouts = rng.choice(CARVEOUTS, RANDOM_PER_ARCH)
        cases += [((arch, int(s), int(c)), "random") for s, c in zip(sizes, carveouts)]
        cases += [((arch, int(s), int(c)), "random, small") for s, c in zip(small, carveouts)]
    assert_all_match(lab.blocks_limited_by_shared_memory, calculator.blocks_limited_by_shared_memory,
                     cases)
    for arch, shared in ((HOPPER, 5000), (VOLTA, 20_000)):
        got, expected = lab.blocks_limited_by_shared_memory(arch, shared), calculator.blocks_limited_by_shared_memory(arch, shared)
        assert got == expected, (f"blocks_limited_by_shared_memory({arch.label}, {shared}) returned {got!r}, "
                                 f"expected {expected!r}: carveout's default is -1 (the driver's preference)")


def random_configuration(rng, arch):
    """Arguments of occupancy(): mostly plain launches, with every option drawn often enough."""
    static = int(rng.choice([0, int(rng.integers(0, arch.shared_per_block + 1))]))
    raised = rng.random() < 0.3
    max_dynamic = int(rng.integers(0, arch.shared_per_block_optin - static + 1)) if raised else None
    dynamic_cap = (max_dynamic if raised else arch.shared_per_block - static) + 2048
    dynamic = int(rng.choice([0, int(rng.integers(0, dynamic_cap + 1))]))
    return (f"sm_{arch.cc[0]}{arch.cc[1]}", int(rng.integers(1, arch.max_threads_per_block + 1)),
            int(rng.integers(0, arch.max_registers_per_thread + 1)), static, dynamic, max_dynamic,
            int(rng.choice(CARVEOUTS)))


def summary(result):
    return (result.active_blocks, result.active_warps, round(result.occupancy, 9), tuple(result.limiters))


def limits_text(args):
    """Each limiter's blocks per SM for one configuration on its architecture, from the calculator."""
    limits = calculator.occupancy(*args).blocks_by_limit
    return "the calculator's blocks per SM allowed by " + ", ".join(
        f"{name} {'(no limit)' if count == calculator.UNLIMITED else count}" for name, count in limits.items())


@pytest.mark.points(3)
def test_occupancy_matches_calculator(lab, rng):
    """06.4: blocks, warps, occupancy and limiters equal the calculator's on random configurations."""
    cases = [(((9, 0), 256, 32, 0, 0, None, -1), "full occupancy on cc 9.0: warps and registers bind"),
             (((9, 0), 128, 20, 0, 50_000, None, -1), "dynamic shared above the 48 KiB default: 0 blocks"),
             (((9, 0), 128, 20, 0, 50_000, 100_000, -1), "...unless the kernel raised its max-dynamic"),
             (("8.6", 96, 30, 2048, 0, None, 0), "carveout 0 is bumped to a size that fits a block"),
             (((7, 5), 32, 16, 0, 0, None, -1), "cc 7.5: the 16-block cap binds"),
             (((9, 0), 128, 20, 0, 50_000, 50_000, -1), "dynamic exactly at max_dynamic_shared is not more: it runs"),
             (((9, 0), 128, 20, 1024, 48 * 1024 - 1024, None, -1),
              "dynamic exactly at the default (48 KiB - static) is not more: it runs"),
             (((9, 0), 1024, 255, 48 * 1024, 0, None, 100), "every argument at its upper limit is accepted"),
             (((9, 0), 1, 0, 0, 0, 0, -1), "every argument at its lower limit is accepted"),
             (((9, 0), 64, 32, 1024, 0, 232_448 - 1024, -1), "max_dynamic_shared at 227 KiB - static is accepted")]
    for arch in ARCHS:
        cases += [(random_configuration(rng, arch), "random") for _ in range(RANDOM_PER_ARCH)]

    def student(*args):
        return summary(lab.occupancy(*args))

    def expected(*args):
        return summary(calculator.occupancy(*args))

    student.__name__ = "occupancy"
    assert_all_match(student, expected, cases, explain=limits_text)
    for defaults in (((9, 0), 256, 32), ((8, 6), 96, 40, 4096)):   # static, dynamic, max_dynamic, carveout
        assert summary(lab.occupancy(*defaults)) == summary(calculator.occupancy(*defaults)), (
            f"occupancy{defaults} with the other arguments at their defaults returned "
            f"{lab.occupancy(*defaults)}; expected {calculator.occupancy(*defaults)}")


@pytest.mark.points(1)
def test_occupancy_rejects_bad_input(lab):
    """06.4: impossible configurations raise ValueError naming the argument (in the docstring's
    words: block_size, registers, static, dynamic, carveout, max_dynamic_shared), one past each
    limit, not a wrong number (static above 48 KiB also takes the default max_dynamic_shared below 0:
    naming either will do); an unknown cc raises ValueError."""
    bad = [(dict(block_size=0), "block_size"), (dict(block_size=1025), "block_size"),
           (dict(registers_per_thread=256), "registers"), (dict(registers_per_thread=-1), "registers"),
           (dict(static_shared=48 * 1024 + 1), "static|max_dynamic"), (dict(static_shared=-1), "static"),
           (dict(dynamic_shared=-1), "dynamic"), (dict(carveout=101), "carveout"),
           (dict(carveout=-2), "carveout"), (dict(max_dynamic_shared=227 * 1024 + 1), "max_dynamic_shared"),
           # no shared memory on a Turing part: no given helper checks the carveout there
           (dict(cc=(7, 5), carveout=101), "carveout"), (dict(cc=(7, 5), carveout=-2), "carveout"),
           (dict(static_shared=1024, max_dynamic_shared=227 * 1024 - 1024 + 1), "max_dynamic_shared")]
    base = dict(cc=(9, 0), block_size=256, registers_per_thread=32)
    for override, name in bad:
        with pytest.raises(ValueError, match=name):
            lab.occupancy(**{**base, **override})
    with pytest.raises(ValueError):
        lab.occupancy(**{**base, "cc": (6, 1)})


@pytest.mark.points(4)
@pytest.mark.simulator   # on a GPU too: a missing barrier and a read past the tile show here only
def test_tuned_linear_relu(lab, rng):
    """06.5: TUNED gives linear_relu_kernel >= 75% occupancy on an H200 and still computes relu(x @ w + b)."""
    config = lab.TUNED
    recorded = getattr(lab.linear_relu_kernel, "_kernellab_options", {}).get("max_registers")
    assert recorded == config.max_registers, (
        f"linear_relu_kernel was compiled with max_registers={recorded}, but TUNED says "
        f"{config.max_registers}: keep linear_relu_kernel = linear_relu_kernel_for(TUNED)")
    found = kernel_resources(lab.linear_relu_kernel, None, cc=TARGET_CC)
    result = calculator.occupancy(TARGET_CC, config.block_size, found.registers_per_thread,
                                  found.static_shared_bytes)
    assert result.occupancy >= TARGET_OCCUPANCY, (
        f"{config}: {found.registers_per_thread} registers per thread and {found.static_shared_bytes} B "
        f"of shared memory per block give {result}; the target is {TARGET_OCCUPANCY:.0%}")

    m, k, n = (checks.awkward_size(rng, 32, 1, 2), checks.awkward_size(rng, 32, 1, 3),
               checks.awkward_size(rng, 16, 1, 4))
    x, w, b = checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n)), checks.nonzero(rng, n)
    expected = lab.linear_relu_reference(x, w, b)
    out = checks.poisoned((m, n))
    with record_launches() as launches:
        lab.linear_relu(cuda.to_device(x), cuda.to_device(w), cuda.to_device(b), out=out, config=config)
    checks.assert_launched(launches, "linear_relu_kernel", count=1)
    assert launches[0].block == (config.block_size, 1, 1), f"launched with block {launches[0].block}"
    checks.assert_matches(out, expected, rtol=1e-5, what=f"linear_relu with {config}")


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

CONTRACT = [
    clause("blocks_limited_by_warps", "Blocks per SM the warp slots allow (0 when the block is larger than a block "
           "may be).", "test_warps_limit"),
    clause("blocks_limited_by_warps", "06.1: how many blocks of block_size threads the SM's warp slots hold.",
           "test_warps_limit"),
    clause("blocks_limited_by_warps", "0 for a block larger than a block may be (arch.max_threads_per_block)",
           "test_warps_limit"),
    clause("blocks_limited_by_warps", "a partial warp takes a whole warp slot.", "test_warps_limit"),
    clause("blocks_limited_by_registers", "Blocks per SM the register file allows", "test_register_limit"),
    clause("blocks_limited_by_registers", "UNLIMITED for a kernel that uses no registers.", "test_register_limit"),
    clause("blocks_limited_by_registers", "06.2: how many blocks the register file holds, by the rules of notebook "
           "06's section 2 (registers granted per warp in units; each warp's registers in one sub-partition).",
           "test_register_limit"),
    clause("blocks_limited_by_registers", "0 above arch.max_registers_per_thread or when one block does not fit",
           "test_register_limit"),
    clause("blocks_limited_by_registers", "UNLIMITED when the kernel uses no registers.", "test_register_limit"),
    clause("blocks_limited_by_shared_memory", "Blocks per SM shared memory allows, for static + dynamic bytes per "
           "block.", "test_shared_memory_limit", "test_occupancy_matches_calculator"),
    clause("blocks_limited_by_shared_memory", "`shared_per_sm(arch, carveout, allocated)` (given) is the shared "
           "memory the driver configures on the SM: the carveout rounded up to a supported size, bumped up when "
           "one block would not fit.", "test_shared_memory_limit"),
    clause("blocks_limited_by_shared_memory", "06.3: how many blocks the SM's shared memory holds, counting what the "
           "hardware adds to each block (notebook 06, section 2).", "test_shared_memory_limit"),
    clause("blocks_limited_by_shared_memory", "UNLIMITED when a block takes no shared memory at all.",
           "test_shared_memory_limit"),
    clause("occupancy", "Blocks, warps and occupancy of one SM for a kernel, and which limits set them.",
           "test_occupancy_matches_calculator"),
    clause("occupancy", "max_dynamic_shared is the kernel's MAX_DYNAMIC_SHARED_SIZE_BYTES attribute (None: the "
           "default, 48 KiB - static); a launch asking for more dynamic shared memory gets 0 blocks.",
           "test_occupancy_matches_calculator"),
    clause("occupancy", "06.4: the SM's resident blocks, warps and occupancy for this kernel, and every limit that "
           "sets them (in the order of LIMITERS).", "test_occupancy_matches_calculator"),
    clause("occupancy", "architecture(cc) raises ValueError for an unknown cc", "test_occupancy_rejects_bad_input"),
    clause("occupancy", "an argument out of range (block_size 1..1024, registers 0..255, static 0..48 KiB, dynamic "
           ">= 0, carveout -1..100, max_dynamic_shared up to arch.shared_per_block_optin - static) raises "
           "ValueError naming it", "test_occupancy_rejects_bad_input", "test_occupancy_matches_calculator"),
    clause("occupancy", "a launch asking for more dynamic shared memory than max_dynamic_shared gets 0 blocks.",
           "test_occupancy_matches_calculator"),
    clause("TUNED", "06.5: a configuration (block size, register cap, tile depth) that gives linear_relu_kernel at "
           "least 75% occupancy on an H200 (cc 9.0);", "test_tuned_linear_relu"),
    clause("TUNED", "it must still compute relu(x @ w + b).", "test_tuned_linear_relu"),
]
