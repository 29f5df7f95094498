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
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.course.claims import Claim, Missing, need, repeats_of, says, target
from kernellab.gpu import checks, device, graphs, timing
from kernellab.gpu.traffic import Ledger
from kernellab.show import plots


NUMBER = "08"
KERNELS = 100                                   # kernels in the measured pipelines
TINY_N = 128                                    # elements: one block, a launch-bound kernel
GAP_SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 23, 1 << 25)
LONG_KERNEL_MS = 0.020                          # the gap target applies to kernels this long
GAP_TARGET = 0.05
ALONE_REPS = 50                                 # samples of the kernel timed alone (and of its bracket)
BATCH_FEATURES = 4096
BATCH_SIZES = (1, 8, 64, 512)
BATCH_STEPS = 20
BATCH_CALLS = 120                               # calls in each stream of batch sizes a server sees
BUCKETS = tuple(1 << k for k in range(10))      # pad-to-bucket: powers of two, 1 ... 512
LARGEST_BATCH = BUCKETS[-1]
IDENTITY = (np.float32(1.0), np.float32(0.0))   # a step that keeps the values, for timing
CHAIN_STEPS = tuple((np.float32(a), np.float32(b))  # the profiled chain, float32 as the kernel declares
                    for a, b in ((1.5, -0.25), (0.5, 1.0), (-1.25, 0.5), (0.75, 0.0)))
CHAIN_N = 1 << 25                               # 128 MiB: twice the L2, so DRAM bytes are DRAM bytes
GAP_LINEAR_PCT = 1.0                            # the gap axis is linear within +-1% (symlog)


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


# --- measurements (GPU only) ---------------------------------------------------------------------

def measure_tiny_kernels(lab) -> dict:
    """Per-kernel cost of a 100-step pipeline of launch-bound kernels, eager and replayed."""
    cuda = device.cuda()
    x = cuda.to_device(np.ones(TINY_N, dtype=np.float32))
    coeffs = [IDENTITY] * KERNELS
    graph = graphs.capture(lab.pipeline, x, coeffs)
    per_kernel = {
        "eager_host_submit": timing.time_host(lambda: lab.pipeline(x, coeffs), reps=30, inner=5),
        "eager_gpu_events": timing.time_gpu(lambda: lab.pipeline(x, coeffs), reps=30, inner=5,
                                            hide_host=False),   # the GPU waits for the host: the cost
        "graph_host_submit": timing.time_host(graph.replay, reps=50, inner=10),
        "graph_gpu_events": timing.time_gpu(graph.replay, reps=30, inner=20),
    }
    rows = {name: {"us_per_kernel": 1e3 * t.median_ms / KERNELS, **t.as_dict()}
            for name, t in per_kernel.items()}
    kernel = timing.time_gpu(lambda: lab.pipeline(x, coeffs[:1]), warmup=1, reps=20, inner=KERNELS)
    rows["kernel_gpu_queue_full"] = {"us_per_kernel": 1e3 * kernel.median_ms, **kernel.as_dict()}
    eager = rows["eager_gpu_events"]["us_per_kernel"]
    replay = rows["graph_gpu_events"]["us_per_kernel"]
    return {"provenance": reference.provenance(), "kernels": KERNELS, "n": TINY_N, "rows": rows,
            "speedup": eager / replay,
            "targets": {"replay_us_per_kernel_max": 1.0, "speedup_min": 15.0,
                        "replay_ok": replay <= 1.0, "speedup_ok": eager / replay >= 15.0}}


def signed_gap(total_ms: float, kernel_ms: float, kernels: int = KERNELS) -> float:
    """(total - kernels x kernel time) / (kernels x kernel time), negative when the total is shorter."""
    return (total_ms - kernels * kernel_ms) / (kernels * kernel_ms)


def alone_duration(kernel: tuple, bracket: tuple) -> tuple:
    """The kernel's own GPU time, (low, median, high) in ms, from two measurements made apart
    from any replay, each (p10, median, p90): `kernel`, one launch of it between events, and
    `bracket`, the same launch on a single element between the same events. What the events and
    the launch put around a kernel (its launch latency, a few us) is in both and cancels; the
    range pairs the extremes of the two spreads. The one-element kernel's own run goes with it,
    so the duration errs short and a gap against it errs large, by at most the one-element
    kernel's time over the kernel's (a one-block kernel costs a replayed graph well under 1 us
    per node: `tiny_kernels`)."""
    (k10, k50, k90), (b10, b50, b90) = kernel, bracket
    return k10 - b90, k50 - b50, k90 - b10


