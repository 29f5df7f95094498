"""Lab 08 experiments: what a CUDA graph removes, measured.

- Tiny kernels: a 100-step pipeline on a 128-element buffer (one block), launched eagerly and
  replayed as a graph; the cost per kernel on the host and on the GPU. Targets (H200): replay
  <= 1 us per kernel and >= 15x cheaper than a plain Numba launch.
- Idle gaps (the seed article's metric, target < 5% of kernel time): a 100-kernel pipeline at
  several buffer sizes, eager and replayed. Replays are GPU time between the replay's own events
  with the host's submit outside the window (`timing.time_gpu` holds the GPU while the host
  submits); the eager pipeline is timed as it runs, the GPU waiting for the host between launches,
  since those waits are the gaps being measured. The gaps are total - 100 x the kernel's own GPU
  duration, signed, the duration measured apart from the replay it judges: the kernel alone,
  one launch on the chain's own buffer between events (the cache as the chain leaves it), less
  the same launch on one element, which takes out the latency the events and the launch add
  (a kernel timed alone between events carries its own, a few us: uncorrected, it made the
  replayed gaps come out 1.5-6% negative on an H200). A gap's resolution is the spread of the
  duration's samples plus the spread of the total's; a gap negative by more than that is a
  measurement problem, never clamped to 0. Target: < 5% replayed, for kernels of >= 20 us, with
  no measurement problem. Nsight Compute's duration and the marginal time per kernel in a graph
  are recorded beside it as cross-checks.
- One graph per batch size: build cost, per-call time eager and replayed, break-even calls; and
  against its alternatives over a stream of calls (`batch_strategies`): padding each batch up to
  a bucket's graph, and one graph updated in place (cuGraphExecUpdate) whenever the size changes.

`LAB` below declares all of it: `kernellab bench 08` (GPU) measures and saves it,
`kernellab tour 08` shows it (live on a GPU, the H200 reference otherwise).

This module is the declaration, with the validation, the chain as a benchmark, the targets and the
key figure; the measurements, the gap arithmetic and the batch strategies live in lab08_measure,
the figures in lab08_figures, the claims in lab08_claims, and the constants all of them share in
lab08_constants (re-exported here, with what tests and notebook 08 read on the experiment).
"""

from __future__ import annotations

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import claims, protocol
from kernellab.gpu import checks, device, graphs
from kernellab.gpu.traffic import Ledger

from experiments.lab08_claims import CLAIMS
from experiments.lab08_constants import CHAIN_N, CHAIN_STEPS, GAP_TARGET, LONG_KERNEL_MS, NUMBER
from experiments.lab08_figures import plot_batches, plot_idle_gaps, plot_timeline
from experiments.lab08_measure import (
    PaddedToBucket, duration_used, measure_batch_strategies, measure_batches, measure_idle_gaps,
    measure_tiny_kernels)

# Read on the experiment (`protocol.experiment("08")`) by tests/instruments and notebook 08.
from experiments.lab08_constants import ALONE_REPS
from experiments.lab08_measure import (
    ALONE, alone_duration, below_resolution, gap_problems, gap_resolution, gap_row, judge_gaps,
    marginal_duration, signed_gap)


def validate(lab, seed: int = 0) -> list[str]:
    """Every variant, the batch dispatcher, padding to a bucket and the capture breakers, checked
    against lab.chain_reference on an awkward size; returns what passed."""
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    coeffs = [(np.float32(a), np.float32(b)) for a, b in checks.nonzero(rng, (4, 2))]
    x = checks.nonzero(rng, 300 if device.is_simulator() else 100_003)
    for name, (run, _why) in lab.VARIANTS.items():
        d_x = cuda.to_device(x)
        run(d_x, coeffs)
        checks.assert_matches(d_x, lab.chain_reference(x, coeffs), rtol=1e-5, what=f"lab 08 {name}")
    features = 7
    dispatcher = lab.BatchedPipeline(features, coeffs)
    for batch in (3, 2, 3):
        rows = checks.nonzero(rng, (batch, features))
        checks.assert_matches(dispatcher(cuda.to_device(rows)), lab.chain_reference(rows, coeffs),
                              rtol=1e-5, what=f"BatchedPipeline, batch {batch}")
    if dispatcher.graphs.builds != 2:
        raise AssertionError(f"BatchedPipeline built {dispatcher.graphs.builds} graphs for 2 sizes")
    padded = PaddedToBucket(lab, features, coeffs, buckets=(2, 4))
    rows = checks.nonzero(rng, (3, features))
    checks.assert_matches(padded(cuda.to_device(rows)), lab.chain_reference(rows, coeffs), rtol=1e-5,
                          what="a batch of 3 padded to the bucket of 4")
    for cause, attempt in lab.capture_breakers(cuda.to_device(x), coeffs).items():
        try:
            attempt()
        except graphs.CaptureError:
            continue
        raise AssertionError(f"capture breaker {cause!r} did not raise CaptureError")
    return [*lab.VARIANTS, "batched", "padded to a bucket", "capture breakers"]


def chain_ledger(n: int) -> Ledger:
    """Each step of the pipeline reads and writes the whole buffer once (in place)."""
    ledger = Ledger("pipeline")
    for k in range(len(CHAIN_STEPS)):
        ledger.add(f"step {k + 1}", "out", reads=n, writes=n)
    return ledger


