"""Graded checks for Lab 02: vertical fusion.

Each test draws fresh random inputs (seed printed), uses sizes that are not multiples of the
block, poisons outputs before the launch, and checks that a kernel did the work. The traffic
tests count, in the simulator, every global load and store the kernels make.
"""

import numpy as np
import pytest
from hypothesis import example

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect, expect_coalesced, expect_only
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, one_of, sizes
from kernellab.grading.tape import meter, record_launches
from kernellab.gpu.traffic import Ledger

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child
INPUTS = ("x", "w", "b", "r")


def chain_case(lab, rng, block=None, with_mask=False, n=None):
    """Device inputs (named as the meter names them), p, seed and the float64 reference.

    n (unless given) is 1-2 blocks of `block`, or 100-300 elements, never a multiple of 32.
    """
    n = n or (checks.awkward_size(rng, block, 1, 3) if block else checks.awkward_size(rng, 100, 1, 3))
    host = {name: checks.nonzero(rng, n) for name in INPUTS}
    p = float(rng.uniform(0.2, 0.5))
    seed = int(rng.integers(0, 2**32))
    # a mask keeps where its byte is not 0 (dropout_keep): kept bytes are any of 1 to 255
    mask = np.where(rng.random(n) >= p, rng.integers(1, 256, n), 0).astype(np.uint8) if with_mask else None
    if with_mask:
        host["mask"] = mask
    ref = lab.reference_chain(*(host[k] for k in INPUTS), p, seed, mask)
    return {k: cuda.to_device(v) for k, v in host.items()}, p, seed, ref


def magnitudes(dev, p):
    """What each element's rounding is measured against: the chain's terms without their signs,
    (|x w| + |b|) / (1 - p) + |r| (a result that cancels to near zero is rounded no worse)."""
    x, w, b, r = (np.abs(dev[name].copy_to_host().astype(np.float64)) for name in ("x", "w", "b", "r"))
    return (x * w + b) / (1.0 - p) + r


def true_fused_ledger(n, with_mask):
    ledger = Ledger("true fused")
    for name in INPUTS:
        ledger.add("chain", name, reads=n)
    if with_mask:
        ledger.add("chain", "mask", reads=n, itemsize=1)
    return ledger.add("chain", "out", writes=n)


def run_chain(launcher, dev, p, seed, out, **kwargs):
    return launcher(*(dev[k] for k in INPUTS), p, seed, mask=dev.get("mask"), out=out, **kwargs)


def metered_chain(lab, rng, launcher, with_mask, n=None, trace=(), **kwargs):
    """One run of `launcher` under the traffic meter (tracing `trace`): (the count, the output,
    the reference)."""
    dev, p, seed, ref = chain_case(lab, rng, block=kwargs.get("block"), with_mask=with_mask, n=n)
    out = checks.poisoned(ref.shape)
    with meter(**dev, out=out, trace=trace) as traffic:
        run_chain(launcher, dev, p, seed, out, **kwargs)
    return traffic, out, ref


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
@drawn(examples=4, n=sizes(block=128, most=400), block=one_of(32, None, 96, 256))
@example(n=1, block=None)
def test_fused_chain_matches_numpy(lab, rng, n, block):
    """fused_chain computes dropout(relu(x*w + b)) + r with the generator, in one launch, for any
    size and block (drawn: awkward sizes, 1, exact multiples of the block, the default block)."""
    dev, p, seed, ref = chain_case(lab, rng, n=n)
    out = checks.poisoned(ref.shape)
    kwargs = {} if block is None else {"block": block}
    with record_launches() as launches:
        run_chain(lab.fused_chain, dev, p, seed, out, **kwargs)
    checks.assert_launched(launches, "fused_chain_kernel", count=1)
    assert launches.count() == 1, f"the fused chain launched {launches.names()}"
    checks.assert_matches(out, ref, rtol=1e-5, scale=magnitudes(dev, p),
                          what=f"fused_chain of {ref.size} elements in blocks of {block or lab.DEFAULT_BLOCK}")


