"""Lab 01 experiments: what a Numba launch costs, seen every way, and where it stops mattering.

On a GPU (`kernellab bench 01`):
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
- time against size for one kernel (the floor) and for a batch of rows, one launch per row or
  one for all (the crossover where merging launches stops paying), through kernellab.course.bench.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from pathlib import Path

import numpy as np

from kernellab.course import bench as harness
from kernellab.gpu import checks, device, graphs, timing, traffic
from kernellab.show import plots
from kernellab.course import reference, target
from kernellab.course.claims import Claim, need, row
from kernellab.gpu.launches import record_launches
from kernellab.course.protocol import TourResult

LAB = "01"
KERNELS = 100                                  # kernels in a captured chain
COUNTS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
PROFILE_LAUNCHES = 2000
HOST_ARRAY_SIZES = (1, 1 << 10, 1 << 20)       # float32 elements
SCALE = 1.5
ROWS = 4 if device.is_simulator() else 32
WRAPPER_TARGET = 0.05


def validate(seed: int = 0) -> list[str]:
    """Every given and written function checked on tiny inputs; returns what passed."""
    lab = target.load(LAB)
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    counter = cuda.to_device(np.zeros(1, dtype=np.float32))
    lab.launch_chain(counter, 3)
    lab.prebuilt_launcher(lab.bump_kernel, 1, 1, counter)()
    graphs.capture(lab.launch_chain, counter, 2).replay()
    if counter.copy_to_host()[0] != 6:
        raise AssertionError(f"3 chained, 1 prebuilt and 2 replayed bumps gave "
                             f"{counter.copy_to_host()[0]}")
    arrays = [checks.nonzero(rng, 45) for _ in range(8)]
    checks.assert_matches(lab.sum8([cuda.to_device(a) for a in arrays]),
                          np.sum(np.array(arrays, dtype=np.float64), axis=0), rtol=1e-6, what="sum8")
    x = checks.nonzero(rng, (3, 37))
    for name, (run, _why) in lab.VARIANTS.items():
        checks.assert_matches(run(cuda.to_device(x), SCALE), SCALE * x.astype(np.float64),
                              rtol=1e-6, what=f"lab 01 {name}")
    slope, fixed = lab.per_launch_cost([1, 2, 4], [12.0, 22.0, 42.0])
    if not np.allclose((slope, fixed), (10.0, 2.0)):
        raise AssertionError(f"per_launch_cost gave {(slope, fixed)}, expected (10, 2)")
    return ["launch_chain", "prebuilt_launcher", "sum8", *lab.VARIANTS, "per_launch_cost"]


# --- measurements (GPU only) ---------------------------------------------------------------------

def us(t: timing.Timing, per: int = 1) -> dict:
    """A Timing as microseconds per launch (or per kernel, with `per` kernels per call)."""
    return {"us": 1e3 * t.median_ms / per, "p10_us": 1e3 * t.p10_ms / per,
            "p90_us": 1e3 * t.p90_ms / per, "reps": len(t.samples_ms)}


def host_us(submit, inner: int = 200, reps: int = 50, per: int = 1) -> dict:
    """Host submit time of `submit()` in us (per kernel, with `per` kernels per call)."""
    return us(timing.time_host(submit, inner=inner, reps=reps), per)


def tiny_launch():
    """(lab, counter, plain): the lab, a one-element counter, and one plain bump_kernel launch."""
    lab = target.load(LAB)
    counter = device.cuda().to_device(np.zeros(1, dtype=np.float32))
    return lab, counter, lambda: lab.bump_kernel[1, 1](counter)


def measure_wrapper_overhead() -> dict:
    """A plain launch before and after kernellab's launch hooks came and went (run this first)."""
    from numba.cuda.dispatcher import CUDADispatcher
    lab, counter, plain = tiny_launch()
    untouched = CUDADispatcher.call
    before = timing.time_host(plain, warmup=200, reps=100, inner=200)
    with record_launches():
        recording = timing.time_host(plain, reps=30, inner=100)
    after_recording = timing.time_host(plain, warmup=50, reps=100, inner=200)
    graph = graphs.capture(lab.launch_chain, counter, KERNELS)
    after_capture = timing.time_host(plain, warmup=50, reps=100, inner=200)
    raw_stream = graphs._core_stream(0)
    replay = timing.time_host(graph.replay, reps=200, inner=10)
    raw_replay = timing.time_host(lambda: graph.executable.launch(raw_stream), reps=200, inner=10)
    ratios = {"after_record_launches": after_recording.median_ms / before.median_ms,
              "after_capture": after_capture.median_ms / before.median_ms,
              "replay_vs_raw_graph_launch": replay.median_ms / raw_replay.median_ms}
    return {"provenance": reference.provenance(),
            "plain_before": us(before), "while_recording": us(recording),
            "plain_after_record_launches": us(after_recording),
            "plain_after_capture": us(after_capture),
            "replay": us(replay), "raw_graph_launch": us(raw_replay),
            "dispatcher_restored": CUDADispatcher.call is untouched,
            "noise_before": before.spread, "ratios": ratios,
            "target": {"max_overhead": WRAPPER_TARGET,
                       "ok": all(r <= 1 + WRAPPER_TARGET for r in ratios.values())}}