def chain_benchmark(lab) -> harness.Benchmark:
    """The eager pipeline of CHAIN_STEPS kernels, as data: what `kernellab profile 08` measures
    (DRAM bytes of each affine_step_kernel) and bench times beside the graph measurements."""
    def run(inputs, out):
        out.copy_to_device(inputs["x"])             # the pipeline works in place: start from x
        return lab.pipeline(out, CHAIN_STEPS)

    return harness.Benchmark(
        name="chain", axis="n", sizes=[CHAIN_N], sim_sizes=[300],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
        reference=lambda inputs: lab.chain_reference(inputs["x"], CHAIN_STEPS),
        variants=[harness.Variant("eager", run, "one launch per step, each a read and a write of x",
                                  ledger=chain_ledger)])


def targets(lab, records: dict) -> dict:
    """The lab's targets, read from the verdicts the measurements record beside their numbers."""
    tiny, gaps = records["tiny_kernels"], records["idle_gaps"]
    replay = tiny["rows"]["graph_gpu_events"]["us_per_kernel"]
    long_rows = [r for r in gaps["rows"] if r["kernel_ms"] >= LONG_KERNEL_MS]
    return {
        "replay_us_per_kernel": {"value": replay, "target": 1.0, "met": tiny["targets"]["replay_ok"],
                                 "method": "GPU time of a replayed 100-kernel graph / 100, events "
                                           "around the replay, host submit outside"},
        "replay_speedup": {"value": tiny["speedup"], "target": 15.0, "met": tiny["targets"]["speedup_ok"],
                           "method": "eager GPU time per kernel (the GPU waiting for the host) / replayed"},
        "replayed_gaps": {"value": max((r["graph_gap"] for r in long_rows), default=float("nan")),
                          "target": GAP_TARGET, "met": gaps["target"]["ok"], "method": gaps["method"]},
    }


# Notebook 08's last cell (claims.take_away): each line filled from its claims' values and words.
TAKE_AWAY = (
    "A graph replays a whole pipeline with one submission: {replay_cost[replay]:.2f} us of GPU time per one-block kernel, "
    "against {replay_cost[eager_lo]:.0f}-{replay_cost[eager_hi]:.0f} us eager on the GPU's clock, where "
    "{replay_cost[waiting]}.",
    "Eager, gaps fall under 5% {gaps_below_5pct[eager_where]}; replayed, the {gaps_below_5pct[long_us]} us kernels stay at or below "
    "{gaps_below_5pct[worst]:.2f}%.",
    "Each kernel still costs the GPU its dispatch: a {replayed_short_kernels[short_us]:.2f} us kernel replayed "
    "leaves the GPU idle {replayed_short_kernels[gap]:.0f}% of its time ({replayed_short_kernels[gap_lo]:.0f}-"
    "{replayed_short_kernels[gap_hi]:.0f}% over {replayed_short_kernels[repeats]} repeats).",
)


def take_away() -> str:
    """Notebook 08's last cell: TAKE_AWAY, from the records its claims read (live where this process
    measured them, the H200 reference otherwise)."""
    return claims.take_away(NUMBER, TAKE_AWAY)


def key_figure(lab, records: dict) -> str:
    tiny, gaps = records["tiny_kernels"], records["idle_gaps"]
    replay = tiny["rows"]["graph_gpu_events"]["us_per_kernel"]
    eager = tiny["rows"]["eager_gpu_events"]["us_per_kernel"]
    longest = gaps["rows"][-1]
    return (f"graph replay {replay:.2f} us/kernel vs {eager:.1f} us eager ({tiny['speedup']:.0f}x); "
            f"idle gaps at {1e3 * longest['kernel_ms']:.0f} us kernels: "
            f"{100 * longest['graph_gap']:.1f}% replayed, {100 * longest['eager_gap']:.1f}% eager "
            f"({duration_used(gaps)})")


LAB = protocol.Lab(
    number=NUMBER, title="CUDA graphs",
    kernels=(protocol.Kernel("affine_step_kernel", "1-D: one thread per element, one launch per step "
                             "(x = a * x + b in place)", block_size=128),),
    references=("chain_reference",),
    validate=validate,
    benchmarks=lambda lab, torch: [chain_benchmark(lab)],
    measurements=(
        protocol.Measurement("tiny_kernels", measure_tiny_kernels,
                             "per-kernel cost of 100 launch-bound kernels, eager and replayed"),
        protocol.Measurement("idle_gaps", measure_idle_gaps,
                             "idle gaps of a 100-kernel pipeline against kernel length, eager and replayed"),
        protocol.Measurement("batch_graphs", measure_batches,
                             "one graph per batch size: build cost, time per call, break-even calls"),
        protocol.Measurement("batch_strategies", measure_batch_strategies,
                             "one graph per batch size against padding to a bucket and updating one graph "
                             "in place, over streams of calls", in_tour=False),
    ),
    figures=(protocol.Figure("lab08_timeline", plot_timeline, needs=("idle_gaps",)),
             protocol.Figure("lab08_idle_gaps", plot_idle_gaps, needs=("idle_gaps", "tiny_kernels")),
             protocol.Figure("lab08_batch_graphs", plot_batches, needs=("batch_graphs",))),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
