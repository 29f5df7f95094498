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
"""

from __future__ import annotations

import contextlib
import cProfile
import pstats
import time
from pathlib import Path

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.course.claims import Claim, Compare, need, repeats_of, row, says, states, target
from kernellab.gpu import checks, device, graphs, timing, traffic
from kernellab.gpu.launches import record_launches
from kernellab.gpu.timeline import Timeline, reserve_events
from kernellab.show import plots

KERNELS = 100                                  # kernels in a captured chain
COUNTS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
PROFILE_LAUNCHES = 2000
HOST_ARRAY_SIZES = (1, 1 << 10, 1 << 20)       # float32 elements
SCALE = np.float32(1.5)                        # float32, as the kernels declare (a Python float: float64)
ROWS = 4 if device.is_simulator() else 32
AROUND_ROW = 1 << 10                           # elements per row where the Python around a launch is timed
WRAPPER_TARGET = 0.05
INSTRUMENT_BUDGET_US = 5.0             # what an open instrument may add to a launch (issue 23)


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


# --- measurements (GPU only) ---------------------------------------------------------------------

def us(t: timing.Timing, per: int = 1) -> dict:
    """A Timing as microseconds per launch (or per kernel, with `per` kernels per call)."""
    return {"us": 1e3 * t.median_ms / per, "p10_us": 1e3 * t.p10_ms / per,
            "p90_us": 1e3 * t.p90_ms / per, "reps": len(t.samples_ms)}


def host_us(submit, inner: int = 200, reps: int = 50, per: int = 1) -> dict:
    """Host submit time of `submit()` in us (per kernel, with `per` kernels per call)."""
    return us(timing.time_host(submit, inner=inner, reps=reps), per)


def tiny_launch(lab):
    """(counter, plain): a one-element counter, and one plain bump_kernel launch on it."""
    counter = device.cuda().to_device(np.zeros(1, dtype=np.float32))
    return counter, lambda: lab.bump_kernel[1, 1](counter)


def quantiles(values) -> dict:
    return {"median": float(np.median(values)), "p10": float(np.percentile(values, 10)),
            "p90": float(np.percentile(values, 90)), "reps": len(values)}


def past_the_dispatcher(lab, counter):
    """The plain launch's compiled kernel launched directly (numba-cuda's `_Kernel.launch`, the
    same arguments, grid and block): everything a plain launch does but numba-cuda's dispatcher
    entry point, which is what kernellab's hooks wrap. A plain launch against this control, taken in
    turn, moves only if something is left on that entry point; the host's drift moves both."""
    kernel = next(iter(lab.bump_kernel.overloads.values()))     # compiled by the plain launch before
    return lambda: kernel.launch((counter,), (1, 1, 1), (1, 1, 1), 0, 0)


WRAPPER_METHOD = ("each phase's plain launch and its control (the compiled kernel launched past the "
                  "dispatcher entry point) taken in turn (timing.time_host_in_turn); a phase's figure is the "
                  "median over its reps of plain / control; each move is after / before - 1")