def measure_launch_methods() -> dict:
    """The cost of one tiny launch, seen every way (us per launch, or per kernel for graphs)."""
    lab, counter, plain = tiny_launch()
    cuda = device.cuda()

    def synchronized():
        lab.bump_kernel[1, 1](counter)
        cuda.synchronize()

    graph = graphs.capture(lab.launch_chain, counter, KERNELS)
    prebuilt = lab.prebuilt_launcher(lab.bump_kernel, 1, 1, counter)
    methods = {
        "empty kernel, host submit": (host_us(lambda: lab.empty_kernel[1, 1]()),
                                      "no arguments, no work: the host's side of a launch"),
        "plain, host submit": (host_us(plain),
                               "one array argument: what a Numba launch costs the host"),
        "plain, GPU events": (us(timing.time_gpu(plain, reps=30, inner=100, hide_host=False)),
                              "events around 100 launches back to back: the GPU waits for the host"),
        "plain, GPU side (queue full)": (us(timing.time_gpu(plain, warmup=1, reps=20, inner=KERNELS)),
                                         "launches queued behind a busy kernel: the GPU's own cost"),
        "synchronized": (host_us(synchronized, inner=50, reps=30),
                         "launch then cuda.synchronize(): the round trip"),
        "prebuilt, host submit": (host_us(prebuilt),
                                  "arguments marshalled once: what is left is cuda.core's launch"),
        "graph replay, host submit": (host_us(graph.replay, inner=10, per=KERNELS),
                                      f"one replay of {KERNELS} captured launches, per kernel"),
        "graph replay, GPU events": (us(timing.time_gpu(graph.replay, reps=30, inner=10), KERNELS),
                                     f"events around replays of {KERNELS} kernels, per kernel"),
    }
    replay = methods["graph replay, GPU events"][0]["us"]
    plain_us = methods["plain, host submit"][0]["us"]
    return {"provenance": reference.provenance(), "kernels_per_graph": KERNELS,
            "methods": {name: {**value, "how": how} for name, (value, how) in methods.items()},
            "plain_over_replay": plain_us / replay,
            "targets": {"replay_us_max": 1.0, "ratio_min": 15.0, "replay_ok": replay <= 1.0,
                        "ratio_ok": plain_us / replay >= 15.0}}


def measure_arguments() -> dict:
    """Host submit time against the number of array arguments; host arrays against device arrays."""
    lab = target.load(LAB)
    cuda = device.cuda()
    by_count = []
    for count, kernel in lab.ARGUMENT_KERNELS.items():
        arrays = [cuda.device_array(1, dtype=np.float32) for _ in range(count)]
        by_count.append({"arrays": count, **host_us(lambda: kernel[1, 1](*arrays))})
    host_arrays = []
    for n in HOST_ARRAY_SIZES:
        host = np.zeros(n, dtype=np.float32)
        on_device = cuda.to_device(host)
        host_arrays.append({
            "elements": n, "bytes": host.nbytes,
            "device": host_us(lambda: lab.bump_kernel[1, 1](on_device), inner=50, reps=30),
            "host": host_us(lambda: lab.bump_kernel[1, 1](host), inner=10, reps=30)})
    return {"provenance": reference.provenance(), "by_count": by_count, "host_arrays": host_arrays}