@pytest.mark.points(1)
def test_fused_chain_with_a_given_mask(lab, rng):
    """With a mask, fused_chain keeps exactly the elements the mask keeps: those whose byte is not
    0 (dropout_keep's rule; the kept bytes are any of 1 to 255)."""
    dev, p, seed, ref = chain_case(lab, rng, with_mask=True)
    out = checks.poisoned(ref.shape)
    with record_launches() as launches:
        run_chain(lab.fused_chain, dev, p, seed, out)
    checks.assert_launched(launches, "fused_chain_kernel", count=1)
    checks.assert_matches(out, ref, rtol=1e-5, what="fused_chain with a mask")


@pytest.mark.points(1)
def test_fused_is_one_launch_where_unfused_is_four(lab, rng):
    """The fused chain launches exactly 1 kernel; the unfused chain launches 4; both agree."""
    dev, p, seed, ref = chain_case(lab, rng)
    unfused_out, fused_out = checks.poisoned(ref.shape), checks.poisoned(ref.shape)
    with record_launches() as unfused:
        run_chain(lab.unfused_chain, dev, p, seed, unfused_out)
    with record_launches() as fused:
        run_chain(lab.fused_chain, dev, p, seed, fused_out)
    assert unfused.count() == 4, f"unfused launched {unfused.names()}"
    assert fused.names() == ["fused_chain_kernel"], f"fused launched {fused.names()}"
    checks.assert_matches(fused_out, unfused_out.copy_to_host(), rtol=1e-6,
                          what="fused_chain against unfused_chain")


@simulator_only
@pytest.mark.points(2)
@pytest.mark.parametrize("with_mask", [False, True], ids=["generator", "mask"])
def test_fused_memory_budget(lab, rng, with_mask):
    """Budget: each input read once, the output written once, no intermediate array at all;
    every load and store coalesced."""
    traffic, out, ref = metered_chain(lab, rng, lab.fused_chain, with_mask,
                                      n=checks.awkward_size(rng, 32, 3, 6), trace=("global",),
                                      block=32)  # 3-6 blocks
    n, inputs = ref.size, INPUTS + (("mask",) if with_mask else ())
    for name in inputs:
        expect(traffic, name, elements=n, reads=1)
    expect(traffic, "out", elements=n, writes=1)
    expect_only(traffic, *inputs, "out")
    expect_coalesced(traffic, hint="thread i = cuda.grid(1) takes element i")
    checks.assert_matches(out, ref, rtol=1e-5, what="fused_chain")


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
@pytest.mark.parametrize("blocks", [2, 9])
@drawn(examples=3, n=sizes(block=32, most=200), block=one_of(32, 64))
def test_grid_stride_covers_any_grid(lab, rng, blocks, n, block):
    """The grid-stride chain is right with fewer threads than elements, and with more (drawn:
    sizes, exact multiples of the block among them, and blocks of 32 or 64 threads)."""
    dev, p, seed, ref = chain_case(lab, rng, n=n)
    out = checks.poisoned(ref.shape)
    with record_launches() as launches:
        run_chain(lab.fused_chain_grid_stride, dev, p, seed, out, blocks=blocks, block=block)
    checks.assert_launched(launches, "fused_chain_grid_stride_kernel", count=1)
    assert launches[0].grid == (blocks, 1, 1), f"launched grid {launches[0].grid}, asked for {blocks}"
    checks.assert_matches(out, ref, rtol=1e-5, scale=magnitudes(dev, p),
                          what=f"fused_chain_grid_stride of {n} elements with {blocks} blocks of {block}")


@simulator_only
@pytest.mark.points(1)
def test_grid_stride_memory_budget(lab, rng):
    """Looping does not re-read: each input read once, the output written once, over 2 to 4
    passes of the grid, every pass coalesced."""
    blocks, block = 3, 32
    traffic, out, ref = metered_chain(lab, rng, lab.fused_chain_grid_stride, True,
                                      n=checks.awkward_size(rng, blocks * block, 2, 4), trace=("global",),
                                      blocks=blocks, block=block)
    true_fused_ledger(ref.size, with_mask=True).check_against(traffic)
    expect_coalesced(traffic, hint="start at cuda.grid(1) and step by cuda.gridsize(1): in every "
                                   "pass lane k takes the element after lane k - 1's")


