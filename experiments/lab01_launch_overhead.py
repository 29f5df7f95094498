"""Lab 01 experiments: what a Numba launch costs, seen every way, and where it stops mattering.

On a GPU (`kernellab bench 01`), in this order (the lab is declared once, in `LAB` at the end):
- wrapper overhead: a plain launch before and after kernellab's hooks were installed and removed
  (record_launches, graphs.capture), and CapturedGraph.replay against the raw graph launch.
  Target: <= 5% each.
- launch cost by method: host submit (empty kernel; one array argument), GPU events around
  launches back to back, the GPU's own cost with the queue kept full, a synchronize after each
  launch, a prebuilt launch, graph replay. Targets: replay <= 1 us per kernel, >= 15x cheaper
  than a plain launch.
- the cost against the number of array arguments; NumPy host arrays against device arrays;
  a profile of the launch path (cProfile, 2,000 launches).
- total time against the number of tiny kernels (the slope is the cost per launch), eager and
  replayed as a graph.
- the Python around a launch: slicing a device array and allocating an output, each timed on
  its own beside the launch it surrounds.
- time against size for one kernel (the floor) and for a batch of rows, one launch per row or
  one for all (the crossover where merging launches stops paying), through kernellab.course.bench.
  These two benchmarks time the host's pacing (`host_paced=True`): their subject is the launch
  cost, which a hold kernel ahead of the window would hide.

This module is the declaration, with the validation, the benchmarks, the targets and the key
figure; the measurements (and the launch cost read from a sweep) live in lab01_measure, the
figures in lab01_figures, the claims in lab01_claims, and the constants all of them share in
lab01_constants (what notebook 01 and Lab 03's claims read on the experiment is re-exported here).
"""

from __future__ import annotations

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol
from kernellab.gpu import checks, device, graphs, traffic

from experiments.lab01_claims import CLAIMS
from experiments.lab01_constants import PROFILE_LAUNCHES, ROWS, SCALE
from experiments.lab01_figures import (
    draw_kernel_count, draw_launch_breakdown, draw_launch_methods, draw_python_around_launch, draw_time_vs_size)
from experiments.lab01_measure import (
    measure_arguments, measure_kernel_count, measure_launch_methods, measure_python_around_launch,
    floor_model, measure_wrapper_overhead, profile_launch_path)

# Read on the experiment (`protocol.experiment("01")`) by Lab 03's claims.
from experiments.lab01_claims import per_array_us


def validate(lab, seed: int = 0) -> list[str]:
    """Every given and written function checked on tiny inputs; returns what passed."""
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    counter = cuda.to_device(np.zeros(1, dtype=np.float32))
    lab.launch_chain(counter, 3)
    lab.prebuilt_launcher(lab.bump_kernel, 1, 1, counter)()
    graphs.capture(lab.launch_chain, counter, 2).replay()
    if counter.copy_to_host()[0] != 6:
        raise AssertionError(f"3 chained, 1 prebuilt and 2 replayed bumps gave "
                             f"{counter.copy_to_host()[0]}")
    arrays = [np.abs(checks.nonzero(rng, 45)) for _ in range(8)]
    checks.assert_matches(lab.sum8([cuda.to_device(a) for a in arrays]), lab.reference_sum8(arrays),
                          rtol=1e-6, what="sum8")
    slope, fixed = lab.per_launch_cost([1, 2, 4], [12.0, 22.0, 42.0])
    if not np.allclose((slope, fixed), (10.0, 2.0)):
        raise AssertionError(f"per_launch_cost gave {(slope, fixed)}, expected (10, 2)")
    return ["launch_chain", "prebuilt_launcher", "sum8", "per_launch_cost"]


# --- benchmarks: time against size, timed with the host's pacing in the window ------------------

def _elementwise_ledger(name, inputs_shape):
    elements = int(np.prod(inputs_shape))
    return traffic.Ledger(name).add(name, "x", reads=elements).add(name, "out", writes=elements)


def size_benchmarks(lab, torch=None) -> list[harness.Benchmark]:
    """One kernel against n (the floor), and a batch of rows launched per row or all at once."""
    one_kernel = harness.Benchmark(
        name="scale_one_kernel", axis="n (float32 elements)",
        sizes=[1 << k for k in range(8, 27, 2)], sim_sizes=[300], tour_sizes=[1 << 8, 1 << 16, 1 << 22],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
        reference=lambda inputs: lab.reference_scale(inputs["x"], SCALE), host_paced=True,
        variants=[harness.Variant("scale", lambda d, out: lab.scale(d["x"], SCALE, out=out),
                                  "one launch, one thread per element",
                                  ledger=lambda n: _elementwise_ledger("scale", (n,)))])
    batch = harness.Benchmark(
        name="merge_rows", axis=f"elements per row ({ROWS} rows)",
        sizes=[1 << k for k in range(4, 21, 2)], sim_sizes=[37], tour_sizes=[1 << 4, 1 << 10, 1 << 16],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, (ROWS, n))},
        reference=lambda inputs: lab.reference_scale(inputs["x"], SCALE), host_paced=True,
        variants=[harness.Variant(name, lambda d, out, run=run: run(d["x"], SCALE, out=out), why,
                                  ledger=lambda n, name=name: _elementwise_ledger(name, (ROWS, n)))
                  for name, (run, why) in lab.VARIANTS.items()] + [
            harness.Variant("separate_sliced", lambda d, out: scale_sliced_rows(lab, d["x"], SCALE, out),
                            "one launch per row on slices x[row], out[row]: what slicing a device "
                            "array costs in Python, measured on its own",
                            ledger=lambda n: _elementwise_ledger("separate", (ROWS, n)))])
    return [one_kernel, batch]