def profile_launch_path(launches: int = PROFILE_LAUNCHES, top: int = 12) -> dict:
    """Where a launch's host time goes: cProfile over many launches, the top functions by self time."""
    lab, counter, plain = tiny_launch()
    cuda = device.cuda()
    plain()
    cuda.synchronize()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(launches):
        lab.bump_kernel[1, 1](counter)
    profiler.disable()
    profiled_us = (time.perf_counter() - started) * 1e6 / launches
    cuda.synchronize()
    rows = []
    for (file, line, function), (_, calls, self_s, total_s, _) in pstats.Stats(profiler).stats.items():
        rows.append({"function": f"{function} ({Path(file).name}:{line})",
                     "calls_per_launch": calls / launches, "self_us": 1e6 * self_s / launches,
                     "cumulative_us": 1e6 * total_s / launches})
    rows.sort(key=lambda r: r["self_us"], reverse=True)
    return {"provenance": reference.provenance(), "launches": launches,
            "profiled_us_per_launch": profiled_us, "functions_seen": len(rows), "top": rows[:top]}


def measure_kernel_count(reps: int = 15) -> dict:
    """Wall time from the first launch to the end of a synchronize, against the number of kernels."""
    lab, counter, _ = tiny_launch()
    cuda = device.cuda()
    rows = []
    for count in COUNTS:
        graph = graphs.capture(lab.launch_chain, counter, count)
        row = {"count": count}
        for name, run in (("eager", lambda: lab.launch_chain(counter, count)), ("graph", graph.replay)):
            samples = []
            for _ in range(reps + 2):
                cuda.synchronize()
                started = time.perf_counter()
                run()
                cuda.synchronize()
                samples.append((time.perf_counter() - started) * 1e6)
            row[f"{name}_us"] = float(np.median(samples[2:]))
        rows.append(row)
    fits = {}
    for name in ("eager", "graph"):
        slope, fixed = lab.per_launch_cost([r["count"] for r in rows], [r[f"{name}_us"] for r in rows])
        fits[name] = {"per_launch_us": slope, "fixed_us": fixed}
    return {"provenance": reference.provenance(), "rows": rows, "fits": fits}


def _elementwise_ledger(name, inputs_shape):
    elements = int(np.prod(inputs_shape))
    return traffic.Ledger(name).add(name, "x", reads=elements).add(name, "out", writes=elements)


def size_benchmarks() -> list[harness.Benchmark]:
    """One kernel against n (the floor), and a batch of rows launched per row or all at once."""
    lab = target.load(LAB)
    one_kernel = harness.Benchmark(
        name="scale_one_kernel", axis="n (float32 elements)",
        sizes=[1 << k for k in range(8, 27, 2)], sim_sizes=[300],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
        reference=lambda inputs: SCALE * inputs["x"].astype(np.float64),
        variants=[harness.Variant("scale", lambda d, out: lab.scale(d["x"], SCALE, out=out),
                                  "one launch, one thread per element",
                                  ledger=lambda n: _elementwise_ledger("scale", (n,)))])
    batch = harness.Benchmark(
        name="merge_rows", axis=f"elements per row ({ROWS} rows)",
        sizes=[1 << k for k in range(4, 21, 2)], sim_sizes=[37],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, (ROWS, n))},
        reference=lambda inputs: SCALE * inputs["x"].astype(np.float64),
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
    for row in range(x.shape[0]):
        lab.scale(x[row], a, out=out[row])
    return out


def size_sweep(name: str, out_dir: Path | None = None, lab: str | None = None) -> dict:
    """Run one of the size benchmarks through kernellab.course.bench (validate, then time on a GPU).

    With `lab`, as `kernellab bench` does: printed, and saved as that lab's reference data.
    Without, quietly, and nothing written.
    """
    benchmark = next(b for b in size_benchmarks() if b.name == name)
    if lab is None:
        return harness.run(benchmark, progress=False, out=lambda _line: None)
    return harness.run(benchmark, lab=lab, out_dir=out_dir)