@pytest.mark.points(1)
def test_four_per_thread_version_uses_your_chain_element(lab, rng):
    """The given 4-elements-per-thread version, built on your chain_element, is right."""
    dev, p, seed, ref = chain_case(lab, rng, block=32, with_mask=True)
    out = checks.poisoned(ref.shape)
    with record_launches() as launches:
        run_chain(lab.fused_chain_4_per_thread, dev, p, seed, out, block=32)
    checks.assert_launched(launches, "fused_chain_4_per_thread_kernel", count=1)
    checks.assert_matches(out, ref, rtol=1e-5, what="fused_chain_4_per_thread")


@pytest.mark.points(1)
def test_fused_ledger_is_right(lab, rng):
    """fused_chain_ledger declares each array's true traffic (20 B per element, 21 with a mask)."""
    n = int(rng.integers(1000, 10**8))
    for with_mask, per_element in ((False, 20), (True, 21)):
        ledger = lab.fused_chain_ledger(n, with_mask=with_mask)
        expected = true_fused_ledger(n, with_mask)
        assert ledger == expected, (f"with_mask={with_mask}: your ledger\n{ledger.by_array().table()}"
                                    f"\nthe true traffic\n{expected.by_array().table()}")
        assert ledger.total_bytes == per_element * n


@simulator_only
@pytest.mark.points(1)
@pytest.mark.parametrize("with_mask", [False, True], ids=["generator", "mask"])
def test_fused_ledger_agrees_with_the_meter(lab, rng, with_mask):
    """The fused ledger matches what the fused kernel really loaded and stored."""
    traffic, out, ref = metered_chain(lab, rng, lab.fused_chain, with_mask,
                                      n=checks.awkward_size(rng, 32, 3, 6), block=32)  # 3-6 blocks
    lab.fused_chain_ledger(ref.size, with_mask=with_mask).check_against(traffic)


@pytest.mark.points(1)
def test_predicted_speedup_is_the_byte_ratio(lab, rng):
    """predicted_speedup is unfused bytes / fused bytes, for any pair of ledgers."""
    n = int(rng.integers(1000, 10**6))
    unfused, fused = lab.unfused_chain_ledger(n), true_fused_ledger(n, False)
    assert lab.predicted_speedup(unfused, fused) == pytest.approx(44 / 20)
    unfused, fused = lab.unfused_chain_ledger(n, with_mask=True), true_fused_ledger(n, True)
    assert lab.predicted_speedup(unfused, fused) == pytest.approx(45 / 21)
    a = Ledger("a").add("op", "x", reads=3 * n)
    b = Ledger("b").add("op", "x", reads=n, itemsize=2)
    assert lab.predicted_speedup(a, b) == pytest.approx(6.0)


# --- not graded: the instruments and the given code ----------------------------------------------

@simulator_only
@pytest.mark.parametrize("with_mask", [False, True], ids=["generator", "mask"])
@pytest.mark.parametrize("variant", ["unfused", "fused", "fused_grid_stride", "fused_4_per_thread"])
def test_every_version_moves_what_its_ledger_says(lab, rng, variant, with_mask):
    """Each version's loads and stores, temporaries included, equal its ledger (the true one)."""
    launcher = lab.VARIANTS[variant][0]
    extra = {"blocks": 3, "block": 32} if variant == "fused_grid_stride" else {}
    traffic, out, ref = metered_chain(lab, rng, launcher, with_mask, **extra)
    ledger = lab.unfused_chain_ledger(ref.size, with_mask=with_mask) if variant == "unfused" \
        else true_fused_ledger(ref.size, with_mask)
    ledger.check_against(traffic)
    checks.assert_matches(out, ref, rtol=1e-5, what=variant)


