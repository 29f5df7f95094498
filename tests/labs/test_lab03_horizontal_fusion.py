"""Graded checks for Lab 03: horizontal fusion.

Each test draws fresh random inputs (seed printed) with task sizes that are not multiples of
the block, poisons the output before the launch, and checks that a kernel did the work. The
traffic tests count, in the simulator, every global load and store the kernels make.
"""

import numpy as np
import pytest

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect
from kernellab.grading.tape import meter, record_launches

cuda = device.cuda()
simulator_only = pytest.mark.simulator  # on a GPU, kernellab grade runs these in a simulator child
INPUTS = ("x0", "x1", "z1", "x2", "x3")
BLOCK = 64


def tasks_case(lab, rng, sizes=None):
    """Host inputs, their device copies (named as the meter names them), alpha and the reference."""
    if sizes is None:
        sizes = [checks.awkward_size(rng, BLOCK, 1, 4) for _ in lab.TASKS]
    n0, n1, n2, n3 = sizes
    host = {"x0": checks.nonzero(rng, n0), "x1": checks.nonzero(rng, n1),
            "z1": checks.nonzero(rng, n1), "x2": checks.nonzero(rng, n2), "x3": checks.nonzero(rng, n3)}
    alpha = float(checks.nonzero(rng, 1)[0])
    ref = lab.reference_tasks(*(host[k] for k in INPUTS), alpha)
    return {k: cuda.to_device(v) for k, v in host.items()}, alpha, ref


def run_tasks(launcher, dev, alpha, out, **kwargs):
    return launcher(*(dev[k] for k in INPUTS), alpha, out=out, **kwargs)


