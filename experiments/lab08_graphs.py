"""Lab 08 experiments: what a CUDA graph removes, measured.

- Tiny kernels: a 100-step pipeline on a 128-element buffer (one block), launched eagerly and
  replayed as a graph; the cost per kernel on the host and on the GPU. Targets (H200): replay
  <= 1 us per kernel and >= 15x cheaper than a plain Numba launch.
- Idle gaps (the seed article's metric, target < 5% of kernel time): a 100-kernel pipeline at
  several buffer sizes, eager and replayed. Replays are GPU time between two events with the
  host's submit outside the window (`timing.time_gpu` holds the GPU while the host submits); the
  eager pipeline is timed as it runs, the GPU waiting for the host between launches, since those
  waits are the gaps being measured. The gaps are total - 100 x the kernel's own GPU duration,
  signed: a duration without launch latency (a kernel timed alone between events carries its own,
  ~2.5 us, and made the replayed gaps come out 1.5-6% negative on an H200): Nsight Compute's
  gpu__time_duration where recorded, else the marginal time per kernel from graphs of 100 and 200
  kernels. A total below the kernels' sum beyond the timing spread is a measurement problem, never
  clamped to 0. Target: < 5% replayed, for kernels of >= 20 us, with no measurement problem.
- One graph per batch size: build cost, per-call time eager and replayed, break-even calls.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
from matplotlib.ticker import NullFormatter

from kernellab.course import bench as harness
from kernellab.gpu import checks, device, graphs, timing
from kernellab.show import plots
from kernellab.course import reference, target
from kernellab.gpu.traffic import Ledger
from kernellab.course.protocol import TourResult


LAB = "08"
KERNELS = 100                                   # kernels in the measured pipelines
TINY_N = 128                                    # elements: one block, a launch-bound kernel
GAP_SIZES = (1 << 12, 1 << 16, 1 << 20, 1 << 23, 1 << 25)
LONG_KERNEL_MS = 0.020                          # the gap target applies to kernels this long
GAP_TARGET = 0.05
BATCH_FEATURES = 4096
BATCH_SIZES = (1, 8, 64, 512)
BATCH_STEPS = 20
IDENTITY = (1.0, 0.0)                           # a step that keeps the values, for timing
CHAIN_STEPS = ((1.5, -0.25), (0.5, 1.0), (-1.25, 0.5), (0.75, 0.0))   # the profiled chain
CHAIN_N = 1 << 25                               # 128 MiB: twice the L2, so DRAM bytes are DRAM bytes
GAP_LINEAR_PCT = 1.0                            # the gap axis is linear within +-1% (symlog)


def chain_reference(x, coeffs):
    out = x.astype(np.float64)
    for a, b in coeffs:
        out = a * out + b
    return out


def validate(n: int, steps: int = 4, seed: int = 0) -> list[str]:
    """Every variant, the batch dispatcher and the capture breakers, checked; returns what passed."""
    lab = target.load(LAB)
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    coeffs = [(float(a), float(b)) for a, b in checks.nonzero(rng, (steps, 2))]
    x = checks.nonzero(rng, n)
    for name, (run, _why) in lab.VARIANTS.items():
        d_x = cuda.to_device(x)
        run(d_x, coeffs)
        checks.assert_matches(d_x, chain_reference(x, coeffs), rtol=1e-5, what=f"lab 08 {name}")
    features = 7
    dispatcher = lab.BatchedPipeline(features, coeffs)
    for batch in (3, 2, 3):
        rows = checks.nonzero(rng, (batch, features))
        checks.assert_matches(dispatcher(cuda.to_device(rows)), chain_reference(rows, coeffs),
                              rtol=1e-5, what=f"BatchedPipeline, batch {batch}")
    if dispatcher.graphs.builds != 2:
        raise AssertionError(f"BatchedPipeline built {dispatcher.graphs.builds} graphs for 2 sizes")
    for cause, attempt in lab.capture_breakers(cuda.to_device(x), coeffs).items():
        try:
            attempt()
        except graphs.CaptureError:
            continue
        raise AssertionError(f"capture breaker {cause!r} did not raise CaptureError")
    return [*lab.VARIANTS, "batched", "capture breakers"]


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
        reference=lambda inputs: chain_reference(inputs["x"], CHAIN_STEPS),
        variants=[harness.Variant("eager", run, "one launch per step, each a read and a write of x",
                                  ledger=chain_ledger)])


# --- measurements (GPU only) ---------------------------------------------------------------------

def measure_tiny_kernels() -> dict:
    """Per-kernel cost of a 100-step pipeline of launch-bound kernels, eager and replayed."""
    lab = target.load(LAB)
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


def marginal_duration(short: tuple, long: tuple, kernels: int = KERNELS) -> tuple:
    """A kernel's GPU time without its launch latency, from replays of graphs of `kernels` and
    2 x `kernels` kernels, each (p10, median, p90) in ms: (low, median, high) of
    (long - short) / kernels, the range from the replays' spreads. What a graph adds per kernel
    (its dispatch) stays in it; the fixed cost of one replay (launching the graph, its events)
    cancels."""
    (s10, s50, s90), (l10, l50, l90) = short, long
    return (l10 - s90) / kernels, (l50 - s50) / kernels, (l90 - s10) / kernels


def gap_range(total: tuple, duration: tuple, kernels: int = KERNELS) -> tuple:
    """(low, median, high) of the signed gap (total - kernels x duration) / (kernels x duration),
    from the total's (p10, median, p90) and the duration's (low, median, high): the high end is
    the gap the measurements allow at their most favourable, so a negative high end is a total
    below the kernels' sum beyond the timing spread. A duration that is not positive gives no gap
    (NaN; `gap_problems` reports it), a low end that is not positive no upper bound (inf)."""
    (t10, t50, t90), (d_low, d_mid, d_high) = total, duration
    nan = float("nan")
    return (signed_gap(t10, d_high, kernels) if d_high > 0 else nan,
            signed_gap(t50, d_mid, kernels) if d_mid > 0 else nan,
            signed_gap(t90, d_low, kernels) if d_low > 0 else float("inf"))


def gap_problems(row: dict, kernels: int = KERNELS) -> list[str]:
    """A gap negative beyond the timing spread is not a result, nor is a duration that is not
    positive: each is a measurement problem, reported, never clamped."""
    if row["kernel_ms"] <= 0:
        return [f"the kernel's duration ({row['duration_source']}) came out at {row['kernel_ms']:.5f} ms: "
                f"not positive, a measurement problem"]
    return [f"{label}: the total ({row[f'{label}_ms']:.4f} ms) is {-100 * row[f'{label}_gap']:.1f}% below "
            f"{kernels} x the kernel's own duration ({row['kernel_ms']:.4f} ms, {row['duration_source']}), "
            f"beyond the timing spread (at most {100 * row[f'{label}_gap_range'][2]:.1f}%): a measurement "
            f"problem, not a gap" for label in ("eager", "graph") if row[f"{label}_gap_range"][2] < 0]


def spread(t: timing.Timing) -> tuple:
    return t.p10_ms, t.median_ms, t.p90_ms


MARGINAL = "marginal GPU time per kernel from replays of graphs of {k} and {k2} kernels"
NCU = ("Nsight Compute gpu__time_duration of affine_step_kernel (recorded profile, {date}; ncu "
       "flushes the caches before each kernel, so a chain that finds part of its buffer in L2 can beat it)")


def ncu_duration(n: int) -> tuple | None:
    """(low, median, high) ms of affine_step_kernel at `n` over the recorded profile's launches,
    and the profile's date; None when no profile of lab 08 at that size is recorded."""
    found = [r["gpu_time_ns"] * 1e-6 for r in reference.profile_rows(LAB)
             if r["kernel"] == "affine_step_kernel" and r["size"] == n]
    if not found:
        return None
    stored = (reference.load(LAB) or {}).get("profile", {}).get("provenance", {})
    return (min(found), float(np.median(found)), max(found)), stored.get("date", "date unrecorded")[:10]


