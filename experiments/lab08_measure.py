"""Lab 08's measurements (GPU only), the arithmetic of the idle gaps they record, and the batch
strategies they compare.

`lab08_graphs` declares them (its docstring says what each record holds); `kernellab bench 08`
(GPU) runs them. The gap arithmetic (signed_gap, alone_duration, gap_resolution, gap_problems,
judge_gaps) and the readers of a gap record (resolved, below_resolution, duration_used) are pure:
the figures, the claims and tests/instruments use them without a GPU.
"""

from __future__ import annotations

import time

import numpy as np

from kernellab.course import reference
from kernellab.gpu import checks, device, graphs, timing

from experiments.lab08_constants import (
    ALONE_REPS, BATCH_CALLS, BATCH_FEATURES, BATCH_SIZES, BATCH_STEPS, BUCKETS, GAP_SIZES, GAP_TARGET, IDENTITY,
    KERNELS, LARGEST_BATCH, LONG_KERNEL_MS, NUMBER, TINY_N)


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


def resolved_in_every(repeats: list[dict]) -> list[list[dict]]:
    """Each size's idle_gaps rows over the repeats, for the sizes whose kernel duration every repeat
    resolves, in the first repeat's order (shortest kernel first)."""
    rows = [[r for rep in repeats for r in rep["rows"] if r["n"] == first["n"]] for first in repeats[0]["rows"]]
    return [same for same in rows if len(same) == len(repeats) and all(resolved(r) for r in same)]


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
                     "break_even_calls": break_even_calls(first_ms, graph_ms, eager_ms)})
    return {"provenance": reference.provenance(), "features": BATCH_FEATURES,
            "steps": BATCH_STEPS, "rows": rows, "builds": dispatcher.graphs.builds}


def break_even_calls(first_ms: float, graph_ms: float, eager_ms: float) -> float | None:
    """The calls after which a graph built on the first call has paid for itself: the first call
    also runs the pipeline once, so its build is first - graph, repaid at eager - graph a call
    (None where replay saves nothing)."""
    saved = eager_ms - graph_ms
    return (first_ms - graph_ms) / saved if saved > 0 else None


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
