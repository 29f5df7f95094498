"""Lab 07's figures: the measured timelines and speed-ups against the model, and the model's
own picture of the pipeline, costed from the record (drawn in the simulator too)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernellab import scheduler
from kernellab.course.claims import repeats_of
from kernellab.gpu import device
from kernellab.gpu.timeline import Timeline, TimelineData, plot_gantts
from kernellab.show import plots

from experiments.lab07_constants import (
    CONCURRENCY_RECORD, CONNECTIONS, NUMBER, PIPELINE_CHUNKS, PIPELINE_N, PIPELINE_STEPS, PIPELINE_STREAMS,
    SIM_ITERS, STREAM_COUNTS)


def predicted_pipeline(lab, bps: int, sm_count: int, copy_ms: float, kernel_ms: float,
                       streams: int = PIPELINE_STREAMS) -> TimelineData:
    """The model's picture of the lab's own pipeline: its trace, recorded here at a tiny size (it
    runs in the simulator too), each copy costed `copy_ms` and each chunk's kernel `kernel_ms` (the
    recorded one-stream run's, as pipeline_issue_order's model), with a host that costs nothing."""
    cuda = device.cuda()
    host_x = cuda.pinned_array(PIPELINE_CHUNKS * 4, dtype=np.float32)
    host_x[:] = 2.0
    with Timeline() as tl:
        lab.pipeline(host_x, SIM_ITERS, [cuda.stream() for _ in range(streams)], PIPELINE_CHUNKS)
    chunk_blocks = PIPELINE_N // PIPELINE_CHUNKS // lab.DEFAULT_BLOCK
    waves = -(-chunk_blocks // (sm_count * bps))

    def cost(op):
        kernel = {"blocks": chunk_blocks, "block_ms": kernel_ms / waves, "blocks_per_sm": bps}
        return kernel if op.kind == "kernel" else {"block_ms": copy_ms}

    return scheduler.simulate(scheduler.from_trace(tl.trace, cost), scheduler.Machine(sm_count),
                              source="model, recorded costs, free host")


def plot_timelines(one: TimelineData, many: TimelineData, record, title: str, name: str, figures_dir: Path,
                   labels=None, shared: bool | None = None) -> Path:
    fig, axes = plots.new_figure(title, record, ncols=2)
    plot_gantts(axes, [one, many], [f"{label or f'{len(data.rows)} stream(s)'}: {data.makespan_ms:.3g} ms [{data.source}]"
                                    for data, label in zip((one, many), labels or (None, None))], shared=shared)
    return plots.save(fig, name, figures_dir)


def plot_speedups(panels: dict, record, figures_dir: Path) -> Path:
    """Speed-up over one stream against stream count, one panel per hardware-queue count: for each
    kernel shape and launch mode (a colour each), the model's line and the measured points."""
    fig, axes = plots.new_figure("16 independent kernels: speed-up over one stream", record, ncols=len(panels))
    names = {"few_sms": "small kernels", "fills_gpu": "GPU-filling kernels", "gated": "pre-enqueued", "plain": "plain"}
    for ax, (title, (model, measured)) in zip(axes, panels.items()):
        for colour, ((shape, mode), curve) in enumerate(model.items()):
            ax.plot(list(curve), list(curve.values()), color=f"C{colour}", ls="-" if mode == "gated" else "--",
                    label=f"model: {names[shape]}, {names[mode]}")
            points = measured[(shape, mode)]
            ax.plot(list(points), list(points.values()), "o" if mode == "gated" else "s", color=f"C{colour}",
                    mfc="none" if mode == "plain" else f"C{colour}", label=f"measured: {names[shape]}, {names[mode]}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xticks(STREAM_COUNTS, [str(s) for s in STREAM_COUNTS])
        ax.set_yticks(STREAM_COUNTS, [str(s) for s in STREAM_COUNTS])
        ax.set_xlabel("streams")
        ax.set_ylabel("speed-up over 1 stream")
        ax.set_title(title)
        ax.legend(fontsize="xx-small")
    return plots.save(fig, "lab07_speedup", figures_dir)


def draw_timelines(lab, records: dict, figures_dir: Path) -> Path:
    """Measured: 16 small kernels, pre-enqueued, on 1 and on 16 streams, on one time axis."""
    conc = records["concurrency"]
    few = conc["shapes"]["few_sms"]["modes"]["gated"]
    return plot_timelines(TimelineData.from_dict(few[0]["timeline"]), TimelineData.from_dict(few[-1]["timeline"]),
                          conc, f"16 kernels x 8 blocks, pre-enqueued: 1 vs 16 streams "
                          f"(CUDA_DEVICE_MAX_CONNECTIONS={conc['max_connections']})", "lab07_timelines",
                          figures_dir, shared=True)


def draw_speedups(lab, records: dict, figures_dir: Path) -> Path:
    """Speed-ups against the model at each connection count."""
    panels = {f"CUDA_DEVICE_MAX_CONNECTIONS={connections}": tuple(
        {(shape, mode): {r["streams"]: r[key] for r in rows} for shape, data in record["shapes"].items()
         for mode, rows in data["modes"].items()} for key in ("predicted_speedup", "speedup"))
        for connections in CONNECTIONS for record in [records[CONCURRENCY_RECORD[connections]]]}
    return plot_speedups(panels, records["concurrency"], figures_dir)


def draw_overlap(lab, records: dict, figures_dir: Path) -> Path:
    """Measured: one recorded run of the chunked pipeline from pageable and from pinned memory, each
    on its own time axis (on the pageable run's, the pinned overlap is a sliver)."""
    pipe = records["pipeline"]
    pageable, pinned = (TimelineData.from_dict(pipe["cases"][memory]["timeline"], "one recorded run")
                        for memory in ("pageable", "pinned"))
    return plot_timelines(pageable, pinned, pipe, "chunked pipeline on 4 streams: pageable vs pinned host memory",
                          "lab07_overlap", figures_dir, labels=("pageable", "pinned"))


def draw_pipeline_steps(lab, records: dict, figures_dir: Path) -> Path:
    """Each tuning step's pipeline time without the recorder (a bar: the median over the repeats; a dot
    each repeat), in the order a student would try them, across each bar its copies alone (all hidden)."""
    repeats = [r for r in repeats_of(records, "pipeline", NUMBER) if "steps" in r]
    names = [name for name in PIPELINE_STEPS if all(name in r["steps"] for r in repeats)]
    fig, (ax,) = plots.new_figure(f"pipeline tuning steps, no recorder: median of {len(repeats)} repeat(s) "
                                  "(bar), each repeat (dot)", records["pipeline"], height=0.55 * len(names) + 2.6)
    for y, name in enumerate(names):
        times = [r["steps"][name]["pipeline_ms"]["median_ms"] for r in repeats]
        ax.barh(y, float(np.median(times)), color="tab:blue", height=0.6)
        ax.plot(times, [y] * len(times), "o", color="black", markersize=4)
        ax.text(max(times) * 1.02, y, f"{np.median(times):.2f} ms", va="center", fontsize="small")
        copies = float(np.median([r["steps"][name]["copies_ms"]["median_ms"] for r in repeats]))
        ax.plot([copies, copies], [y - 0.4, y + 0.4], color="tab:green", lw=2.5,
                label="that step's copies alone" if y == 0 else None)
    ax.set_yticks(range(len(names)), [f"{PIPELINE_STEPS[n][0]} chunks, {PIPELINE_STEPS[n][1]} stream(s), "
                                      f"{PIPELINE_STEPS[n][2].replace('_', ' ')}" for n in names])
    ax.set_ylim(len(names) - 0.5, -0.6)
    ax.legend(loc="lower right", fontsize="small")
    ax.set_xlim(0, 1.2 * max(r["steps"][n]["pipeline_ms"]["median_ms"] for r in repeats for n in names))
    ax.set_xlabel("pipeline time (ms; shorter is better)")
    return plots.save(fig, "lab07_pipeline_steps", figures_dir)