def marginal_duration(short_ms: float, long_ms: float, kernels: int = KERNELS) -> float:
    """GPU time per kernel inside a graph, from the replays of graphs of `kernels` and 2 x
    `kernels` kernels: the kernel plus the graph's dispatch of one node (the fixed cost of a
    replay cancels). Recorded beside the gaps as a cross-check, never their duration: it comes
    from the replay being judged and holds the gap between nodes inside it, so a gap against it
    shows the replay's fixed cost and nothing else."""
    return (long_ms - short_ms) / kernels


def gap_resolution(duration: tuple, total: tuple) -> float:
    """What a gap of `total` (p10, median, p90) against `duration` (low, median, high) resolves,
    as a fraction of kernel time: the duration's spread over its median plus the total's p10-p90
    spread over its median. Both are the samples' own spreads, the duration's measured apart
    from the replay it judges: nothing is fitted to the gap. Infinite where the duration is not
    positive."""
    (d_low, d_mid, d_high), (t10, t50, t90) = duration, total
    return (d_high - d_low) / d_mid + (t90 - t10) / t50 if d_mid > 0 else float("inf")


def gap_problems(row: dict, kernels: int = KERNELS) -> list[str]:
    """A gap negative by more than its resolution is not a result, nor is a duration that is not
    positive: each is a measurement problem, reported, never clamped."""
    if row["kernel_ms"] <= 0:
        return [f"the kernel's duration ({row['duration_source']}) came out at {row['kernel_ms']:.5f} ms: "
                f"not positive, a measurement problem"]
    return [f"{label}: the total ({row[f'{label}_ms']:.4f} ms) is {-100 * row[f'{label}_gap']:.1f}% below "
            f"{kernels} x the kernel's own duration ({row['kernel_ms']:.4f} ms, {row['duration_source']}), "
            f"beyond what its measurements resolve ({100 * row[f'{label}_resolution']:.2f}%: the duration's "
            f"and the total's p10-p90 spreads): a measurement problem, not a gap"
            for label in ("eager", "graph") if below_resolution(row, label)]


def judge_gaps(record: dict) -> dict:
    """The idle-gap record's problems and target, from its rows."""
    for row in record["rows"]:
        row["problems"] = gap_problems(row)
    long_rows = [r for r in record["rows"] if r["kernel_ms"] >= LONG_KERNEL_MS]
    record["target"] = {"gap_max": GAP_TARGET, "kernel_ms_min": LONG_KERNEL_MS,
                        "ok": bool(long_rows) and all(r["graph_gap"] < GAP_TARGET and not r["problems"]
                                                      for r in long_rows)}
    return record


def has_independent_duration(record: dict) -> bool:
    """Are the record's gaps against the kernel measured alone? A record made before that
    measurement existed (2026-12-01) has them against Nsight Compute's or the replay's own
    marginal duration, which its rows' duration_source names."""
    return all("kernel_alone" in r for r in record["rows"])


def duration_used(record: dict) -> str:
    """Which kernel duration the record's gaps are against, in a few words (figures, key line)."""
    if has_independent_duration(record):
        return "the kernel's duration measured alone"
    return "recorded before the independent duration: against Nsight Compute's or the replay's own kernel time"


def resolved(row: dict) -> bool:
    """Is the row's kernel duration told apart from zero by its own range? Not for kernels as
    short as the one-element launch the bracket subtracts (launch-bound ones)."""
    return row["kernel_ms_range"][0] > 0


def below_resolution(row: dict, label: str) -> bool:
    """Is the row's `label` gap ("eager" or "graph") negative by more than its resolution (the
    figure's red X, one of gap_problems' rules)? A row recorded before the resolution existed
    has none to be below."""
    return f"{label}_resolution" in row and row[f"{label}_gap"] < -row[f"{label}_resolution"]


def spread(t: timing.Timing) -> tuple:
    return t.p10_ms, t.median_ms, t.p90_ms


ALONE = ("the kernel alone: one launch on the chain's buffer between events, less the same launch "
         "on one element")