@pytest.mark.points(1)
def test_task_block_starts_are_prefix_sums(lab, rng):
    """task_block_starts gives where each task's blocks start, then the total; empty tasks own none."""
    sizes = [int(s) for s in rng.integers(1, 5000, size=5)]
    starts = lab.task_block_starts(sizes, 96)
    blocks = [-(-s // 96) for s in sizes]
    assert [int(s) for s in starts] == [0] + list(np.cumsum(blocks)), (sizes, starts)
    assert [int(s) for s in lab.task_block_starts([0, 130, 0, 128], 128)] == [0, 0, 2, 2, 3]
    for bad in (([10, -1], 128), ([10], 0)):
        with pytest.raises(ValueError):
            lab.task_block_starts(*bad)


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
def test_horizontal_matches_numpy(lab, rng):
    """horizontal_tasks computes all four tasks in one launch covering every task's blocks."""
    dev, alpha, ref = tasks_case(lab, rng)
    out = checks.poisoned(ref.shape)
    with record_launches() as launches:
        run_tasks(lab.horizontal_tasks, dev, alpha, out, block=BLOCK)
    checks.assert_launched(launches, "horizontal_kernel", count=1)
    assert launches.count() == 1, f"launched {launches.names()}"
    sizes = [dev[k].size for k in ("x0", "x1", "x2", "x3")]
    want = sum(-(-s // BLOCK) for s in sizes)
    assert launches[0].grid == (want, 1, 1) and launches[0].block == (BLOCK, 1, 1), \
        f"grid {launches[0].grid} x block {launches[0].block}; the tasks need {want} blocks of {BLOCK}"
    checks.assert_matches(out, ref, rtol=1e-6, what="horizontal_tasks")


@pytest.mark.points(1)
def test_horizontal_is_one_launch_where_separate_is_four(lab, rng):
    """The merged tasks launch exactly 1 kernel; separately they launch 4; both agree."""
    dev, alpha, ref = tasks_case(lab, rng)
    separate_out, merged_out = checks.poisoned(ref.shape), checks.poisoned(ref.shape)
    with record_launches() as separate:
        run_tasks(lab.separate_tasks, dev, alpha, separate_out, block=BLOCK)
    with record_launches() as merged:
        run_tasks(lab.horizontal_tasks, dev, alpha, merged_out, block=BLOCK)
    assert separate.count() == 4, f"separate launched {separate.names()}"
    assert merged.names() == ["horizontal_kernel"], f"horizontal launched {merged.names()}"
    checks.assert_matches(merged_out, separate_out.copy_to_host(), rtol=1e-6,
                          what="horizontal_tasks against separate_tasks")


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
@pytest.mark.parametrize("shape", ["empty_task", "tiny_tasks"])
def test_horizontal_handles_empty_and_tiny_tasks(lab, rng, shape):
    """A task of 0 elements owns no block; tasks of 1 element (and of one more than a block) get
    one block each (two)."""
    sizes = [0, 150, 0, 77] if shape == "empty_task" else [1, BLOCK + 1, 200, 1]
    dev, alpha, ref = tasks_case(lab, rng, sizes)
    out = checks.poisoned(ref.shape)
    with record_launches() as launches:
        run_tasks(lab.horizontal_tasks, dev, alpha, out, block=BLOCK)
    checks.assert_launched(launches, "horizontal_kernel", count=1)
    checks.assert_matches(out, ref, rtol=1e-6, what=f"horizontal_tasks with sizes {sizes}")


@simulator_only
@pytest.mark.points(2)
def test_horizontal_memory_budget(lab, rng):
    """Each block does exactly one task's slice: every input read once, every output written once."""
    dev, alpha, ref = tasks_case(lab, rng)
    out = checks.poisoned(ref.shape)
    with meter(**dev, out=out) as traffic:
        run_tasks(lab.horizontal_tasks, dev, alpha, out, block=BLOCK)
    for name, array in dev.items():
        expect(traffic, name, elements=array.size, reads=1)
    expect(traffic, "out", elements=out.size, writes=1)
    sizes = [dev[k].size for k in ("x0", "x1", "x2", "x3")]
    lab.tasks_ledger(sizes, fused=True).check_against(traffic)
    checks.assert_matches(out, ref, rtol=1e-6, what="horizontal_tasks")


@pytest.mark.points(1)
def test_predicted_time_is_launch_or_bandwidth_bound(lab, rng):
    """predicted_time_us: the slower of the launches and the bytes sets the pace."""
    launch_us = float(rng.uniform(5, 20))
    gbps = float(rng.uniform(1000, 4000))
    small, large = 1e4, 1e10
    assert lab.predicted_time_us(4, small, launch_us, gbps) == pytest.approx(4 * launch_us)
    assert lab.predicted_time_us(1, small, launch_us, gbps) == pytest.approx(launch_us)
    assert lab.predicted_time_us(4, large, launch_us, gbps) == pytest.approx(large / (gbps * 1e3))
    middle = 2.5 * launch_us * gbps * 1e3
    assert lab.predicted_time_us(4, middle, launch_us, gbps) == pytest.approx(4 * launch_us)
    assert lab.predicted_time_us(1, middle, launch_us, gbps) == pytest.approx(2.5 * launch_us)


# --- not graded: the given code and the ledger ---------------------------------------------------

@simulator_only
def test_separate_ledger_agrees_with_the_meter(lab, rng):
    """The given separate launches move what the ledger says (and the same bytes as merged)."""
    dev, alpha, ref = tasks_case(lab, rng)
    out = checks.poisoned(ref.shape)
    with meter(**dev, out=out) as traffic:
        run_tasks(lab.separate_tasks, dev, alpha, out, block=BLOCK)
    sizes = [dev[k].size for k in ("x0", "x1", "x2", "x3")]
    separate = lab.tasks_ledger(sizes, fused=False)
    separate.check_against(traffic)
    assert separate.total_bytes == lab.tasks_ledger(sizes, fused=True).total_bytes
    checks.assert_matches(out, ref, rtol=1e-6, what="separate_tasks")


def test_bad_input_is_a_clear_error(lab):
    a = cuda.to_device(np.ones(10, dtype=np.float32))
    b = cuda.to_device(np.ones(9, dtype=np.float32))
    with pytest.raises(ValueError, match="x1 and z1"):
        lab.separate_tasks(a, a, b, a, a)
    with pytest.raises(ValueError, match="out has"):
        lab.separate_tasks(a, a, a, a, a, out=b)