# Every measurement by name: what bench() records and what the tour and the notebook draw.
MEASUREMENTS = {
    "wrapper_overhead": measure_wrapper_overhead,   # first: before this run's hooks come and go
    "launch_methods": measure_launch_methods,
    "arguments": measure_arguments,
    "launch_profile": profile_launch_path,
    "kernel_count": measure_kernel_count,
    "scale_one_kernel": lambda: size_sweep("scale_one_kernel"),
    "merge_rows": lambda: size_sweep("merge_rows"),
}


def measured(name: str) -> dict | None:
    """One of MEASUREMENTS: live on a GPU, the recorded reference in the simulator."""
    return reference.live_or_recorded(LAB, name, MEASUREMENTS[name])


def bench(out_dir: Path | None = None) -> dict:
    """Measure everything above on a GPU and save it; in the simulator, validate only."""
    if device.is_simulator():
        names = validate()
        for benchmark in size_benchmarks():
            size_sweep(benchmark.name, out_dir, lab=LAB)
        print(f"validated {', '.join(names)}; simulator: no timing exists")
        return {}
    record = {"wrapper_overhead": measure_wrapper_overhead()}
    validate()
    record.update((name, MEASUREMENTS[name]()) for name in
                  ("launch_methods", "arguments", "launch_profile", "kernel_count"))
    print(report(record))
    reference.save(LAB, record, out_dir)
    for benchmark in size_benchmarks():                  # kernellab.course.bench saves these itself
        record[benchmark.name] = size_sweep(benchmark.name, out_dir, lab=LAB)
    return record


def report(record: dict) -> str:
    """Tables and targets, one line each."""
    lines = ["launch cost by method (us per launch, or per kernel for graphs):"]
    methods = record["launch_methods"]
    for name, row in methods["methods"].items():
        spread = f"({row['p10_us']:.2f}-{row['p90_us']:.2f})"
        lines.append(f"  {name:<30} {row['us']:8.2f}  {spread}  {row['how']}")
    t = methods["targets"]
    lines.append(f"  target: replay <= 1 us/kernel: {'met' if t['replay_ok'] else 'MISSED'}; "
                 f">= 15x cheaper than a plain launch: {methods['plain_over_replay']:.1f}x "
                 f"{'met' if t['ratio_ok'] else 'MISSED'}")
    wrappers = record["wrapper_overhead"]
    lines.append(f"kernellab wrappers (plain launch before: {wrappers['plain_before']['us']:.2f} us, "
                 f"noise p10-p90 {100 * wrappers['noise_before']:.0f}%; dispatcher restored: "
                 f"{wrappers['dispatcher_restored']}):")
    for name, ratio in wrappers["ratios"].items():
        lines.append(f"  {name:<28} {100 * (ratio - 1):+6.1f}%")
    lines.append(f"  while recording: {wrappers['while_recording']['us']:.2f} us per launch")
    lines.append(f"  target: <= 5% each: {'met' if wrappers['target']['ok'] else 'MISSED'}")
    args = record["arguments"]
    lines.append("host submit by array arguments: "
                 + ", ".join(f"{r['arrays']}: {r['us']:.1f} us" for r in args["by_count"]))
    for r in args["host_arrays"]:
        lines.append(f"  {r['bytes']:>9} B argument: device array {r['device']['us']:.1f} us, "
                     f"NumPy host array {r['host']['us']:.1f} us")
    profile = record["launch_profile"]
    lines.append(f"launch path profile ({profile['profiled_us_per_launch']:.1f} us per launch "
                 "under cProfile), top by self time:")
    lines += [f"  {r['self_us']:6.2f} us self {r['cumulative_us']:7.2f} us cum  {r['function']}"
              for r in profile["top"][:8]]
    fits = record["kernel_count"]["fits"]
    lines.append(f"total time vs kernel count: slope {fits['eager']['per_launch_us']:.2f} us/launch "
                 f"eager, {fits['graph']['per_launch_us']:.2f} us/kernel replayed")
    return "\n".join(lines)


# --- figures -------------------------------------------------------------------------------------