def ncu_duration(n: int) -> float | None:
    """Median ms of affine_step_kernel at `n` over the recorded profile's launches (Nsight
    Compute flushes the caches before each kernel); None when no profile at that size is recorded."""
    found = [r["gpu_time_ns"] * 1e-6 for r in reference.profile_rows(NUMBER)
             if r["kernel"] == "affine_step_kernel" and r["size"] == n]
    return float(np.median(found)) if found else None


def time_kernel_alone(lab, x) -> timing.Timing:
    """One launch of the pipeline's kernel on `x` between events, the host's submit hidden behind
    a hold (`timing.time_gpu`), ALONE_REPS samples: the kernel measured apart from any replay.
    Each sample follows the previous sample's kernel on the same buffer with only the hold (one
    float) between, so it finds the cache as a kernel inside the chain does: whatever part of x
    the L2 kept from the last kernel that wrote it, all of x where it fits, its tail where not
    (the same state, not a flushed one as under Nsight Compute)."""
    return timing.time_gpu(lambda: lab.pipeline(x, [IDENTITY]), warmup=3, reps=ALONE_REPS)


def gap_row(n: int, eager: timing.Timing, replay: timing.Timing, replay_double: timing.Timing,
            alone: timing.Timing, bracket: timing.Timing) -> dict:
    """One size's row from its measurements: the 100-kernel pipeline eager and replayed, the
    200-kernel replay, the kernel alone on this size's buffer and on one element (`bracket`).
    Each gap is against the duration from `alone` and `bracket` (alone_duration), with its
    resolution from their spreads and its own total's (gap_resolution)."""
    duration = alone_duration(spread(alone), spread(bracket))
    row = {"n": n, "kernel_ms": duration[1], "kernel_ms_range": [duration[0], duration[2]],
           "duration_source": ALONE, "kernel_alone": alone.as_dict(), "bracket": bracket.as_dict(),
           "marginal_kernel_ms": marginal_duration(replay.median_ms, replay_double.median_ms),
           "ncu_kernel_ms": ncu_duration(n),
           "eager_ms": eager.median_ms, "graph_ms": replay.median_ms, "graph_2x_ms": replay_double.median_ms,
           "host_exposed_samples": sum(t.host_exposed for t in (eager, replay, replay_double, alone, bracket))}
    for label, total in (("eager", eager), ("graph", replay)):
        row[f"{label}_gap"] = signed_gap(total.median_ms, duration[1]) if duration[1] > 0 else float("nan")
        row[f"{label}_resolution"] = gap_resolution(duration, spread(total))
    return row


def measure_idle_gaps(lab) -> dict:
    """Idle gaps of a 100-kernel pipeline, eager and replayed, at several kernel lengths: each
    total against 100 x the kernel's own GPU duration, measured alone."""
    cuda = device.cuda()
    coeffs = [IDENTITY] * (2 * KERNELS)
    one = cuda.to_device(np.ones(1, dtype=np.float32))
    rows = []
    for n in GAP_SIZES:
        x = cuda.to_device(np.ones(n, dtype=np.float32))
        graph = graphs.capture(lab.pipeline, x, coeffs[:KERNELS])
        double = graphs.capture(lab.pipeline, x, coeffs)
        eager = timing.time_gpu(lambda: lab.pipeline(x, coeffs[:KERNELS]), warmup=2, reps=15,
                                hide_host=False)           # eager gaps are the host's pacing
        replay = timing.time_gpu(graph.replay, warmup=2, reps=15)
        replay_double = timing.time_gpu(double.replay, warmup=2, reps=15)
        alone = time_kernel_alone(lab, x)
        bracket = time_kernel_alone(lab, one)       # beside `alone`, under the same clocks
        rows.append(gap_row(n, eager, replay, replay_double, alone, bracket))
        del graph, double, x
    return judge_gaps({"provenance": reference.provenance(), "kernels": KERNELS, "rows": rows,
            "method": "gap = total - kernels x the kernel's own GPU duration, measured apart from the "
                      "replays it judges: one launch of the kernel on the chain's buffer between events "
                      f"(host submit hidden, {ALONE_REPS} samples, each after the previous one's kernel on "
                      "that buffer, so the L2 holds what the chain's previous kernel left in it), less "
                      "the same launch on one element (`bracket`: the events' and the launch's latency "
                      "cancel; the one-element kernel's own time goes too, so the duration errs short "
                      "and the gap errs large). Replays: GPU time between "
                      "events, host submit outside the window; eager: as it runs, the GPU waiting for "
                      "the host. A gap's resolution is the duration's p10-p90 spread plus the total's, "
                      "each over its median; gaps signed, never clamped; a gap negative by more than "
                      "its resolution is a measurement problem. Beside it, not used for the gap: the "
                      f"marginal time per kernel in a graph (graphs of {KERNELS} and {2 * KERNELS} "
                      "kernels: kernel plus node dispatch) and Nsight Compute's gpu__time_duration "
                      "(caches flushed before each kernel) where a profile at that size is recorded"})