def measure_wrapper_overhead(lab) -> dict:
    """A plain launch before and after kernellab's launch hooks came and went, each phase against a
    control timed in turn with it (WRAPPER_METHOD), and the graph's replay against its raw launch,
    taken in turn too (the bench's first measurement; its validation runs before it)."""
    from numba.cuda.dispatcher import CUDADispatcher
    counter, plain = tiny_launch(lab)
    plain()
    untouched = CUDADispatcher.call
    launches = {"plain": (contextlib.nullcontext, plain),
                "control": (contextlib.nullcontext, past_the_dispatcher(lab, counter))}
    phases = {"before": timing.time_host_in_turn(launches, warmup=100, reps=100, inner=200)}
    with record_launches():
        recording = timing.time_host(plain, reps=30, inner=100)
    while_on = instrument_costs(plain)
    phases["after_record_launches"] = timing.time_host_in_turn(launches, reps=100, inner=200)
    graph = graphs.capture(lab.launch_chain, counter, KERNELS)
    phases["after_capture"] = timing.time_host_in_turn(launches, reps=100, inner=200)
    raw_stream = graphs._core_stream(0)
    replays = timing.time_host_in_turn({"replay": (contextlib.nullcontext, graph.replay),
                                        "raw": (contextlib.nullcontext, lambda: graph.executable.launch(raw_stream))},
                                       warmup=20, reps=200, inner=10)
    over_control = {name: quantiles(timing.paired(taken["plain"], taken["control"], ratio=True))
                    for name, taken in phases.items()}
    ratios = {"after_record_launches": over_control["after_record_launches"]["median"] / over_control["before"]["median"],
              "after_capture": over_control["after_capture"]["median"] / over_control["before"]["median"],
              "replay_vs_raw_graph_launch": float(np.median(timing.paired(replays["replay"], replays["raw"],
                                                                          ratio=True)))}
    return {"provenance": reference.provenance(),
            "plain_before": us(phases["before"]["plain"]), "control_before": us(phases["before"]["control"]),
            "while_recording": us(recording), "while_on": while_on,
            "plain_after_record_launches": us(phases["after_record_launches"]["plain"]),
            "plain_after_capture": us(phases["after_capture"]["plain"]),
            "plain_over_control": over_control,
            "replay": us(replays["replay"]), "raw_graph_launch": us(replays["raw"]),
            "dispatcher_restored": CUDADispatcher.call is untouched,
            "noise_before": phases["before"]["plain"].spread, "ratios": ratios, "method": WRAPPER_METHOD,
            "target": {"max_overhead": WRAPPER_TARGET,
                       "ok": all(r <= 1 + WRAPPER_TARGET for r in ratios.values())}}


# The instruments a course run opens around student launches, each as a context manager (the
# traffic meter is not here: it counts a simulated kernel's accesses and runs only in the simulator).
INSTRUMENTS = {
    "record_launches": record_launches,
    "timeline": Timeline,
    "poisoned_allocations": checks.poisoned_allocations,
}


def instrument_costs(plain, reps: int = 60, inner: int = 100) -> dict:
    """A plain launch's host time with each instrument open against none, all taken in turn in
    every rep (timing.time_host_in_turn; events reserved for the timeline first, as its users do):
    each one's median and spread, and its cost, the median over the reps of its sample minus the
    bare one of the same rep."""
    reserve_events(2 * inner + 1)
    taken = timing.time_host_in_turn({"none": (contextlib.nullcontext, plain),
                                      **{name: (instrument, plain) for name, instrument in INSTRUMENTS.items()}},
                                     warmup=20, reps=reps, inner=inner)
    return {name: {**us(times), "cost_us": 1e3 * float(np.median(timing.paired(times, taken["none"])))}
            for name, times in taken.items()}


def measure_launch_methods(lab) -> dict:
    """The cost of one tiny launch, seen every way (us per launch, or per kernel for graphs)."""
    counter, plain = tiny_launch(lab)
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


def measure_arguments(lab) -> dict:
    """Host submit time against the number of array arguments; host arrays against device arrays."""
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


def profile_launch_path(lab, launches: int = PROFILE_LAUNCHES, top: int = 12) -> dict:
    """Where a launch's host time goes: cProfile over many launches, the top functions by self time."""
    counter, plain = tiny_launch(lab)
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


def measure_kernel_count(lab, reps: int = 15) -> dict:
    """Wall time from the first launch to the end of a synchronize, against the number of kernels."""
    counter, _ = tiny_launch(lab)
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