def plot_launch_methods(methods: dict, figures_dir: Path) -> Path:
    """Launch cost by method: plain, synchronized, graph replay, prebuilt (and the other views)."""
    fig, (ax,) = plots.new_figure("Cost of one tiny Numba launch, by method", methods, width=8.0)
    names = list(methods["methods"])
    values = [methods["methods"][n]["us"] for n in names]
    family = {"graph": "C1", "prebuilt": "C2", "synchronized": "C3"}
    bars = ax.barh(names, values, color=[family.get(n.split(" ")[0].rstrip(","), "C0") for n in names])
    for bar, value in zip(bars, values):
        ax.annotate(f"{value:.2f} us", (value, bar.get_y() + bar.get_height() / 2), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlabel("microseconds per launch (per kernel for graph replay)")
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=8)
    return plots.save(fig, "lab01_launch_cost_by_method", figures_dir)


def plot_launch_breakdown(args: dict, profile: dict, figures_dir: Path) -> Path:
    """What a launch pays for: array arguments, host arrays, and the functions on the launch path."""
    fig, (ax_args, ax_host, ax_prof) = plots.new_figure("What a Numba launch pays for", args, ncols=3,
                                                        width=5.0)
    ax_args.plot([r["arrays"] for r in args["by_count"]], [r["us"] for r in args["by_count"]], "o-")
    ax_args.set_xlabel("array arguments")
    ax_args.set_ylabel("host submit time (us per launch)")
    ax_args.set_ylim(bottom=0)
    labels = [f"{r['bytes']:,} B" for r in args["host_arrays"]]
    where = np.arange(len(labels))
    for offset, kind, label in ((-0.2, "device", "device array"), (0.2, "host", "NumPy host array")):
        ax_host.bar(where + offset, [r[kind]["us"] for r in args["host_arrays"]], 0.4, label=label)
    ax_host.set_xticks(where, labels)
    ax_host.set_yscale("log")
    ax_host.set_ylabel("us per launch")
    ax_host.legend(fontsize=8)
    top = profile["top"][:8][::-1]
    ax_prof.barh([r["function"][:38] for r in top], [r["self_us"] for r in top])
    ax_prof.set_xlabel(f"self time, us per launch (a launch under cProfile: "
                       f"{profile['profiled_us_per_launch']:.0f} us)")
    ax_prof.tick_params(axis="y", labelsize=7)
    return plots.save(fig, "lab01_launch_breakdown", figures_dir)


