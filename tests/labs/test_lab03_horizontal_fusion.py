"""Graded checks for Lab 03: horizontal fusion.

Each test draws fresh random inputs (seed printed) with task sizes that are not multiples of
the block, poisons the output before the launch, and checks that a kernel did the work. The
traffic tests count, in the simulator, every global load and store the kernels make.
"""

import numpy as np
import pytest
from hypothesis import strategies

from kernellab.gpu import checks, device
from kernellab.grading.budgets import expect
from kernellab.grading.contract import clause
from kernellab.grading.drawn import drawn, one_of, sizes
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
@drawn(examples=20, task_sizes=strategies.lists(sizes(block=96, most=5000, zero=True), min_size=1, max_size=6),
       block=one_of(96, 1, 128, 1000))
def test_task_block_starts_are_prefix_sums(lab, task_sizes, block):
    """task_block_starts gives where each task's blocks start, then the total (drawn: 1 to 6 tasks,
    empty ones among them, and blocks), as an np.int64 array of len(sizes) + 1 entries from 0;
    sizes that the block divides exactly get no extra block; bad input is a ValueError."""
    starts = lab.task_block_starts(task_sizes, block)
    want = [0] + [int(s) for s in np.cumsum([-(-size // block) for size in task_sizes])]
    assert isinstance(starts, np.ndarray) and starts.dtype == np.int64, \
        f"task_block_starts returned {type(starts).__name__} of {getattr(starts, 'dtype', '?')}, " \
        "not an np.int64 array"
    assert [int(s) for s in starts] == want, (task_sizes, block, starts)
    exact = lab.task_block_starts([3 * block, block, 0, 2 * block], block)
    assert [int(s) for s in exact] == [0, 3, 4, 4, 6], f"sizes the block divides exactly: {exact}"
    for bad in (([10, -1], 128), ([10], 0), ([10], -64)):
        with pytest.raises(ValueError):
            lab.task_block_starts(*bad)


def check_one_launch(launches, dev, block, out):
    """One launch of horizontal_kernel: the tasks' blocks end to end, its tables tuples of Python
    ints, and `out` itself (no slice)."""
    checks.assert_launched(launches, "horizontal_kernel", count=1)
    assert launches.count() == 1, f"launched {launches.names()}"
    launch = launches[0]
    sizes = [dev[k].size for k in ("x0", "x1", "x2", "x3")]
    want = sum(-(-s // block) for s in sizes)
    assert launch.grid == (want, 1, 1) and launch.block == (block, 1, 1), \
        f"grid {launch.grid} x block {launch.block}; the tasks need {want} blocks of {block}"
    for table in launch.args[:2]:
        assert type(table) is tuple and all(type(v) is int for v in table), \
            f"a table reached the kernel as {type(table).__name__} of " \
            f"{sorted({type(v).__name__ for v in table}) if isinstance(table, tuple) else '?'}: " \
            "pass tuples of Python ints"
    if out is not None:
        assert launch.args[-1] is out, "horizontal_kernel must get `out` itself, not a slice or a copy"


@simulator_only   # on a GPU too: reads past the end raise IndexError here only
@pytest.mark.points(2)
@drawn(examples=4, n0=sizes(block=64, most=250, zero=True), n1=sizes(block=64, most=250),
       n2=sizes(block=64, most=250), n3=sizes(block=64, most=250), block=one_of(64, None, 32, 96),
       given_out=one_of(True, False))
def test_horizontal_matches_numpy(lab, rng, n0, n1, n2, n3, block, given_out):
    """horizontal_tasks computes all four tasks in one launch covering every task's blocks, for
    any sizes and block (drawn: awkward sizes, 1, exact multiples, an empty first task, the
    default block); it returns the `out` it was given, or with out=None the one it allocated."""
    dev, alpha, ref = tasks_case(lab, rng, [n0, n1, n2, n3])
    out = checks.poisoned(ref.shape) if given_out else None
    kwargs = {} if block is None else {"block": block}
    with record_launches(with_args=True) as launches:
        result = run_tasks(lab.horizontal_tasks, dev, alpha, out, **kwargs)
    check_one_launch(launches, dev, block or lab.DEFAULT_BLOCK, out)
    if given_out:
        assert result is out, "horizontal_tasks must return the `out` it was given"
    checks.assert_matches(result, ref, rtol=1e-6, what=f"horizontal_tasks with sizes {[n0, n1, n2, n3]}")


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
@pytest.mark.parametrize("shape", ["empty_task", "tiny_tasks", "all_empty"])
def test_horizontal_handles_empty_and_tiny_tasks(lab, rng, shape):
    """A task of 0 elements owns no block; tasks of 1 element (and of one more than a block) get
    one block each (two); four empty tasks launch nothing."""
    sizes = {"empty_task": [0, 150, 0, 77], "tiny_tasks": [1, BLOCK + 1, 200, 1], "all_empty": [0] * 4}[shape]
    dev, alpha, ref = tasks_case(lab, rng, sizes)
    out = checks.poisoned(ref.shape)
    with record_launches() as launches:
        result = run_tasks(lab.horizontal_tasks, dev, alpha, out, block=BLOCK)
    assert result is out, "horizontal_tasks must return the `out` it was given"
    if shape == "all_empty":
        assert launches.count() == 0, f"four empty tasks launched {launches.names()}: no block, no launch"
        return
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
    """predicted_time_us: the slower of the launches and the bytes sets the pace, in (fractional)
    microseconds."""
    launch_us = float(rng.uniform(5, 20))
    gbps = float(rng.uniform(1000, 4000))
    small, large = 1e4, 1e10
    assert lab.predicted_time_us(4, small, launch_us, gbps) == pytest.approx(4 * launch_us)
    assert lab.predicted_time_us(1, small, launch_us, gbps) == pytest.approx(launch_us)
    assert lab.predicted_time_us(4, large, launch_us, gbps) == pytest.approx(large / (gbps * 1e3))
    middle = 2.5 * launch_us * gbps * 1e3
    assert lab.predicted_time_us(4, middle, launch_us, gbps) == pytest.approx(4 * launch_us)
    assert lab.predicted_time_us(1, middle, launch_us, gbps) == pytest.approx(2.5 * launch_us)
    assert lab.predicted_time_us(1, 1500, 1.0, 1.0) == pytest.approx(1.5), "microseconds, not whole ones"


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


# --- The contract: each clause the stubs state, and the graded checks that exercise it -----------

MATCHES = ("test_horizontal_matches_numpy",)
EMPTY = ("test_horizontal_handles_empty_and_tiny_tasks",)

CONTRACT = [
    clause("task_block_starts", "[0, b0, b0 + b1, ..., total]: task t owns blocks starts[t] .. starts[t + 1] - 1.",
           "test_task_block_starts_are_prefix_sums"),
    clause("task_block_starts", "FILL ME IN. Contract: ValueError for block <= 0 or a negative size;",
           "test_task_block_starts_are_prefix_sums"),
    clause("task_block_starts", "an np.int64 array of len(sizes) + 1 entries, starting at 0;",
           "test_task_block_starts_are_prefix_sums"),
    clause("task_block_starts", "an empty task owns no block.", "test_task_block_starts_are_prefix_sums", *EMPTY),
    clause("horizontal_kernel", "FILL ME IN. Task t owns blocks [block_starts[t], block_starts[t + 1]) (task 3 "
           "owns the rest of the grid) and writes its results to out[out_starts[t]:], one element per thread.",
           *MATCHES, *EMPTY, "test_horizontal_is_one_launch_where_separate_is_four"),
    clause("horizontal_kernel", "every input element read once, every output element written once, grid-wide.",
           "test_horizontal_memory_budget"),
    clause("horizontal_tasks", "One launch for the four tasks: the grid is their blocks laid end to end.",
           *MATCHES, "test_horizontal_is_one_launch_where_separate_is_four"),
    clause("horizontal_tasks", "The tables travel as tuples of Python ints, inside the launch's own arguments "
           "(no copy to the device), and the kernel writes into `out` at each task's offset (no slices).",
           *MATCHES),
    clause("horizontal_tasks", "FILL ME IN. One launch of horizontal_kernel, its tables passed as tuples of "
           "Python ints and `out` whole (no slices);", *MATCHES),
    clause("horizontal_tasks", "no launch when there is no block.", *EMPTY),
    clause("horizontal_tasks", "Return out.", *MATCHES, *EMPTY),
    clause("predicted_time_us", "One call's time if the host's launches and the GPU's memory traffic overlap.",
           "test_predicted_time_is_launch_or_bandwidth_bound"),
    clause("predicted_time_us", "The GPU runs a kernel while the host submits the next one, so whichever is "
           "slower sets the pace: `launches` submissions of `launch_us` each, or `nbytes` at `gbps` GB/s.",
           "test_predicted_time_is_launch_or_bandwidth_bound"),
    clause("predicted_time_us", "FILL ME IN: microseconds (1 GB/s moves 1e3 bytes per microsecond).",
           "test_predicted_time_is_launch_or_bandwidth_bound"),
]