def measure_python_around_launch(lab) -> dict:
    """Host time of what a launcher may do around its launch, each step timed on its own: slice
    a device array, allocate an output, and one row's launch with a row index or on slices."""
    cuda = device.cuda()
    x = cuda.to_device(np.ones((ROWS, AROUND_ROW), dtype=np.float32))
    out = cuda.device_array_like(x)
    block = lab.DEFAULT_BLOCK
    grid = (AROUND_ROW + block - 1) // block
    steps = {
        "launch with a row index": (lambda: lab.scale_row_kernel[grid, block](x, 1, SCALE, out),
                                    "scale_rows_separately's launch: the whole batch and a row number"),
        "slice x[row]": (lambda: x[1], "a device-array slice: a new array object, built in Python"),
        "allocate a row": (lambda: cuda.device_array(AROUND_ROW, dtype=np.float32),
                           "a fresh device output (freed later, in batches: amortized here)"),
        "launch on slices": (lambda: lab.scale(x[1], SCALE, out=out[1]),
                             "one row's launch on x[row] and out[row]: two slices and the launch"),
    }
    return {"provenance": reference.provenance(), "elements_per_row": AROUND_ROW,
            "steps": {name: {**host_us(step), "how": how} for name, (step, how) in steps.items()}}


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


# --- figures -------------------------------------------------------------------------------------

def draw_launch_methods(lab, records: dict, figures_dir: Path) -> Path:
    """Launch cost by method: plain, synchronized, graph replay, prebuilt (and the other views)."""
    methods = records["launch_methods"]
    fig, (ax,) = plots.new_figure("Cost of one tiny Numba launch, by method", methods, width=8.0)
    names = list(methods["methods"])
    values = [methods["methods"][n]["us"] for n in names]
    family = {"graph": "C1", "prebuilt": "C2", "synchronized": "C3"}
    bars = ax.barh(names, values, color=[family.get(n.split(" ")[0].rstrip(","), "C0") for n in names])
    for bar, value in zip(bars, values):
        ax.annotate(f"{value:.2f} us", (value, bar.get_y() + bar.get_height() / 2), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize="small")
    ax.set_xscale("log")
    ax.set_xlabel("microseconds per launch (per kernel for graph replay)")
    ax.invert_yaxis()
    return plots.save(fig, "lab01_launch_cost_by_method", figures_dir)


def draw_launch_breakdown(lab, records: dict, figures_dir: Path) -> Path:
    """What a launch pays for: array arguments, host arrays, and the functions on the launch path."""
    args, profile = records["arguments"], records["launch_profile"]
    fig, (ax_args, ax_host, ax_prof) = plots.new_figure("What a Numba launch pays for", args, ncols=3)
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
    ax_host.legend(fontsize="small")
    top = profile["top"][:8][::-1]
    ax_prof.barh([r["function"][:38] for r in top], [r["self_us"] for r in top])
    ax_prof.set_xlabel(f"self time, us per launch\n(a launch under cProfile: "
                       f"{profile['profiled_us_per_launch']:.0f} us)")
    ax_prof.tick_params(axis="y", labelsize="x-small")
    return plots.save(fig, "lab01_launch_breakdown", figures_dir)


def draw_kernel_count(lab, records: dict, figures_dir: Path) -> Path:
    """Total time against the number of tiny kernels: the slope is the cost per launch."""
    counts = records["kernel_count"]
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
    ax.legend(fontsize="small")
    return plots.save(fig, "lab01_kernel_count", figures_dir)


def draw_python_around_launch(lab, records: dict, figures_dir: Path) -> Path:
    """Host time of each step around one row's launch, beside the launch itself."""
    around = records["python_around_launch"]
    fig, (ax,) = plots.new_figure(f"The Python around a launch (rows of {around['elements_per_row']:,} "
                                  f"float32)", around, width=7.0, height=3.0)
    names = list(around["steps"])
    values = [around["steps"][n]["us"] for n in names]
    bars = ax.barh(names, values, color=["C0" if n.startswith("launch") else "C3" for n in names])
    for bar, step in zip(bars, names):
        ax.annotate(f"{around['steps'][step]['us']:.1f} us", (bar.get_width(), bar.get_y() + 0.4),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize="small")
    ax.set_xlabel("host time, us per call (median)")
    ax.invert_yaxis()
    return plots.save(fig, "lab01_python_around_launch", figures_dir)


def one_launch_us(result: dict, variant: str) -> float:
    """A variant's fastest call in a record's sweep, in us: its launch cost, with next to no data
    to move (the fastest, not the smallest size: the first size of a sweep can run slow)."""
    return 1e3 * min(row(result, variant, size)["median_ms"] for size in result["sizes"])