def plot_kernel_count(counts: dict, figures_dir: Path) -> Path:
    """Total time against the number of tiny kernels: the slope is the cost per launch."""
    lab = target.load(LAB)
    fig, (ax,) = plots.new_figure("Total time of a chain of tiny kernels, launch to synchronize",
                                  counts)
    x = np.array([r["count"] for r in counts["rows"]])
    for color, name in (("C0", "eager"), ("C1", "graph")):
        y = [r[f"{name}_us"] for r in counts["rows"]]
        slope, fixed = lab.per_launch_cost(x, y)
        ax.plot(x, y, "o", color=color, label=f"{name}: {slope:.2f} us per kernel (fit)")
        ax.plot(x, fixed + slope * x, "-", color=color, lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kernels launched")
    ax.set_ylabel("total time (us)")
    ax.legend(fontsize=8)
    return plots.save(fig, "lab01_kernel_count", figures_dir)


def plot_time_vs_size(one: dict, rows: dict, figures_dir: Path) -> tuple[Path, int]:
    """One kernel's time against n with the floor model; rows per launch against one launch."""
    lab = target.load(LAB)
    launch_us = 1e3 * one["launch_floor_ms"]
    crossover = lab.crossover_size(launch_us, 8, one["copy_gbps"])
    fig, (ax_one, ax_rows) = plots.new_figure("Time against size: the launch floor and the crossover",
                                              one, ncols=2)
    plots.time_vs_size(ax_one, one)
    sizes = np.array(one["sizes"], dtype=np.float64)
    ax_one.plot(sizes, 1e-3 * lab.predicted_time_us(sizes, launch_us, 8, one["copy_gbps"]), "k--",
                lw=0.8, label="model: max(launch, bytes / copy bandwidth)")
    ax_one.axvline(crossover, color="C3", ls=":", label=f"crossover n = {crossover:,}")
    ax_one.legend(fontsize=7)
    plots.time_vs_size(ax_rows, rows)
    per_row = np.array(rows["sizes"], dtype=np.float64)
    first = rows["rows"][0]
    batch = first["bytes"] // (8 * first["size"])          # rows per batch, from the declared bytes
    ax_rows.plot(per_row, 1e-3 * batch * lab.predicted_time_us(per_row, launch_us, 8, rows["copy_gbps"]),
                 "C0--", lw=0.8, label="model, one launch per row")
    ax_rows.plot(per_row, 1e-3 * lab.predicted_time_us(batch * per_row, launch_us, 8, rows["copy_gbps"]),
                 "C1--", lw=0.8, label="model, one launch")
    ax_rows.axvline(crossover, color="C3", ls=":", label="crossover (one row = one launch)")
    ax_rows.legend(fontsize=7)
    return plots.save(fig, "lab01_time_vs_size", figures_dir), crossover


def key_figure(launch_methods: dict) -> str:
    methods = launch_methods["methods"]
    plain, replay = methods["plain, host submit"]["us"], methods["graph replay, GPU events"]["us"]
    return (f"plain launch {plain:.1f} us, graph replay {replay:.2f} us per kernel "
            f"({plain / replay:.0f}x), prebuilt {methods['prebuilt, host submit']['us']:.1f} us")


def tour(figures_dir: Path) -> TourResult:
    names = validate()
    record = {name: measured(name) for name in MEASUREMENTS if name != "wrapper_overhead"}
    if not all(record.values()):
        missing = ", ".join(name for name, value in record.items() if not value)
        return TourResult(True, f"validated {', '.join(names)}; no reference data recorded yet "
                                f"for {missing}")
    figure, crossover = plot_time_vs_size(record["scale_one_kernel"], record["merge_rows"],
                                          figures_dir)
    figures = (plot_launch_methods(record["launch_methods"], figures_dir),
               plot_launch_breakdown(record["arguments"], record["launch_profile"], figures_dir),
               plot_kernel_count(record["kernel_count"], figures_dir), figure)
    key = f"{key_figure(record['launch_methods'])}; merging launches pays below ~{crossover:,} elements"
    return TourResult(True, key, tuple(str(f) for f in figures))


# --- claims: what the discussion says, checked against the records -----------------------------

def method_us(records: dict, method: str) -> float:
    return need(records, "launch_methods", "methods", method, "us")


def per_array_us(records: dict) -> tuple[float, float]:
    """(host submit per array argument, with none), the least-squares line through the sweep."""
    by_count = need(records, "arguments", "by_count")
    slope, intercept = np.polyfit([r["arrays"] for r in by_count], [r["us"] for r in by_count], 1)
    return float(slope), float(intercept)


def _launch_values(records):
    host, gpu = method_us(records, "plain, host submit"), method_us(records, "plain, GPU side (queue full)")
    return {"host": host, "gpu": gpu, "idle": 100 * (1 - gpu / host),
            "pre": method_us(records, "prebuilt, host submit"),
            "replay": method_us(records, "graph replay, GPU events"),
            "sync": method_us(records, "synchronized"), "ratio": host / method_us(records, "graph replay, GPU events")}


def _host_array_values(records):
    smallest = min(need(records, "arguments", "host_arrays"), key=lambda r: r["bytes"])
    slope, none = per_array_us(records)
    return {"per_array": slope, "none": none, "bytes": smallest["bytes"],
            "host": smallest["host"]["us"], "device": smallest["device"]["us"]}


def _slope_values(records):
    fits = need(records, "kernel_count", "fits")
    return {"eager": fits["eager"]["per_launch_us"], "graph": fits["graph"]["per_launch_us"]}


def _rows_values(records):
    rows = need(records, "merge_rows")
    n = min(rows["sizes"])
    floor_us = 1e3 * rows["launch_floor_ms"]
    separate, sliced = row(rows, "separate", n), row(rows, "separate_sliced", n)
    count = separate["launches"]                 # one launch per row: the rows of the recording
    return {"n": n, "rows": count, "floor": floor_us, "model": count * floor_us / 1e3,
            "sep": separate["median_ms"], "sliced": sliced["median_ms"],
            "slice_us": 1e3 * (sliced["median_ms"] - separate["median_ms"]) / count}


def _merged_values(records):
    rows = need(records, "merge_rows")
    floor_us = 1e3 * rows["launch_floor_ms"]
    on_floor = [size for size in rows["sizes"] if 1e3 * row(rows, "merged", size)["median_ms"] <= 2 * floor_us]
    return {"rows": row(rows, "separate", min(rows["sizes"]))["launches"], "floor": floor_us,
            "upto": max(on_floor, default=0)}


def _wrapper_values(records):
    ratios = need(records, "wrapper_overhead", "ratios")
    return {"after_record": 100 * (ratios["after_record_launches"] - 1),
            "after_capture": 100 * (ratios["after_capture"] - 1),
            "worst": 100 * (max(ratios["after_record_launches"], ratios["after_capture"]) - 1)}


CLAIMS = [
    Claim("host_not_gpu",
          "A plain Numba launch costs the host {host:.1f} us; with the queue kept full the GPU spends "
          "{gpu:.2f} us per launch: between tiny kernels the GPU idles {idle:.0f}% of the time.",
          values=_launch_values, holds=lambda v: v["host"] > 5 * v["gpu"]),
    Claim("prebuilt_arguments",
          "Prebuilt arguments cut the host submit to {pre:.1f} us from {host:.1f} us: most of a launch "
          "is preparing its arguments in Python.",
          values=_launch_values, holds=lambda v: v["pre"] < 0.5 * v["host"]),
    Claim("synchronized",
          "A synchronize after every launch costs {sync:.1f} us per launch, more than the host submit "
          "({host:.1f} us): the host waits for the GPU, then the GPU for the host.",
          values=_launch_values, holds=lambda v: v["sync"] > v["host"]),
    Claim("graph_replay",
          "Replayed as a graph, a kernel costs {replay:.2f} us of GPU time: {ratio:.0f}x less than a plain launch.",
          values=_launch_values, holds=lambda v: v["replay"] < 1.0 and v["ratio"] >= 15),
    Claim("per_argument",
          "Each array argument adds {per_array:.1f} us to the host submit ({none:.1f} us with none): "
          "seven values per array, marshalled in Python at every launch.",
          values=_host_array_values, holds=lambda v: v["per_array"] > 1),
    Claim("host_array_trap",
          "A {bytes}-byte NumPy host array as an argument costs {host:.0f} us per launch against {device:.0f} us "
          "for a device array: an implicit copy each way, and a wait for each.",
          values=_host_array_values, holds=lambda v: v["host"] > 3 * v["device"]),
    Claim("kernel_count_slope",
          "Against the number of tiny kernels, eager launches cost {eager:.1f} us each (the slope); "
          "replayed as a graph, {graph:.2f} us.",
          values=_slope_values, holds=lambda v: v["graph"] < v["eager"] / 10),
    Claim("rows_separately",
          "{rows} launches of one row each take {sep:.3f} ms at {n} elements per row, against {model:.3f} ms "
          "for {rows} empty launches ({floor:.1f} us each). Slicing rows instead (`x[row]`, `out[row]`) took "
          "{sliced:.3f} ms: {slice_us:.0f} us of Python per row, on top of its launch.",
          values=_rows_values, holds=lambda v: v["sep"] <= 1.5 * v["model"] and v["sliced"] > v["sep"]),
    Claim("rows_merged_floor",
          "One 2D launch for all {rows} rows stays within 2x of the empty launch ({floor:.1f} us) up to "
          "{upto:,} elements per row: below the crossover, a batch costs one launch.",
          values=_merged_values, holds=lambda v: v["upto"] >= 4096),
    Claim("instruments_cost_nothing",
          "No kernellab instrument slows a plain launch down: {after_record:+.1f}% after "
          "record_launches, {after_capture:+.1f}% after a graph capture (target: at most +5%).",
          values=_wrapper_values, holds=lambda v: v["worst"] <= 5),
]