def test_generator_drops_about_p(lab):
    """The counter-based generator keeps about 1 - p of the elements, and depends on the seed."""
    n, p = 200_000, 0.3
    keep = lab.keep_mask(n, p, seed=7)
    assert abs(keep.mean() - (1 - p)) < 0.01
    assert (keep != lab.keep_mask(n, p, seed=8)).mean() > 0.3


def test_bad_input_is_a_clear_error(lab):
    x = cuda.to_device(np.ones(10, dtype=np.float32))
    with pytest.raises(ValueError, match="probability"):
        lab.unfused_chain(x, x, x, x, p=1.0)
    with pytest.raises(ValueError, match="shape"):
        lab.unfused_chain(x, x, cuda.to_device(np.ones(9, dtype=np.float32)), x)


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

MATCHES = ("test_fused_chain_matches_numpy",)
MASK = ("test_fused_chain_with_a_given_mask",)
FUSED_BUDGET = ("test_fused_memory_budget",)
LEDGER = ("test_fused_ledger_is_right",)

CONTRACT = [
    clause("chain_element", "dropout(relu(x*w + b)) + r for one element whose inputs are already in registers.",
           *MATCHES, "test_four_per_thread_version_uses_your_chain_element"),
    clause("chain_element", "The inputs are finite: relu as a ternary (`v if v > ZERO else ZERO`, as relu_kernel, "
           "sends NaN to 0) or as a comparison (`if v < ZERO`, keeps NaN, as reference_chain's np.maximum) both "
           "pass.", *MATCHES),
    clause("chain_element", "relu(xv * wv + bv), then dropout (times scale when keep, else zero), plus rv;",
           *MATCHES, *MASK),
    # the grader compiles every kernel a graded test launched for a real GPU and fails the test on
    # float64 arithmetic in a float32 kernel
    clause("chain_element", "float32 throughout (ZERO, not 0.0: a Python float makes it float64).",
           *MATCHES, *MASK),
    clause("chain_element", "no memory traffic at all.", *FUSED_BUDGET),
    clause("fused_chain_kernel", "out = the whole chain (chain_element), one thread per element;",
           *MATCHES, "test_fused_is_one_launch_where_unfused_is_four"),
    clause("fused_chain_kernel", "dropout's decision from dropout_keep.", *MATCHES, *MASK),
    clause("fused_chain_kernel", "Budget per element, exactly: 4 float32 reads, the mask byte when one is given, "
           "1 write, and no intermediate in global memory;", *FUSED_BUDGET,
           "test_fused_ledger_agrees_with_the_meter"),
    clause("fused_chain_kernel", "neighbouring threads on neighbouring elements (coalesced: the tests count the "
           "sectors per warp request).", *FUSED_BUDGET),
    clause("fused_chain_grid_stride_kernel", "The same work as 02.2 over every element, whatever the size of the "
           "grid (a grid-stride loop).", "test_grid_stride_covers_any_grid"),
    clause("fused_chain_grid_stride_kernel", "Budget per element: the same as 02.2 (no element twice), every "
           "pass coalesced.", "test_grid_stride_memory_budget"),
    clause("fused_chain_ledger", "The bytes the fused kernel moves: each input read once, the output written once.",
           *LEDGER),
    clause("fused_chain_ledger", 'A Ledger("fused") whose one op, "fused_chain", declares every array '
           "fused_chain_kernel reads and writes, n elements each (the mask only when with_mask, at MASK bytes "
           "each).", *LEDGER),
    clause("fused_chain_ledger", "unfused_chain_ledger above shows the form; the tests compare yours with the "
           "truth and with the meter's count of what fused_chain_kernel really did.", *LEDGER,
           "test_fused_ledger_agrees_with_the_meter"),
    clause("predicted_speedup", "Unfused time / fused time when both are memory-bound: the ratio of the bytes "
           "they move.", "test_predicted_speedup_is_the_byte_ratio"),
    clause("predicted_speedup", "From the two ledgers alone.", "test_predicted_speedup_is_the_byte_ratio"),
]