def measure_batches(lab) -> dict:
    """One graph per batch size: its build cost, and the time per call eager and replayed."""
    cuda = device.cuda()
    coeffs = [IDENTITY] * BATCH_STEPS
    dispatcher = lab.BatchedPipeline(BATCH_FEATURES, coeffs)
    rows = []
    for batch in BATCH_SIZES:
        x = cuda.to_device(np.ones((batch, BATCH_FEATURES), dtype=np.float32))
        flat = cuda.to_device(np.ones(batch * BATCH_FEATURES, dtype=np.float32))
        cuda.synchronize()
        started = time.perf_counter()
        dispatcher(x)                                   # builds this batch size's graph
        cuda.synchronize()
        first_ms = (time.perf_counter() - started) * 1e3
        # what a call costs as it runs (the GPU waiting for the host included): the saving a graph buys
        graph_ms = timing.time_gpu(lambda: dispatcher(x), reps=20, hide_host=False).median_ms
        eager_ms = timing.time_gpu(lambda: lab.pipeline(flat, coeffs), reps=20, hide_host=False).median_ms
        saved = eager_ms - graph_ms
        rows.append({"batch": batch, "first_call_ms": first_ms, "graph_ms": graph_ms,
                     "eager_ms": eager_ms,
                     "break_even_calls": first_ms / saved if saved > 0 else None})
    return {"provenance": reference.provenance(), "features": BATCH_FEATURES,
            "steps": BATCH_STEPS, "rows": rows, "builds": dispatcher.graphs.builds}


class PaddedToBucket:
    """Pad-to-bucket, the alternative to one graph per batch size: graphs only for the bucket
    sizes (`buckets`, ascending), each batch copied into the static buffer of the smallest bucket
    that holds it (the padding rows computed and thrown away). Fewer graphs to build and keep,
    more work per call. The buckets' buffers and graphs are the lab's BatchedPipeline's; returns
    a view of the batch's rows."""

    def __init__(self, lab, features, coeffs, buckets=BUCKETS):
        self.buckets = tuple(buckets)
        self.dispatcher = lab.BatchedPipeline(features, coeffs)

    def bucket(self, batch: int) -> int:
        fits = [b for b in self.buckets if b >= batch]
        if not fits:
            raise ValueError(f"a batch of {batch} rows is larger than the largest bucket ({self.buckets[-1]})")
        return fits[0]

    def __call__(self, x):
        static, graph = self.dispatcher.graphs[self.bucket(x.shape[0])]   # built on first use
        static[: x.shape[0]].copy_to_device(x)          # the padding rows keep whatever they held
        graph.replay()
        return static[: x.shape[0]]


class UpdatedInPlace:
    """One graph updated in place, the other alternative: a single executable graph over one
    buffer of the largest batch; when the batch size changes, the pipeline is captured again
    on the new size's view (a definition only, not instantiated) and the executable's kernel
    nodes are updated from it (cuGraphExecUpdate: same topology, new grid and arguments).
    GPU only (the simulator's graphs have no executable to update)."""

    def __init__(self, lab, features, coeffs, largest=LARGEST_BATCH):
        cuda = device.cuda()
        self.lab, self.features, self.coeffs = lab, features, list(coeffs)
        self.buffer = cuda.device_array(largest * features, dtype=np.float32)
        self.batch = 1
        self.graph = graphs.capture(lab.pipeline, self.buffer[:features], self.coeffs)
        self.updates = 0

    def __call__(self, x):
        from cuda.core import Device
        batch = x.shape[0]
        flat = self.buffer[: batch * self.features]
        if batch != self.batch:
            gpu = Device(device.cuda().get_current_device().id)
            gpu.set_current()                       # the primary context, the one Numba uses
            builder = gpu.create_graph_builder()
            builder.begin_building()
            self.lab.pipeline(flat, self.coeffs, stream=builder)
            builder.end_building()
            self.graph.executable.update(builder)
            builder.close()
            self.batch, self.updates = batch, self.updates + 1
        flat.copy_to_device(x.reshape(batch * self.features))
        self.graph.replay()
        return flat.reshape(batch, self.features)      # the batch's shape, as the others return