def measure_idle_gaps() -> dict:
    """Idle gaps of a 100-kernel pipeline, eager and replayed, at several kernel lengths: each
    total against the sum of the kernels' own GPU durations."""
    lab = target.load(LAB)
    cuda = device.cuda()
    coeffs = [IDENTITY] * (2 * KERNELS)
    rows = []
    for n in GAP_SIZES:
        x = cuda.to_device(np.ones(n, dtype=np.float32))
        graph = graphs.capture(lab.pipeline, x, coeffs[:KERNELS])
        double = graphs.capture(lab.pipeline, x, coeffs)
        eager = timing.time_gpu(lambda: lab.pipeline(x, coeffs[:KERNELS]), warmup=2, reps=15,
                                hide_host=False)           # eager gaps are the host's pacing
        replay = timing.time_gpu(graph.replay, warmup=2, reps=15)
        replay_double = timing.time_gpu(double.replay, warmup=2, reps=15)
        marginal = marginal_duration(spread(replay), spread(replay_double))
        profiled = ncu_duration(n)
        duration, source = (profiled[0], NCU.format(date=profiled[1])) if profiled else \
            (marginal, MARGINAL.format(k=KERNELS, k2=2 * KERNELS))
        row = {"n": n, "kernel_ms": duration[1], "kernel_ms_range": [duration[0], duration[2]],
               "duration_source": source, "marginal_kernel_ms": marginal[1],
               "ncu_kernel_ms": profiled[0][1] if profiled else None,
               "eager_ms": eager.median_ms, "graph_ms": replay.median_ms,
               "graph_2x_ms": replay_double.median_ms,
               "host_exposed_samples": eager.host_exposed + replay.host_exposed + replay_double.host_exposed}
        for label, total in (("eager", eager), ("graph", replay)):
            row[f"{label}_gap_range"] = list(gap_range(spread(total), duration))
            row[f"{label}_gap"] = row[f"{label}_gap_range"][1]
        row["problems"] = gap_problems(row)
        rows.append(row)
        del graph, double, x
    long_rows = [r for r in rows if r["kernel_ms"] >= LONG_KERNEL_MS]
    return {"provenance": reference.provenance(), "kernels": KERNELS, "rows": rows,
            "method": "gap = total - kernels x the kernel's own GPU duration (no launch latency): "
                      "Nsight Compute's gpu__time_duration where a profile of lab 08 is recorded at "
                      "that size, otherwise the marginal time per kernel from replays of graphs of "
                      f"{KERNELS} and {2 * KERNELS} kernels (which keeps the graph's per-kernel "
                      "dispatch in the duration); each row's duration_source says which. Replays: GPU "
                      "time between events, host submit outside the window; eager: as it runs, the GPU "
                      "waiting for the host. Gaps signed, never clamped; a gap negative beyond the "
                      "timing spread (p10-p90) is a measurement problem",
            "target": {"gap_max": GAP_TARGET, "kernel_ms_min": LONG_KERNEL_MS,
                       "ok": bool(long_rows) and all(r["graph_gap"] < GAP_TARGET and not r["problems"]
                                                     for r in long_rows)}}