def draw_time_vs_size(lab, records: dict, figures_dir: Path) -> Path:
    """One kernel's time against n beside the floor model; rows per launch against one launch,
    each beside its model. The model's launch cost is one launch measured in the same run (the
    fastest call of the sweep); the GPU's own empty launch (dotted) shows how much is the host's."""
    one, rows = records["scale_one_kernel"], records["merge_rows"]
    launch_us = one_launch_us(one, "scale")
    crossover = lab.crossover_size(launch_us, 8, one["copy_gbps"])
    fig, (ax_one, ax_rows) = plots.new_figure("Time against size: the launch floor and the crossover, "
                                              "model against measurement", one, ncols=2)
    plots.time_vs_size(ax_one, one)
    sizes = np.array(one["sizes"], dtype=np.float64)
    ax_one.plot(sizes, 1e-3 * lab.predicted_time_us(sizes, launch_us, 8, one["copy_gbps"]), "k--",
                lw=0.8, label=f"model: max(one launch ({launch_us:.0f} us), bytes / copy bandwidth)")
    ax_one.axvline(crossover, color="C3", ls=":", label=f"crossover n = {crossover:,}")
    ax_one.legend()
    plots.time_vs_size(ax_rows, rows)
    per_row = np.array(rows["sizes"], dtype=np.float64)
    first = rows["rows"][0]
    batch = first["bytes"] // (8 * first["size"])          # rows per batch, from the declared bytes
    batch_launch_us = one_launch_us(rows, "merged")
    color = {line.get_label(): line.get_color() for line in ax_rows.get_lines()}   # each model in its variant's
    ax_rows.plot(per_row, 1e-3 * batch * lab.predicted_time_us(per_row, batch_launch_us, 8, rows["copy_gbps"]),
                 "--", color=color.get("separate", "k"), lw=0.8,
                 label=f"model, one launch per row ({batch} x one launch)")
    ax_rows.plot(per_row, 1e-3 * lab.predicted_time_us(batch * per_row, batch_launch_us, 8, rows["copy_gbps"]),
                 "--", color=color.get("merged", "k"), lw=0.8, label="model, one launch")
    ax_rows.axvline(crossover, color="C3", ls=":", label="crossover (one row = one launch)")
    ax_rows.legend()
    return plots.save(fig, "lab01_time_vs_size", figures_dir)


def key_figure(lab, records: dict) -> str:
    methods = records["launch_methods"]["methods"]
    plain, replay = methods["plain, host submit"]["us"], methods["graph replay, GPU events"]["us"]
    key = (f"plain launch {plain:.1f} us, graph replay {replay:.2f} us per kernel "
           f"({plain / replay:.0f}x), prebuilt {methods['prebuilt, host submit']['us']:.1f} us")
    if "scale_one_kernel" not in records:
        return key
    one = records["scale_one_kernel"]
    crossover = lab.crossover_size(one_launch_us(one, "scale"), 8, one["copy_gbps"])
    return f"{key}; merging launches pays below ~{crossover:,} elements"


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
            "sync": method_us(records, "synchronized"), "ratio": host / method_us(records, "graph replay, GPU events"),
            "host_over_gpu": host / gpu, "pre_pct": 100 * method_us(records, "prebuilt, host submit") / host,
            "replay_max": need(records, "launch_methods", "targets", "replay_us_max"),
            "ratio_min": need(records, "launch_methods", "targets", "ratio_min")}


def _profile_values(records):
    """A launch under cProfile against the same launch unprofiled, both of the same recording."""
    profile = need(records, "launch_profile")
    host = method_us(records, "plain, host submit")
    return {"launches": profile["launches"], "profiled": profile["profiled_us_per_launch"], "host": host,
            "profiled_ratio": profile["profiled_us_per_launch"] / host}