def scale_sliced_rows(lab, x, a, out):
    """One launch per row on device-array slices: each slice is a new array object built in Python."""
    for row_index in range(x.shape[0]):
        lab.scale(x[row_index], a, out=out[row_index])
    return out


def key_figure(lab, records: dict) -> str:
    """The launch costs, each the median of the repeats, as the claims print them."""
    from experiments.lab01_claims import method_us
    key = (f"plain launch {method_us(records, 'plain, host submit'):.1f} us, graph replay "
           f"{method_us(records, 'graph replay, GPU events'):.2f} us per kernel, prebuilt "
           f"{method_us(records, 'prebuilt, host submit'):.1f} us")
    if "scale_one_kernel" not in records:
        return key
    crossover = floor_model(lab, records["scale_one_kernel"], "scale")[2]
    return f"{key}; the floor model's crossover: ~{crossover:,} elements"


def takeaway() -> str:
    """The notebook's last cell: the key figure and four lines, from the records the claims read."""
    from kernellab.course import claims
    from experiments.lab01_claims import CLAIMS, _host_array_values, _launch_values, _merged_values
    records = claims.sources("01")
    launch, arguments, merged = _launch_values(records), _host_array_values(records), _merged_values(records)
    pace = claims.words_of(next(c for c in CLAIMS if c.name == "host_not_gpu"), launch)["pace"]
    return "\n".join([
        f"What to take away (key figure: a plain Numba launch costs the host {launch['host']:.1f} us, "
        f"the GPU {launch['gpu']:.2f} us)",
        f"- Between tiny kernels the GPU idles {launch['idle']:.0f}% of the time: {pace}.",
        f"- Each array argument adds {arguments['per_array']:.1f} us; a NumPy host array adds a copy each "
        "way and a wait for each.",
        f"- One launch for {merged['rows']} rows stays within 2x of its fastest time up to {merged['upto']:,} "
        "elements per row: batch small pieces.",
        "- Fuse kernels (Lab 02) or replay a CUDA graph (Lab 08) to pay for fewer launches.",
    ])


def targets(lab, records: dict) -> dict:
    """The targets each measurement judged in its own record, in one place."""
    methods, wrappers = records["launch_methods"], records["wrapper_overhead"]
    return {"replay_us_max": methods["targets"]["replay_us_max"],
            "replay_us": methods["methods"]["graph replay, GPU events"]["us"],
            "ratio_min": methods["targets"]["ratio_min"], "plain_over_replay": methods["plain_over_replay"],
            "wrapper_max_overhead": wrappers["target"]["max_overhead"], "wrapper_ratios": wrappers["ratios"],
            "target_replay_met": methods["targets"]["replay_ok"],
            "target_ratio_met": methods["targets"]["ratio_ok"],
            "target_wrappers_met": wrappers["target"]["ok"]}


LAB = protocol.Lab(
    number="01", title="launch overhead",
    kernels=(protocol.Kernel("bump_kernel", "one block of one thread per launch", block_size=1),
             protocol.Kernel("sum8_kernel", "1-D: ceil(n / block) blocks, one element per thread"),
             protocol.Kernel("scale_kernel", "1-D: ceil(n / block) blocks, one element per thread"),
             protocol.Kernel("scale_row_kernel", "1-D over one row, launched once per row with the "
                                                 "row number (no slice)"),
             protocol.Kernel("scale_rows_kernel", "2-D: x along the columns, y along the rows, one "
                                                  "launch for the batch")),
    references=("reference_scale", "reference_sum8"),
    validate=validate,
    benchmarks=size_benchmarks,
    measurements=(
        protocol.Measurement("wrapper_overhead", measure_wrapper_overhead,
                             "a plain launch before and after kernellab's hooks came and went",
                             in_tour=False),
        protocol.Measurement("launch_methods", measure_launch_methods,
                             "one tiny launch, seen every way: host, GPU, synchronized, prebuilt, graph"),
        protocol.Measurement("arguments", measure_arguments,
                             "host submit against array arguments; NumPy host arrays against device"),
        protocol.Measurement("launch_profile", profile_launch_path,
                             f"cProfile over {PROFILE_LAUNCHES:,} launches: where the host's time goes"),
        protocol.Measurement("kernel_count", measure_kernel_count,
                             "total time against the number of tiny kernels, eager and replayed"),
        protocol.Measurement("python_around_launch", measure_python_around_launch,
                             "a slice, an allocation and one row's launch, each timed on its own"),
    ),
    figures=(
        protocol.Figure("lab01_launch_cost_by_method", draw_launch_methods, needs=("launch_methods",)),
        protocol.Figure("lab01_launch_breakdown", draw_launch_breakdown,
                        needs=("arguments", "launch_profile")),
        protocol.Figure("lab01_kernel_count", draw_kernel_count, needs=("kernel_count",)),
        protocol.Figure("lab01_python_around_launch", draw_python_around_launch,
                        needs=("python_around_launch",)),
        protocol.Figure("lab01_time_vs_size", draw_time_vs_size,
                        needs=("scale_one_kernel", "merge_rows")),
    ),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
