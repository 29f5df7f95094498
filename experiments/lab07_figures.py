"""Lab 07's figures: the measured timelines and speed-ups against the model, and the model's
own pictures with nominal H200 costs (no measurement: they are drawn in the simulator too)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernellab import scheduler
from kernellab.course.claims import repeats_of
from kernellab.gpu import device
from kernellab.gpu.timeline import Timeline, TimelineData, plot_gantts
from kernellab.show import plots

from experiments.lab07_constants import (
    CONCURRENCY_RECORD, CONNECTIONS, FEW_BLOCKS, KERNEL_MS, NOMINAL, NUMBER, PIPELINE_CHUNKS, PIPELINE_N,
    PIPELINE_STEPS, PIPELINE_STREAMS, SIM_ITERS, STREAM_COUNTS, TARGETS)
from experiments.lab07_measure import busy_blocks_per_sm, hidden_by_events, predict_sweep


def predicted_pipeline(lab, bps: int, sm_count: int, streams: int = PIPELINE_STREAMS) -> TimelineData:
    """The model's picture of the lab's own pipeline: its trace, recorded here at a tiny size (it
    runs in the simulator too), costed with NOMINAL H200-like figures for 16 MB chunks."""
    cuda = device.cuda()
    host_x = cuda.pinned_array(PIPELINE_CHUNKS * 4, dtype=np.float32)
    host_x[:] = 2.0
    with Timeline() as tl:
        lab.pipeline(host_x, SIM_ITERS, [cuda.stream() for _ in range(streams)], PIPELINE_CHUNKS)
    chunk_blocks = PIPELINE_N // PIPELINE_CHUNKS // lab.DEFAULT_BLOCK
    waves = -(-chunk_blocks // (sm_count * bps))

    def cost(op):
        if op.kind == "kernel":
            return {"blocks": chunk_blocks, "block_ms": NOMINAL["chunk_kernel_ms"] / waves,
                    "blocks_per_sm": bps}
        return {"block_ms": NOMINAL["copy_ms"]}

    machine = scheduler.Machine(sm_count, host_launch_ms=NOMINAL["host_launch_ms"])
    return scheduler.simulate(scheduler.from_trace(tl.trace, cost), machine,
                              source="model, nominal H200 costs")


def plot_timelines(one: TimelineData, many: TimelineData, record, title: str, name: str,
                   figures_dir: Path) -> Path:
    fig, axes = plots.new_figure(title, record, ncols=2)
    plot_gantts(axes, [one, many], [f"{len(data.rows)} stream(s): {data.makespan_ms:.3g} ms [{data.source}]"
                                    for data in (one, many)])
    return plots.save(fig, name, figures_dir)


def plot_speedups(panels: dict, record, figures_dir: Path) -> Path:
    """Speed-up over one stream against stream count, one panel per hardware-queue count:
    model lines, measured points. `panels`: {title: (model curves, measured points or None)}."""
    fig, axes = plots.new_figure("16 independent kernels: speed-up over one stream", record,
                                 ncols=len(panels))
    styles = {"few_sms": "C0", "fills_gpu": "C3"}
    for ax, (title, (model, measured)) in zip(axes, panels.items()):
        for (shape, mode), curve in model.items():
            ax.plot(list(curve), list(curve.values()), color=styles[shape], ls="-" if mode == "gated" else "--",
                    label=f"model: {shape.replace('_', ' ')}, {mode}")
        for (shape, mode), points in (measured or {}).items():
            ax.plot(list(points), list(points.values()), "o" if mode == "gated" else "s", color=styles[shape],
                    mfc="none" if mode == "plain" else styles[shape],
                    label=f"measured: {shape.replace('_', ' ')}, {mode}")
        ax.plot(STREAM_COUNTS, STREAM_COUNTS, ":", color="gray", label="ideal (S x)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("streams")
        ax.set_ylabel("speed-up over 1 stream")
        ax.set_title(title)
        ax.legend(fontsize="xx-small")
    return plots.save(fig, "lab07_speedup", figures_dir)


def model_curves(bps: int, sm_count: int, conc: dict | None, queues: int | None = None) -> dict:
    """Predicted speed-ups per (shape, mode): from the record's calibration, or nominal figures
    through `queues` hardware queues."""
    curves = {}
    for shape in ("few_sms", "fills_gpu"):
        blocks = FEW_BLOCKS if shape == "few_sms" else sm_count * bps
        for mode in ("gated", "plain"):
            if conc:
                rows = conc["shapes"][shape]["modes"][mode]
                curves[(shape, mode)] = {r["streams"]: r["predicted_speedup"] for r in rows}
                continue
            host = 0.0 if mode == "gated" else NOMINAL["host_launch_ms"]
            sweep = predict_sweep(blocks, KERNEL_MS / -(-blocks // (sm_count * bps)), bps, sm_count, host,
                                  queues=queues)
            curves[(shape, mode)] = {s: sweep[1].makespan_ms / d.makespan_ms for s, d in sweep.items()}
    return curves


def measured_points(conc: dict) -> dict:
    return {(shape, mode): {r["streams"]: r["speedup"] for r in rows}
            for shape, data in conc["shapes"].items() for mode, rows in data["modes"].items()}


def draw_timelines(lab, records: dict, figures_dir: Path) -> Path:
    """Measured: 16 small kernels, pre-enqueued, on 1 and on 16 streams."""
    conc = records["concurrency"]
    few = conc["shapes"]["few_sms"]["modes"]["gated"]
    return plot_timelines(TimelineData.from_dict(few[0]["timeline"]), TimelineData.from_dict(few[-1]["timeline"]),
                          conc, f"16 kernels x 8 blocks, pre-enqueued: 1 vs 16 streams "
                          f"(CUDA_DEVICE_MAX_CONNECTIONS={conc['max_connections']})", "lab07_timelines",
                          figures_dir)


def draw_speedups(lab, records: dict, figures_dir: Path) -> Path:
    """Speed-ups against the model at each connection count; a count with no measurement
    recorded yet shows the model alone, with nominal figures, and says so."""
    conc = records["concurrency"]
    panels = {}
    for connections in CONNECTIONS:
        measured = records.get(CONCURRENCY_RECORD[connections])
        if measured:
            panels[f"CUDA_DEVICE_MAX_CONNECTIONS={connections}"] = (
                model_curves(conc["blocks_per_sm"], conc["sm_count"], measured), measured_points(measured))
        else:
            panels[f"{connections} hardware queues: model only (nothing measured at {connections} "
                   f"connections yet)"] = (model_curves(conc["blocks_per_sm"], conc["sm_count"], None,
                                                        connections), None)
    return plot_speedups(panels, conc, figures_dir)


def draw_overlap(lab, records: dict, figures_dir: Path) -> Path:
    """Measured: the chunked pipeline from pageable and from pinned memory, with the hidden share
    each timeline shows (lab07_measure.hidden_by_events: as the makespans count it)."""
    pipe = records["pipeline"]
    pageable, pinned = (TimelineData.from_dict(pipe["cases"][memory]["timeline"], f"measured, {memory}")
                        for memory in ("pageable", "pinned"))
    return plot_timelines(pageable, pinned, pipe, f"chunked pipeline, by its events: pageable (hides "
                          f"{hidden_by_events(pageable):.0%}) vs pinned host memory (hides "
                          f"{hidden_by_events(pinned):.0%})", "lab07_overlap", figures_dir)


def draw_pipeline_steps(lab, records: dict, figures_dir: Path) -> Path:
    """Each tuning step's hidden share without the recorder: a bar for the worst repeat, a dot for
    every repeat, the steps in the order a student would try them (PIPELINE_STEPS), with the
    overlap target beside them and each step's pipeline time (the slowest repeat's)."""
    repeats = [r for r in repeats_of(records, "pipeline", NUMBER) if "steps" in r]
    names = [name for name in PIPELINE_STEPS if all(name in r["steps"] for r in repeats)]
    fig, (ax,) = plots.new_figure(f"pipeline tuning steps, no recorder: worst of {len(repeats)} "
                                  "repeat(s) (bar), each repeat (dot)", records["pipeline"], height=0.55 * len(names) + 2.6)
    for y, name in enumerate(names):
        shares = [100 * r["steps"][name]["hidden_fraction"] for r in repeats]
        ms = max(r["steps"][name]["pipeline_ms"]["median_ms"] for r in repeats)
        chunks, streams, order, _ = PIPELINE_STEPS[name]
        ax.barh(y, min(shares), color="tab:blue" if min(shares) >= 0 else "tab:red", height=0.6)
        ax.plot(shares, [y] * len(shares), "o", color="black", markersize=4)
        ax.text(max(0.0, max(shares)) + 2, y, f"{min(shares):.0f}%, {ms:.2f} ms", va="center", fontsize="small")
    # A step's share is of its own copies alone: one copy stream's take turns on that one stream.
    ax.set_yticks(range(len(names)), [f"{PIPELINE_STEPS[n][0]} chunks, {PIPELINE_STEPS[n][1]} stream(s), "
                                      f"{PIPELINE_STEPS[n][2].replace('_', ' ')}"
                                      + ("\n(hidden behind its copies on 1 stream)" if n == "one_copy_stream" else "")
                                      for n in names])
    ax.set_ylim(len(names) - 0.5, -1.1)
    ax.axvline(0, color="grey", linewidth=0.8)
    target_pct = 100 * TARGETS["hidden_fraction"]
    ax.axvline(target_pct, color="tab:green", linestyle="--")
    ax.text(target_pct, -0.75, f"target {target_pct:.0f}% (the lab's pipeline)", color="tab:green",
            ha="center", va="bottom", fontsize="small")
    ax.set_xlim(min(-5.0, *(100 * min(r["steps"][n]["hidden_fraction"] for r in repeats) - 5 for n in names)), 125)
    ax.set_xlabel("share of the kernels hidden (%; below 0: slower than copies, then kernels)")
    return plots.save(fig, "lab07_pipeline_steps", figures_dir)


def draw_model_timelines(lab, records: dict, figures_dir: Path) -> Path:
    """The model's picture of 16 small kernels launched from Python, with nominal H200 figures."""
    bps, sm_count = busy_blocks_per_sm(lab), device.facts().sm_count
    nominal = predict_sweep(FEW_BLOCKS, KERNEL_MS, bps, sm_count, NOMINAL["host_launch_ms"])
    return plot_timelines(nominal[1], nominal[16], None,
                          "model: 16 kernels x 8 blocks, launched from Python (not a measurement)",
                          "lab07_timelines_model", figures_dir)


def draw_model_overlap(lab, records: dict, figures_dir: Path) -> Path:
    """The model's picture of the lab's own pipeline on 1 and on 4 streams, nominal H200 costs."""
    bps, sm_count = busy_blocks_per_sm(lab), device.facts().sm_count
    return plot_timelines(predicted_pipeline(lab, bps, sm_count, 1), predicted_pipeline(lab, bps, sm_count),
                          None, "model: chunked pipeline, nominal H200 costs (not a measurement)",
                          "lab07_overlap_model", figures_dir)