def _host_array_values(records):
    smallest = min(need(records, "arguments", "host_arrays"), key=lambda r: r["bytes"])
    slope, none = per_array_us(records)
    return {"per_array": slope, "none": none, "bytes": smallest["bytes"],
            "host": smallest["host"]["us"], "device": smallest["device"]["us"],
            "host_over_device": smallest["host"]["us"] / smallest["device"]["us"]}


def _slope_values(records):
    """The fitted lines of every recorded repeat: each repeat's slope differs by more than one
    fit's error (the host's pace), so the claim prints the range, never one repeat's."""
    fits = [r["fits"] for r in repeats_of(records, "kernel_count", "01")]
    eager, graph = [f["eager"]["per_launch_us"] for f in fits], [f["graph"]["per_launch_us"] for f in fits]
    fixed = [f["eager"]["fixed_us"] for f in fits]
    return {"repeats": len(fits), "eager_lo": min(eager), "eager_hi": max(eager), "graph_lo": min(graph),
            "graph_hi": max(graph), "replay_gain": min(eager) / max(graph),
            "fixed_lo": min(fixed), "fixed_hi": max(fixed)}


def _rows_values(records):
    rows = need(records, "merge_rows")
    n = min(rows["sizes"])
    separate, sliced = row(rows, "separate", n), row(rows, "separate_sliced", n)
    count = separate["launches"]                 # one launch per row: the rows of the recording
    one = one_launch_us(rows, "merged")          # one launch of the batch, same arguments, same run
    return {"n": n, "rows": count, "one": one, "model": count * one / 1e3,
            "gpu_floor": 1e3 * rows["launch_floor_ms"], "sep": separate["median_ms"],
            "sliced": sliced["median_ms"],
            "slice_us": 1e3 * (sliced["median_ms"] - separate["median_ms"]) / count,
            "model_off": max(separate["median_ms"] / (count * one / 1e3), (count * one / 1e3) / separate["median_ms"])}


def _merged_values(records):
    rows = need(records, "merge_rows")
    one = one_launch_us(rows, "merged")
    on_floor = [size for size in rows["sizes"] if 1e3 * row(rows, "merged", size)["median_ms"] <= 2 * one]
    return {"rows": row(rows, "separate", min(rows["sizes"]))["launches"], "one": one,
            "upto": max(on_floor, default=0)}


def _around_values(records):
    steps = need(records, "python_around_launch", "steps")
    launch, sliced = steps["launch with a row index"]["us"], steps["launch on slices"]["us"]
    return {"launch": launch, "slice": steps["slice x[row]"]["us"],
            "alloc": steps["allocate a row"]["us"], "sliced": sliced, "ratio": sliced / launch}


def _wrapper_values(records):
    """Every repeat's moves against its control (WRAPPER_METHOD); the target on the worst repeat."""
    repeats = []
    for record in repeats_of(records, "wrapper_overhead", "01"):
        before = need(record, "plain_over_control", "before")
        ratios = need(record, "ratios")
        repeats.append({"record": 100 * (ratios["after_record_launches"] - 1),
                        "capture": 100 * (ratios["after_capture"] - 1), "ratio": before["median"],
                        "spread": 100 * (before["p90"] - before["p10"]) / before["median"]})
    worst = max(repeats, key=lambda m: max(m["record"], m["capture"]))
    return {**worst, "repeats": len(repeats), "worst": max(worst["record"], worst["capture"]),
            "target_pct": 100 * need(records, "wrapper_overhead", "target", "max_overhead")}


def _while_on_values(records):
    """Each instrument's cost to a plain launch while open, the worst repeat's."""
    repeats = [need(r, "while_on") for r in repeats_of(records, "wrapper_overhead", "01")]
    costs = {name: max(r[name]["cost_us"] for r in repeats) for name in INSTRUMENTS}
    return {**costs, "plain": float(np.median([r["none"]["us"] for r in repeats])),
            "largest": max(costs.values()), "budget": INSTRUMENT_BUDGET_US, "repeats": len(repeats)}