def measure_batches() -> dict:
    """One graph per batch size: its build cost, and the time per call eager and replayed."""
    lab = target.load(LAB)
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


# Every measurement by name: what bench() records and what the tour and the notebook draw.
MEASUREMENTS = {
    "tiny_kernels": measure_tiny_kernels,
    "idle_gaps": measure_idle_gaps,
    "batch_graphs": measure_batches,
}


def measured(name: str) -> dict | None:
    """One of MEASUREMENTS: live on a GPU, the recorded reference in the simulator (idle gaps only
    when recorded against the kernels' own durations: earlier records clamped negative gaps to 0,
    or subtracted a kernel timed alone, launch latency included)."""
    record = reference.live_or_recorded(LAB, name, MEASUREMENTS[name])
    if name == "idle_gaps" and record and "duration_source" not in record["rows"][0]:
        print("the recorded H200 idle gaps predate gaps against the kernels' own durations (a kernel "
              "timed alone carries its launch latency): not shown (re-record with `kernellab bench 08` "
              "on a GPU)")
        return None
    return record


def bench(out_dir: Path | None = None) -> dict:
    """Validate, then (GPU) measure tiny kernels, idle gaps and batch graphs; print the targets."""
    names = validate(1000 if device.is_simulator() else 100_003)
    harness.run(chain_benchmark(target.load(LAB)), lab=LAB, out_dir=out_dir)   # the simulator: ledger vs meter
    if device.is_simulator():
        print(f"validated {', '.join(names)}; simulator: no timing exists")
        return {}
    record = {name: measure() for name, measure in MEASUREMENTS.items()}
    print(report(record))
    reference.save(LAB, record, out_dir)
    return record