def batch_streams(seed: int = 8) -> dict[str, list[int]]:
    """The two streams of calls the strategies serve: few sizes that recur, and many sizes."""
    rng = np.random.default_rng(seed)
    return {"few_sizes": [BATCH_SIZES[k % len(BATCH_SIZES)] for k in range(BATCH_CALLS)],
            "many_sizes": [int(b) for b in rng.integers(1, LARGEST_BATCH + 1, BATCH_CALLS)]}


def measure_batch_strategies(lab) -> dict:
    """One graph per batch size against padding to a bucket and against one graph updated in
    place, over the same streams of calls: host time per call as a server sees it (each call
    waits for its result; builds, re-captures and updates included), graphs built, static bytes."""
    cuda = device.cuda()
    coeffs = [IDENTITY] * BATCH_STEPS
    rows = {}
    for stream_name, sizes in batch_streams().items():
        inputs = {b: cuda.to_device(np.ones((b, BATCH_FEATURES), dtype=np.float32)) for b in set(sizes)}
        strategies = {"per_size": lab.BatchedPipeline(BATCH_FEATURES, coeffs),
                      "pad_to_bucket": PaddedToBucket(lab, BATCH_FEATURES, coeffs),
                      "update_in_place": UpdatedInPlace(lab, BATCH_FEATURES, coeffs)}
        for name, call in strategies.items():
            cuda.synchronize()
            started = time.perf_counter()
            for batch in sizes:
                call(inputs[batch])
                cuda.synchronize()
            per_call_ms = (time.perf_counter() - started) * 1e3 / len(sizes)
            checks.assert_matches(call(inputs[sizes[-1]]), np.ones((sizes[-1], BATCH_FEATURES)),
                                  rtol=1e-6, what=f"{name} on {stream_name}")
            graphs_built = {"per_size": lambda: call.graphs.builds,
                            "pad_to_bucket": lambda: call.dispatcher.graphs.builds,
                            "update_in_place": lambda: 1}[name]()
            static = {"per_size": lambda: sum(b for b in set(sizes)),
                      "pad_to_bucket": lambda: sum(call.dispatcher.graphs.keys()),
                      "update_in_place": lambda: LARGEST_BATCH}[name]() * BATCH_FEATURES * 4
            rows[f"{stream_name}/{name}"] = {
                "calls": len(sizes), "distinct_sizes": len(set(sizes)), "per_call_ms": per_call_ms,
                "graphs_built": graphs_built, "static_bytes": static,
                "updates": getattr(call, "updates", 0)}
    return {"provenance": reference.provenance(), "features": BATCH_FEATURES, "steps": BATCH_STEPS,
            "buckets": list(BUCKETS), "rows": rows,
            "method": "host time per call over each stream of calls, each call waiting for its result "
                      "(cuda.synchronize): graph builds, re-captures and updates included, as a server "
                      "pays them; static bytes = the device buffers the graphs read"}


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


# --- figures -------------------------------------------------------------------------------------

def plot_timeline(lab, records: dict, figures_dir: Path) -> Path:
    """A 100-kernel pipeline before and after capture, for the shortest and the longest kernels."""
    gaps = records["idle_gaps"]
    drawn = [r for r in gaps["rows"] if resolved(r)]
    cases = [drawn[0], drawn[-1]]
    fig, axes = plots.new_figure(f"{gaps['kernels']}-kernel pipeline, eager vs graph replay, reconstructed "
                                 f"from the total and the kernel time\nkernel time: {duration_used(gaps)}",
                                 gaps, ncols=2)
    for ax, row in zip(axes, cases):
        for lane, (label, total) in enumerate((("eager", row["eager_ms"]),
                                               ("graph", row["graph_ms"]))):
            bars = lab.reconstructed_timeline(row["kernel_ms"], total, gaps["kernels"])
            ax.broken_barh([(1e3 * s, 1e3 * (e - s)) for s, e in bars], (lane - 0.35, 0.7),
                           color=f"C{lane}")
            gap = 100 * row[f"{label}_gap"]
            ax.annotate(f"{total * 1e3:.0f} us, gaps {gap:.{0 if gap >= 10 else 1}f}% of kernel time",
                        (0, lane + 0.37), va="bottom", fontsize="small")     # above its bar
        ax.set_yticks([0, 1], ["eager", "graph"])
        ax.set_ylim(-0.5, 1.8)
        ax.set_xlim(0, 1e3 * max(row["eager_ms"], row["graph_ms"]) * 1.02)
        ax.set_xlabel("time (us)")
        ax.set_title(f"n = {row['n']:,}: kernel {1e3 * row['kernel_ms']:.1f} us")
    return plots.save(fig, "lab08_timeline", figures_dir)