CLAIMS = [
    Claim("host_not_gpu",
          "A plain Numba launch costs the host {host:.1f} us; with the queue kept full the GPU spends "
          "{gpu:.2f} us per launch, {host_over_gpu:.0f}x less: between tiny kernels the GPU idles "
          "{idle:.0f}% of the time, {pace}.",
          headline="plain Numba launch {host:.1f} us of host time",
          values=_launch_values,
          checks=(says("pace", "host_over_gpu", ">", 5, "the host, not the GPU, sets the pace (more than 5x)",
                       "host and GPU within 5x of each other"),)),
    Claim("prebuilt_arguments",
          "Prebuilt arguments cut the host submit to {pre:.1f} us from {host:.1f} us ({pre_pct:.0f}% of it): "
          "{most}.",
          values=_launch_values,
          checks=(says("most", "pre_pct", "<", 50, "most of a launch is preparing its arguments in Python",
                       "preparing its arguments is less than half of a launch"),)),
    Claim("synchronized",
          "A synchronize after every launch costs {sync:.1f} us per launch, {than} the host submit "
          "({host:.1f} us){so}.",
          values=_launch_values,
          checks=(says("than", "sync", ">", "host", "more than", "no more than"),
                  says("so", "sync", ">", "host", ": the host waits for the GPU, then the GPU for the host",
                       ": the wait for the GPU hides inside the submit"))),
    Claim("graph_replay",
          "Replayed as a graph, a kernel costs {replay:.2f} us of GPU time (target: at most "
          "{replay_max:.0f} us, {replay_met}): {ratio:.0f}x less than a plain launch's host cost "
          "(target: at least {ratio_min:.0f}x, {ratio_met}).",
          headline="graph replay {replay:.2f} us per kernel ({ratio:.0f}x less)",
          values=_launch_values,
          checks=(target("replay_met", "replay", "<=", "replay_max"), target("ratio_met", "ratio", ">=", "ratio_min"))),
    Claim("profiled_launch",
          "Under cProfile ({launches:,} launches) a plain launch costs the host {profiled:.0f} us, "
          "{profiled_ratio:.1f}x the {host:.1f} us it costs unprofiled: {slowed}.",
          values=_profile_values,
          checks=(says("slowed", "profiled_ratio", ">", 1, "the profile's times are of a slowed-down launch; "
                       "read its shares, not its microseconds", "cProfile did not slow it down"),),
          explains="cProfile runs a hook at every Python call and return, and a Numba launch is dozens of "
                   "small Python calls (the profile's functions_seen), so the hooks cost more than the "
                   "calls they time; the ratio was first written as ~2x, before a recording measured it"),
    Claim("per_argument",
          "Each array argument adds {per_array:.1f} us to the host submit ({none:.1f} us with none), "
          "{size}: a 1-D array is seven values (5 + 2 per dimension: data, shape and strides among them), "
          "marshalled in Python at every launch.",
          values=_host_array_values,
          checks=(says("size", "per_array", ">", 1, "more than a microsecond each", "under a microsecond each"),)),
    Claim("host_array_trap",
          "A {bytes}-byte NumPy host array as an argument costs {host:.0f} us per launch against {device:.0f} us "
          "for a device array ({host_over_device:.1f}x): {why}.",
          values=_host_array_values,
          checks=(says("why", "host_over_device", ">", 3, "more than 3x: an implicit copy each way, and a wait for each",
                       "under 3x, so the implicit copies cost little here"),)),
    Claim("kernel_count_slope",
          "Against the number of tiny kernels, eager launches cost {eager_lo:.1f}-{eager_hi:.1f} us each "
          "(the fitted slope, in each of {repeats} recorded repeats); replayed as a graph, "
          "{graph_lo:.2f}-{graph_hi:.2f} us: even the slowest replay is {replay_gain:.0f}x {gain}.",
          values=_slope_values,
          checks=(says("gain", "replay_gain", ">", 10, "cheaper than the fastest eager slope (more than 10x)",
                       "cheaper than the fastest eager slope, less than 10x"),)),
    Claim("kernel_count_intercept",
          "The eager line's intercept is {fixed_lo:.0f} to {fixed_hi:.0f} us over the {repeats} repeats: "
          "{sign}.",
          values=_slope_values,
          checks=(says("sign", "fixed_hi", "<", 0, "negative in every repeat, so it is not a fixed cost of "
                       "starting and synchronizing, only what the fit leaves", "a fixed cost the fit resolves"),),
          explains="the fit is dominated by the largest counts, where a 1 us change in the cost per launch moves "
                   "the total of 1,000 launches by 1,000 us; the host's pace drifts that much inside one sweep "
                   "(per-launch cost at 1,000 kernels above that at 100-200 in the first repeat), while the "
                   "real fixed cost, one synchronize, is tens of microseconds (the count = 1 row), so the "
                   "intercept it leaves is noise, below zero here"),
    Claim("rows_separately",
          "{rows} launches of one row each take {sep:.3f} ms at {n} elements per row. The model, {rows} "
          "times one launch of the whole batch in the same run (its fastest, {one:.1f} us), predicts "
          "{model:.3f} ms, {fit} ({model_off:.2f}x apart); the GPU's own cost of an empty launch is "
          "{gpu_floor:.1f} us, so the rest of each launch is the host's. Slicing rows instead (`x[row]`, "
          "`out[row]`) took {sliced:.3f} ms: {slice_us:.0f} us of Python per row, on top of its launch.",
          values=_rows_values,
          checks=(says("fit", "model_off", "<=", 1.5, "within 1.5x of the measurement", "more than 1.5x off"),
                  states("sliced", ">", "sep"), states("gpu_floor", "<", "one"))),
    Claim("rows_merged_floor",
          "One 2D launch for all {rows} rows stays within 2x of its fastest call ({one:.1f} us) up to "
          "{upto:,} elements per row ({reach} 4,096): below the crossover, a batch costs one launch.",
          values=_merged_values,
          checks=(says("reach", "upto", ">=", 4096, "at least", "short of"),)),
    Claim("python_around_launch",
          "Around a launch that costs the host {launch:.1f} us, slicing a device array costs {slice:.1f} us "
          "and allocating a row-sized output {alloc:.1f} us: one row launched on slices (`x[row]`, "
          "`out[row]`) costs {sliced:.1f} us, {ratio:.1f}x the launch with a row index: {advice}.",
          values=_around_values,
          checks=(says("advice", "ratio", ">", 1.5, "slicing adds more than half a launch: a launcher that slices or "
                       "allocates per call pays for it at every launch; pass offsets and preallocate", "slicing costs under half a launch here"),)),
    Claim("instruments_while_on",
          "While open, record_launches adds {record_launches:+.1f} us to a plain launch ({plain:.1f} us), a "
          "Timeline {timeline:+.1f} us and the grader's poisoned allocations {poisoned_allocations:+.1f} us "
          "(worst of {repeats} repeat(s), each against a bare launch in the same round; the traffic meter "
          "runs only in the simulator): the costliest adds {largest:+.1f} us, {verdict} the {budget:.0f} us an "
          "open instrument may add.",
          values=_while_on_values,
          checks=(says("verdict", "largest", "<=", "budget", "within", "more than"),),
          explains="each instrument wraps numba-cuda's launch entry point while it is open and notes the "
                   "launch (a Timeline also records two CUDA events on its stream), so a launch inside it "
                   "does more host work; none of them synchronizes"),
    Claim("instruments_cost_nothing",
          "Against a control taken in turn with it (the same kernel launched past numba-cuda's dispatcher "
          "entry point, which the hooks wrap), a plain launch moved {record:+.1f}% after record_launches and "
          "{capture:+.1f}% after a graph capture, in the worst of {repeats} repeat(s) (worst {worst:+.1f}%; "
          "target: at most {target_pct:+.0f}%, {met}); before them it cost {ratio:.2f}x its control, and that "
          "ratio's p10 to p90 spanned {spread:.1f}% of it.",
          values=_wrapper_values,
          checks=(target("met", "worst", "<=", "target_pct"),),
          explains="the dispatcher is restored after the hooks (the record says so), so both sides run "
                   "the same Python; what an instrument costs while it is open is the claim before this one"),
]


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
