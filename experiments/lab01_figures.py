"""Lab 01's figures: a launch's cost by method and what it pays for, the total time of a chain
of tiny kernels, the Python around a launch, and time against size beside the floor model."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernellab.course.claims import repeats_of
from kernellab.show import plots

from experiments.lab01_claims import per_array_us
from experiments.lab01_measure import floor_model, in_each_repeat, typical_record, typical_times


def _repeats_title(records: dict, name: str, whiskers: bool = False) -> str:
    """A title's note of what each value is, where the records hold several repeats."""
    count = len(repeats_of(records, name, "01"))
    return (f" (median of {count} repeats{', whiskers: range' if whiskers else ''})"
            if count > 1 else "")


def draw_launch_methods(lab, records: dict, figures_dir: Path) -> Path:
    """Launch cost by method: plain, synchronized, graph replay, prebuilt (and the other views),
    each the median of the repeats, their range as whiskers."""
    methods = typical_record(records, "launch_methods")
    fig, (ax,) = plots.new_figure("One tiny Numba launch, by method"
                                  + _repeats_title(records, "launch_methods", whiskers=True), methods, width=8.0)
    names = sorted(methods["methods"], key=lambda n: -methods["methods"][n]["us"])   # costliest on top
    values = [methods["methods"][n]["us"] for n in names]
    each = [in_each_repeat(records, "launch_methods", "methods", n, "us") for n in names]
    whiskers = [[v - min(e) for v, e in zip(values, each)], [max(e) - v for v, e in zip(values, each)]]
    family = {"graph": "C1", "prebuilt": "C2", "synchronized": "C3"}
    bars = ax.barh(names, values, xerr=whiskers, ecolor="0.3", capsize=2,
                   color=[family.get(n.split(" ")[0].rstrip(","), "C0") for n in names])
    for bar, value, every in zip(bars, values, each):
        ax.annotate(f"{value:.2f} us", (max(every), bar.get_y() + bar.get_height() / 2), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize="small")
    ax.set_xscale("log")
    ax.set_xlabel("microseconds per launch (per kernel for graph replay)")
    ax.invert_yaxis()
    return plots.save(fig, "lab01_launch_cost_by_method", figures_dir)


def _function_name(profiled: str) -> str:
    """A cProfile row's function, short: "launch (dispatcher.py:493)" -> "launch", and
    "<method '_cuda_call' of '_dispatcher.Dispatcher' objects>" -> "Dispatcher._cuda_call"."""
    name = profiled.split(" (")[0]
    if name.startswith("<method '"):
        method, owner = name.split("'")[1], name.split("'")[3]
        name = f"{owner.rsplit('.', 1)[-1]}.{method}"
    return name[:32]


def draw_launch_breakdown(lab, records: dict, figures_dir: Path) -> Path:
    """What a launch pays for: array arguments, host arrays (each the median of the repeats), and
    the functions on the launch path (the first repeat's profile)."""
    args, profile = typical_record(records, "arguments"), records["launch_profile"]
    profiled = typical_record(records, "launch_profile")["profiled_us_per_launch"]
    fig, (ax_args, ax_host, ax_prof) = plots.new_figure(
        "What a Numba launch pays for" + _repeats_title(records, "arguments"), args, ncols=3)
    counts = np.array([r["arrays"] for r in args["by_count"]])
    ax_args.plot(counts, [r["us"] for r in args["by_count"]], "o", label="median of the repeats")
    slope, none = per_array_us(records)
    ax_args.plot(counts, none + slope * counts, "--", lw=0.8,
                 label=f"fit, the median-slope repeat:\n{none:.1f} + {slope:.1f} us per array")
    ax_args.legend(fontsize="x-small")
    ax_args.set_xlabel("array arguments")
    ax_args.set_ylabel("host submit time (us per launch)")
    ax_args.set_ylim(bottom=0)
    labels = [f"{int(r['bytes']):,} B" for r in args["host_arrays"]]
    where = np.arange(len(labels))
    for offset, kind, label in ((-0.2, "device", "device array"), (0.2, "host", "NumPy host array")):
        ax_host.bar(where + offset, [r[kind]["us"] for r in args["host_arrays"]], 0.4, label=label)
    ax_host.set_xticks(where, labels)
    ax_host.set_yscale("log")
    ax_host.set_ylabel("us per launch")
    ax_host.legend(fontsize="small")
    top = profile["top"][:8][::-1]
    ax_prof.barh([_function_name(r["function"]) for r in top], [r["self_us"] for r in top])
    ax_prof.set_xlabel(f"self time, us per launch, in the first repeat\n(a launch under cProfile: "
                       f"{profiled:.0f} us, the median)")
    ax_prof.tick_params(axis="y", labelsize="x-small")
    return plots.save(fig, "lab01_launch_breakdown", figures_dir)