def plot_idle_gaps(lab, records: dict, figures_dir: Path) -> Path:
    """Idle gaps against kernel length, eager and replayed; per-kernel cost of tiny kernels."""
    gaps, tiny = records["idle_gaps"], records["tiny_kernels"]
    fig, (ax_gap, ax_cost) = plots.new_figure("Idle gaps between kernels, and the cost per kernel",
                                              gaps, ncols=2)
    drawn = [r for r in gaps["rows"] if resolved(r)]
    kernel_us = [1e3 * r["kernel_ms"] for r in drawn]
    for label in ("eager", "graph"):
        values = [100 * r[f"{label}_gap"] for r in drawn]
        ax_gap.plot(kernel_us, values, "o-", label=label)
        bad = [(k, v) for k, v, r in zip(kernel_us, values, drawn) if below_resolution(r, label)]
        if bad:
            ax_gap.plot(*zip(*bad), "x", color="red", markersize=9,
                        label=f"{label}: below zero beyond\nits resolution (measurement problem)")
    ax_gap.axhline(100 * GAP_TARGET, color="k", ls=":", label="article: gaps < 5%")
    ax_gap.axvline(1e3 * LONG_KERNEL_MS, color="grey", ls="--", lw=0.8, label="20 us kernels")
    ax_gap.set_xscale("log")
    ax_gap.set_yscale("symlog", linthresh=GAP_LINEAR_PCT)
    ax_gap.axhline(0, color="grey", lw=0.6)
    ax_gap.xaxis.set_minor_formatter(NullFormatter())
    left_out = len(gaps["rows"]) - len(drawn)
    ax_gap.set_title(textwrap.fill(f"kernel time: {duration_used(gaps)}", 70)
                     + (f"\n{left_out} size(s) not drawn: duration not resolved from zero" if left_out else ""),
                     fontsize="small")
    ax_gap.set_xlabel("kernel's own GPU time (us)")
    ax_gap.set_ylabel("idle gaps, % of kernel time\n(signed, not clamped)")
    ax_gap.legend(loc="lower left")                 # below the points: the negative gaps are few
    names = list(tiny["rows"])
    ax_cost.barh(names, [tiny["rows"][n]["us_per_kernel"] for n in names],
                 color=["C0" if n.startswith("eager") else "C1" if n.startswith("graph") else "grey"
                        for n in names])
    ax_cost.set_xscale("log")
    ax_cost.set_xlabel(f"us per kernel\n({tiny['kernels']} kernels of {tiny['n']} elements)")
    return plots.save(fig, "lab08_idle_gaps", figures_dir)


def plot_batches(lab, records: dict, figures_dir: Path) -> Path:
    """Per-call time eager and replayed for each batch size, and the calls a graph takes to pay off."""
    batches = records["batch_graphs"]
    fig, (ax,) = plots.new_figure(f"One graph per batch size: {batches['steps']} steps on "
                                  f"(batch, {batches['features']}) float32", batches)
    sizes = [r["batch"] for r in batches["rows"]]
    ax.plot(sizes, [r["eager_ms"] for r in batches["rows"]], "o-", label="eager")
    ax.plot(sizes, [r["graph_ms"] for r in batches["rows"]], "o-", label="graph replay")
    for r in batches["rows"]:
        if r["break_even_calls"]:
            ax.annotate(f"graph pays off\nafter {r['break_even_calls']:.0f} calls",
                        (r["batch"], r["eager_ms"]), xytext=(0, 8), textcoords="offset points",
                        ha="center", fontsize="x-small")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (rows)")
    ax.set_ylabel("time per call (ms)")
    ax.legend(fontsize="small")
    return plots.save(fig, "lab08_batch_graphs", figures_dir)