def report(record: dict) -> str:
    """The tables and the targets, one line each."""
    tiny = record["tiny_kernels"]
    lines = [f"{KERNELS}-kernel pipeline of {tiny['n']}-element steps, per kernel:"]
    lines += [f"  {name:<24} {row['us_per_kernel']:8.2f} us" for name, row in tiny["rows"].items()]
    target_line = tiny["targets"]
    lines.append(f"  target: replay <= 1 us/kernel: {'met' if target_line['replay_ok'] else 'MISSED'}"
                 f"; >= 15x cheaper than eager: {tiny['speedup']:.1f}x "
                 f"{'met' if target_line['speedup_ok'] else 'MISSED'}")
    gaps = record["idle_gaps"]
    lines.append(f"idle gaps, {KERNELS} kernels (total - kernels x the kernel's own duration) / kernels' "
                 f"time, p10-p90 range in brackets:")
    lines.append(f"  {'n':>10} {'kernel us':>10} {'eager ms':>9} {'graph ms':>9} {'eager gap':>10} "
                 f"{'graph gap':>10}")
    for r in gaps["rows"]:
        ranges = "  ".join(f"{label} [{100 * r[f'{label}_gap_range'][0]:.1f}, "
                           f"{100 * r[f'{label}_gap_range'][2]:.1f}]%" for label in ("eager", "graph"))
        lines.append(f"  {r['n']:>10} {1e3 * r['kernel_ms']:>10.2f} {r['eager_ms']:>9.3f} "
                     f"{r['graph_ms']:>9.3f} {100 * r['eager_gap']:>9.1f}% "
                     f"{100 * r['graph_gap']:>9.1f}%  {ranges}  kernel: {r['duration_source']}")
        lines += [f"  {'':>10} MEASUREMENT PROBLEM: {problem}" for problem in r.get("problems", [])]
    lines.append(f"  target: replayed gaps < 5% for kernels >= 20 us, none negative beyond the spread: "
                 f"{'met' if gaps['target']['ok'] else 'MISSED'}")
    lines.append("one graph per batch size (first call includes the capture):")
    for r in record["batch_graphs"]["rows"]:
        even = f"{r['break_even_calls']:.0f}" if r["break_even_calls"] else "never"
        lines.append(f"  batch {r['batch']:>4}: first call {r['first_call_ms']:7.2f} ms, then "
                     f"{r['graph_ms']:.3f} ms replayed vs {r['eager_ms']:.3f} ms eager; "
                     f"break-even after {even} calls")
    return "\n".join(lines)


# --- figures -------------------------------------------------------------------------------------

def plot_timeline(gaps: dict, figures_dir: Path) -> Path:
    """A 100-kernel pipeline before and after capture, for the shortest and the longest kernels."""
    lab = target.load(LAB)
    cases = [gaps["rows"][0], gaps["rows"][-1]]
    fig, axes = plots.new_figure(f"{gaps['kernels']}-kernel pipeline, eager vs graph replay "
                                 "(reconstructed: the kernel's own duration, gaps from the total)",
                                 gaps, ncols=2)
    for ax, row in zip(axes, cases):
        for lane, (label, total) in enumerate((("eager", row["eager_ms"]),
                                               ("graph", row["graph_ms"]))):
            bars = lab.reconstructed_timeline(row["kernel_ms"], total, gaps["kernels"])
            ax.broken_barh([(1e3 * s, 1e3 * (e - s)) for s, e in bars], (lane - 0.35, 0.7),
                           color=f"C{lane}")
            gap = 100 * row[f"{label}_gap"]
            ax.annotate(f"{total * 1e3:.0f} us, gaps {gap:.{0 if gap >= 10 else 1}f}% of kernel time",
                        (1e3 * total, lane), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=8)
        ax.set_yticks([0, 1], ["eager", "graph"])
        ax.set_xlim(0, 1e3 * max(row["eager_ms"], row["graph_ms"]) * 1.45)
        ax.set_xlabel("time (us)")
        ax.set_title(f"n = {row['n']:,}: kernel {1e3 * row['kernel_ms']:.1f} us", fontsize=9)
    return plots.save(fig, "lab08_timeline", figures_dir)