def draw_kernel_count(lab, records: dict, figures_dir: Path) -> Path:
    """Total time against the number of tiny kernels: the slope is the cost per launch. Of several
    recorded repeats, the one whose eager slope is their median (the slope the claim prints)."""
    repeats = repeats_of(records, "kernel_count", "01")
    repeats.sort(key=lambda r: r["fits"]["eager"]["per_launch_us"])
    counts = repeats[len(repeats) // 2]
    fig, (ax,) = plots.new_figure("A chain of tiny kernels, launch to synchronize"
                                  + (f"\n(of {len(repeats)} repeats, the one with the median slope)"
                                     if len(repeats) > 1 else ""),
                                  counts)
    x = np.array([r["count"] for r in counts["rows"]])
    for color, name in (("C0", "eager"), ("C1", "graph")):
        y = [r[f"{name}_us"] for r in counts["rows"]]
        slope, fixed = lab.per_launch_cost(x, y)
        ax.plot(x, y, "o", color=color, label=f"{name}: {slope:.2f} us per kernel (fit)")
        fitted = fixed + slope * x
        shown = fitted > 0                     # a negative intercept leaves a log axis: drawn where positive
        ax.plot(x[shown], fitted[shown], "-", color=color, lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kernels launched")
    ax.set_ylabel("total time (us)")
    ax.legend(fontsize="small")
    return plots.save(fig, "lab01_kernel_count", figures_dir)


def draw_python_around_launch(lab, records: dict, figures_dir: Path) -> Path:
    """Host time of each step around one row's launch, beside the launch itself (each the median
    of the repeats)."""
    around = typical_record(records, "python_around_launch")
    fig, (ax,) = plots.new_figure(f"The Python around a launch (rows of {int(around['elements_per_row']):,} "
                                  "float32)", around, width=7.0, height=3.0)
    names = list(around["steps"])
    values = [around["steps"][n]["us"] for n in names]
    bars = ax.barh(names, values, color=["C0" if n.startswith("launch") else "C3" for n in names])
    for bar, step in zip(bars, names):
        ax.annotate(f"{around['steps'][step]['us']:.1f} us", (bar.get_width(), bar.get_y() + 0.4),
                    xytext=(3, 0), textcoords="offset points", va="center", fontsize="small")
    ax.set_xlabel("host time, us per call" + _repeats_title(records, "python_around_launch"))
    ax.invert_yaxis()
    return plots.save(fig, "lab01_python_around_launch", figures_dir)


def draw_time_vs_size(lab, records: dict, figures_dir: Path) -> Path:
    """One kernel's time against n beside the floor model; rows per launch against one launch,
    each beside its model (`floor_model`). An empty kernel launched back to back (dotted) shows how
    much of the floor is the host's."""
    one, rows = typical_times(records["scale_one_kernel"]), typical_times(records["merge_rows"])   # medians of the repeats
    launch_us, gbps, crossover = floor_model(lab, one, "scale")
    fig, (ax_one, ax_rows) = plots.new_figure("Time against size (median of the repeats): the floor "
                                              "model and its crossover against measurement", one, ncols=2)
    plots.time_vs_size(ax_one, one)
    sizes = np.array(one["sizes"], dtype=np.float64)
    ax_one.plot(sizes, 1e-3 * lab.predicted_time_us(sizes, launch_us, 8, gbps), "k--",
                lw=0.8, label=f"model: max(fastest size ({launch_us:.0f} us), bytes / {gbps:.0f} GB/s)")
    ax_one.axvline(crossover, color="C3", ls=":", label=f"the model's crossover, n = {crossover:,}")
    ax_one.legend()
    plots.time_vs_size(ax_rows, rows)
    ax_rows.set_ylabel("")                                # the left panel's label says it: ms per call
    per_row = np.array(rows["sizes"], dtype=np.float64)
    first = rows["rows"][0]
    batch = first["bytes"] // (8 * first["size"])          # rows per batch, from the declared bytes
    batch_launch_us, rows_gbps, batch_crossover = floor_model(lab, rows, "merged")
    color = {line.get_label(): line.get_color() for line in ax_rows.get_lines()}   # each model in its variant's
    ax_rows.plot(per_row, 1e-3 * batch * lab.predicted_time_us(per_row, batch_launch_us, 8, rows_gbps),
                 "--", color=color.get("separate", "k"), lw=0.8,
                 label=f"model, one launch per row ({batch} x one launch)")
    ax_rows.plot(per_row, 1e-3 * lab.predicted_time_us(batch * per_row, batch_launch_us, 8, rows_gbps),
                 "--", color=color.get("merged", "k"), lw=0.8, label="model, one launch")
    ax_rows.axvline(batch_crossover / batch, color="C3", ls=":",
                    label=f"the model's crossover for one launch of {batch} rows")
    ax_rows.legend()
    return plots.save(fig, "lab01_time_vs_size", figures_dir)