def key_figure(lab, records: dict) -> str:
    tiny, gaps = records["tiny_kernels"], records["idle_gaps"]
    replay = tiny["rows"]["graph_gpu_events"]["us_per_kernel"]
    eager = tiny["rows"]["eager_gpu_events"]["us_per_kernel"]
    longest = gaps["rows"][-1]
    return (f"graph replay {replay:.2f} us/kernel vs {eager:.1f} us eager ({tiny['speedup']:.0f}x); "
            f"idle gaps at {1e3 * longest['kernel_ms']:.0f} us kernels: "
            f"{100 * longest['graph_gap']:.1f}% replayed, {100 * longest['eager_gap']:.1f}% eager "
            f"({duration_used(gaps)})")


# --- claims: the discussion's sentences, checked against the records ------------------------------

def _replay_values(records):
    tiny = need(records, "tiny_kernels")
    return {"replay": tiny["rows"]["graph_gpu_events"]["us_per_kernel"],
            "eager": tiny["rows"]["eager_gpu_events"]["us_per_kernel"], "speedup": tiny["speedup"],
            "host": tiny["rows"]["graph_host_submit"]["us_per_kernel"],
            "replay_max": tiny["targets"]["replay_us_per_kernel_max"], "speedup_min": tiny["targets"]["speedup_min"]}


def _gap_values(records):
    """The gaps claim, judged on the worst repeat: the largest replayed gap over the kernels of
    >= 20 us, the lowest replayed gap against what its measurements resolve, and where eager
    launches first stay under 5%. Awaiting data while the records' gaps are not against the
    kernel measured alone."""
    repeats = repeats_of(records, "idle_gaps", NUMBER)
    if not all(has_independent_duration(rep) for rep in repeats):
        raise Missing("idle_gaps was recorded before the kernel's independent duration (kernel_alone); "
                      "`kernellab bench 08 --repeat 3` on a GPU records it")
    every = [r for rep in repeats for r in rep["rows"]]
    long_rows = [r for r in every if r["kernel_ms"] >= LONG_KERNEL_MS]
    if not long_rows:
        raise Missing(f"idle_gaps has no kernel of >= {1e3 * LONG_KERNEL_MS:.0f} us")
    measured = [r for r in every if resolved(r)]
    rows = [r for r in repeats[0]["rows"] if resolved(r)]
    if not rows:
        raise Missing("idle_gaps resolves no size's kernel duration from zero in its first repeat")
    eager_ok = [r for r in rows if all(x["eager_gap"] < GAP_TARGET for x in measured if x["n"] == r["n"])]
    lowest = min(measured, key=lambda r: r["graph_gap"])
    return {"worst": 100 * max(r["graph_gap"] for r in long_rows),
            "all_graph": 100 * max(r["graph_gap"] for r in measured), "unresolved": len(every) - len(measured),
            "short_us": 1e3 * rows[0]["kernel_ms"], "short_eager": 100 * rows[0]["eager_gap"],
            "eager_from_us": 1e3 * min((r["kernel_ms"] for r in eager_ok), default=float("nan")),
            "repeats": len(repeats), "problems": sum(len(r["problems"]) for r in every),
            "target_pct": 100 * GAP_TARGET, "lowest": 100 * lowest["graph_gap"],
            "floor": -100 * lowest["graph_resolution"]}


def _batch_values(records):
    rows = need(records, "batch_graphs", "rows")
    return {"builds": len(rows), "first_lo": min(r["first_call_ms"] for r in rows),
            "first_hi": max(r["first_call_ms"] for r in rows),
            "even_lo": min(r["break_even_calls"] for r in rows if r["break_even_calls"]),
            "even_hi": max(r["break_even_calls"] for r in rows if r["break_even_calls"])}


def _strategy_values(records):
    rows = need(records, "batch_strategies", "rows")
    ms = {key: row["per_call_ms"] for key, row in rows.items()}
    return {"few_per": ms["few_sizes/per_size"], "few_pad": ms["few_sizes/pad_to_bucket"],
            "few_upd": ms["few_sizes/update_in_place"], "many_per": ms["many_sizes/per_size"],
            "many_pad": ms["many_sizes/pad_to_bucket"], "many_upd": ms["many_sizes/update_in_place"],
            "many_graphs": rows["many_sizes/per_size"]["graphs_built"],
            "bucket_graphs": rows["many_sizes/pad_to_bucket"]["graphs_built"],
            "few_other": min(ms["few_sizes/pad_to_bucket"], ms["few_sizes/update_in_place"])}


