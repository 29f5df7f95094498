"""Graded checks for Lab 06: occupancy.

06.1-06.4 are compared with the calculator, `kernellab.occupancy` (NVIDIA's cuda_occupancy.h
rules, checked against the header and an H200's driver), on seeded random configurations for
every modelled compute capability, after the edge cases that catch the usual mistakes, each
named with the rule it tests. 06.5 compiles the lab's kernel (ptxas; in a child process in the
simulator) and feeds its real registers to the calculator.
"""

import pytest

from kernellab.gpu import checks, device
from kernellab import occupancy as calculator
from kernellab.grading.tape import kernel_resources, record_launches

cuda = device.cuda()
ARCHS = list(calculator.ARCHITECTURES.values())
HOPPER = calculator.ARCHITECTURES[(9, 0)]
VOLTA = calculator.ARCHITECTURES[(7, 0)]
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
             ((HOPPER, 128, 256), "more than 255 registers per thread cannot run: 0")]
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
             ((HOPPER, 40_000, 10), "a carveout too small for one block is bumped up (shared_per_sm)")]
    for arch in ARCHS:
        sizes = rng.integers(0, arch.shared_per_block_optin + 1, RANDOM_PER_ARCH)
        small = rng.integers(0, 4096, RANDOM_PER_ARCH)
        carveouts = rng.choice(CARVEOUTS, RANDOM_PER_ARCH)
        cases += [((arch, int(s), int(c)), "random") for s, c in zip(sizes, carveouts)]
        cases += [((arch, int(s), int(c)), "random, small") for s, c in zip(small, carveouts)]
    assert_all_match(lab.blocks_limited_by_shared_memory, calculator.blocks_limited_by_shared_memory,
                     cases)


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
             (((7, 5), 32, 16, 0, 0, None, -1), "cc 7.5: the 16-block cap binds")]
    for arch in ARCHS:
        cases += [(random_configuration(rng, arch), "random") for _ in range(RANDOM_PER_ARCH)]

    def student(*args):
        return summary(lab.occupancy(*args))

    def expected(*args):
        return summary(calculator.occupancy(*args))

    student.__name__ = "occupancy"
    assert_all_match(student, expected, cases, explain=limits_text)


@pytest.mark.points(1)
def test_occupancy_rejects_bad_input(lab):
    """06.4: impossible configurations raise ValueError, not a wrong number."""
    bad = [dict(block_size=0), dict(block_size=1025), dict(registers_per_thread=256),
           dict(registers_per_thread=-1), dict(static_shared=48 * 1024 + 1), dict(dynamic_shared=-1),
           dict(carveout=101), dict(max_dynamic_shared=227 * 1024 + 1), dict(cc=(6, 1))]
    base = dict(cc=(9, 0), block_size=256, registers_per_thread=32)
    for override in bad:
        with pytest.raises(ValueError):
            lab.occupancy(**{**base, **override})


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