def plot_idle_gaps(gaps: dict, tiny: dict, figures_dir: Path) -> Path:
    """Idle gaps against kernel length, eager and replayed; per-kernel cost of tiny kernels."""
    fig, (ax_gap, ax_cost) = plots.new_figure("Idle gaps between kernels, and the cost per kernel",
                                              gaps, ncols=2)
    kernel_us = [1e3 * r["kernel_ms"] for r in gaps["rows"]]
    for label in ("eager", "graph"):
        values = [100 * r[f"{label}_gap"] for r in gaps["rows"]]
        ax_gap.plot(kernel_us, values, "o-", label=label)
        bad = [(k, v) for k, v, r in zip(kernel_us, values, gaps["rows"]) if r[f"{label}_gap_range"][2] < 0]
        if bad:
            ax_gap.plot(*zip(*bad), "x", color="red", markersize=9,
                        label=f"{label}: below the kernels' sum beyond the spread (measurement problem)")
    ax_gap.axhline(100 * GAP_TARGET, color="k", ls=":", label="article: gaps < 5%")
    ax_gap.axvline(1e3 * LONG_KERNEL_MS, color="grey", ls="--", lw=0.8, label="20 us kernels")
    ax_gap.set_xscale("log")
    ax_gap.set_yscale("symlog", linthresh=GAP_LINEAR_PCT)
    ax_gap.axhline(0, color="grey", lw=0.6)
    ax_gap.xaxis.set_minor_formatter(NullFormatter())
    ax_gap.set_xlabel("kernel's own GPU time (us; Nsight Compute or marginal in a graph)")
    ax_gap.set_ylabel("idle gaps, % of kernel time (signed, not clamped)")
    ax_gap.legend(fontsize=8)
    names = list(tiny["rows"])
    ax_cost.barh(names, [tiny["rows"][n]["us_per_kernel"] for n in names],
                 color=["C0" if n.startswith("eager") else "C1" if n.startswith("graph") else "grey"
                        for n in names])
    ax_cost.set_xscale("log")
    ax_cost.set_xlabel(f"us per kernel ({tiny['kernels']} kernels of {tiny['n']} elements)")
    ax_cost.tick_params(axis="y", labelsize=8)
    return plots.save(fig, "lab08_idle_gaps", figures_dir)


def plot_batches(batches: dict, figures_dir: Path) -> Path:
    """Per-call time eager and replayed for each batch size, and the calls a graph takes to pay off."""
    fig, (ax,) = plots.new_figure(f"One graph per batch size: {batches['steps']} steps on "
                                  f"(batch, {batches['features']}) float32", batches)
    sizes = [r["batch"] for r in batches["rows"]]
    ax.plot(sizes, [r["eager_ms"] for r in batches["rows"]], "o-", label="eager")
    ax.plot(sizes, [r["graph_ms"] for r in batches["rows"]], "o-", label="graph replay")
    for r in batches["rows"]:
        if r["break_even_calls"]:
            ax.annotate(f"graph pays off\nafter {r['break_even_calls']:.0f} calls",
                        (r["batch"], r["eager_ms"]), xytext=(0, 8), textcoords="offset points",
                        ha="center", fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size (rows)")
    ax.set_ylabel("time per call (ms)")
    ax.legend(fontsize=8)
    return plots.save(fig, "lab08_batch_graphs", figures_dir)


def key_figure(tiny: dict, gaps: dict) -> str:
    replay = tiny["rows"]["graph_gpu_events"]["us_per_kernel"]
    eager = tiny["rows"]["eager_gpu_events"]["us_per_kernel"]
    longest = gaps["rows"][-1]
    return (f"graph replay {replay:.2f} us/kernel vs {eager:.1f} us eager ({tiny['speedup']:.0f}x); "
            f"idle gaps at {1e3 * longest['kernel_ms']:.0f} us kernels: "
            f"{100 * longest['graph_gap']:.1f}% replayed, {100 * longest['eager_gap']:.1f}% eager")


def tour(figures_dir: Path) -> TourResult:
    names = validate(300 if device.is_simulator() else 100_003)
    record = {name: measured(name) for name in MEASUREMENTS}
    if not all(record.values()):
        missing = ", ".join(name for name, value in record.items() if not value)
        return TourResult(True, f"validated {', '.join(names)}; no reference data recorded yet "
                                f"for {missing}")
    figures = (plot_timeline(record["idle_gaps"], figures_dir),
               plot_idle_gaps(record["idle_gaps"], record["tiny_kernels"], figures_dir),
               plot_batches(record["batch_graphs"], figures_dir))
    return TourResult(True, key_figure(record["tiny_kernels"], record["idle_gaps"]),
                      tuple(str(f) for f in figures))