CLAIMS = [
    Claim("replay_cost",
          "Replayed as a graph, a kernel costs {replay:.2f} us of GPU time (target: at most {replay_max:.0f} us, "
          "{replay_met}) against {eager:.1f} us eager, {speedup:.0f}x less (target: at least {speedup_min:.0f}x, "
          "{speedup_met}); the host spends {host:.3f} us per kernel submitting the replay.",
          headline="100-kernel pipeline replayed: {replay:.2f} us per kernel, {speedup:.0f}x cheaper than eager",
          values=_replay_values,
          checks=(target("replay_met", "replay", "<=", "replay_max"),
                  target("speedup_met", "speedup", ">=", "speedup_min"))),
    Claim("gaps_below_5pct",
          "Replayed, the gaps between 100 kernels of >= 20 us stay at or below {worst:.2f}% of kernel time "
          "against the kernel's duration measured alone (one launch between events on the chain's buffer, "
          "less the same launch on one element; worst of {repeats} repeats; target: under {target_pct:.0f}%, "
          "{met}); {all_graph:.1f}% at worst for any kernel whose duration that resolves ({unresolved} "
          "row(s) over the repeats it does not: kernels as short as the one-element launch). The lowest "
          "replayed gap, {lowest:+.2f}%, lies {above} {floor:+.2f}%, the negative of what its measurements "
          "resolve (the duration's and the replay's p10-p90 spreads): the record's rule counts {problems} "
          "measurement problems. Eager, the 5% holds only from {eager_from_us:.0f} us kernels on: at "
          "{short_us:.1f} us the GPU idles {short_eager:.0f}% of the kernel time. Gaps < 5% is a property of "
          "kernel length and launch path, not of the GPU.",
          headline="replayed gaps at most {worst:.2f}% for kernels of 20 us or more, against the kernel timed "
                   "alone (target under {target_pct:.0f}%: {met})",
          values=_gap_values,
          checks=(target("met", "worst", "<", "target_pct"),
                  says("above", "lowest", ">=", "floor", "at or above", "below")),
          article="gaps",
          explains="the replayed gap is measured against the kernel's duration taken apart from the replay "
                   "it judges: one launch of the kernel between events on the chain's own buffer, so it "
                   "finds the L2 as a kernel in the chain does (holding what the previous kernel on that "
                   "buffer wrote), less the same launch on one element, which takes out the latency the events and the "
                   "launch add, and the one-element kernel's own run with it: the duration errs short, so "
                   "the gap errs large. It holds all that the graph adds to its kernels, the "
                   "dispatch of each node and the replay's fixed cost. The record keeps Nsight Compute's "
                   "duration (caches flushed before each kernel) and the marginal time per kernel in a graph "
                   "(the kernel plus its node's dispatch) beside it, as cross-checks; a gap's resolution is "
                   "the duration's p10-p90 spread plus the replay's, and only a gap below zero by more than "
                   "that is a measurement problem"),
    Claim("graph_per_batch_build",
          "Building one batch size's graph (capture, instantiation, first replay) takes {first_lo:.1f}-"
          "{first_hi:.1f} ms; it pays for itself after {even_lo:.0f}-{even_hi:.0f} calls of that size "
          "({soon}).",
          values=_batch_values,
          checks=(says("soon", "even_hi", "<", 100, "under 100 calls", "100 calls or more"),)),
    Claim("one_graph_per_batch_size",
          "Over {calls} calls cycling through 4 batch sizes, one graph per batch size costs {few_per:.3f} ms "
          "a call, padding to a power-of-two bucket {few_pad:.3f} ms, one graph updated in place "
          "{few_upd:.3f} ms (the best of those two: {few_other:.3f} ms). Over {calls} calls of random sizes 1-512 "
          "({many_graphs} distinct: as many graphs to build), {many_per:.3f} ms, {many_pad:.3f} ms "
          "({bucket_graphs} bucket graphs) and {many_upd:.3f} ms. One graph per batch size {few_verdict} when a "
          "few sizes recur; with many sizes, padding to buckets {many_verdict}.",
          values=lambda r: {**_strategy_values(r), "calls": BATCH_CALLS},
          checks=(says("few_verdict", "few_per", "<=", "few_other", "wins", "loses"),
                  says("many_verdict", "many_pad", "<", "many_per", "beats it, building fewer graphs",
                       "does not beat it")),
          article="graphs"),
]


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
