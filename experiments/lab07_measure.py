"""Lab 07's measurements (GPU only), each in a fresh process (`in_fresh_process`), and the block-
scheduler model they are compared with."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from kernellab import scheduler
from kernellab.course import reference
from kernellab.course import target as course_target
from kernellab.gpu import checks, device, timing
from kernellab.gpu.timeline import (
    Makespan, Timeline, TimelineData, recorder_cost, reserve_events, windows_in_turn)
from kernellab.kernels import resources
from kernellab.show.progress import progress_bar

from experiments.lab07_constants import (
    CONCURRENCY_RECORD, CONNECTIONS_OF, FEW_BLOCKS, KERNEL_MS, KERNELS, MAIN_CONNECTIONS,
    PIPELINE_CHUNKS, PIPELINE_N, PIPELINE_STEPS, PIPELINE_STREAMS, REPS, SIGNATURE, STREAM_COUNTS)


# --- the model -------------------------------------------------------------------------------------

def busy_blocks_per_sm(lab) -> int:
    """Resident busy_kernel blocks per SM, from its registers and the occupancy calculator."""
    return resources.occupancy_of(lab.busy_kernel, SIGNATURE, lab.DEFAULT_BLOCK).active_blocks


def predict_sweep(blocks, block_ms, bps, sm_count, host_launch_ms=0.0, latency_ms=0.0,
                  counts=STREAM_COUNTS, queues: int | None = None) -> dict[int, TimelineData]:
    """The model's timeline of KERNELS identical kernels on each stream count, through `queues`
    hardware queues (None: one per stream)."""
    machine = scheduler.Machine(sm_count, host_launch_ms=host_launch_ms, launch_latency_ms=latency_ms,
                                hardware_queues=queues)
    return {s: scheduler.simulate(scheduler.round_robin(KERNELS, s, blocks=blocks, block_ms=block_ms, blocks_per_sm=bps),
                                  machine) for s in counts}


# --- measurements (GPU only) ---------------------------------------------------------------------

def median_run(run, reps: int, before=None) -> tuple[list[Timeline], Timeline]:
    """`reps` timelines of run() after one warm-up; returns them and the one of median makespan."""
    runs = []
    for rep in range(reps + 1):
        if before:
            before()
        with Timeline() as tl:
            run()
        if rep:
            runs.append(tl)
    ordered = sorted(runs, key=lambda t: t.data.makespan_ms)
    return runs, ordered[len(ordered) // 2]


def spread(values) -> dict:
    return {"median": float(np.median(values)), "p10": float(np.percentile(values, 10)),
            "p90": float(np.percentile(values, 90)), "reps": len(values)}


def calibrate_iters(lab, blocks: int, target_ms: float, stream) -> int:
    """busy_kernel iterations that make a `blocks`-block kernel take about target_ms."""
    cuda = device.cuda()
    x = cuda.to_device(np.ones(blocks * lab.DEFAULT_BLOCK, dtype=np.float32))
    out = cuda.device_array_like(x)
    probe = 1 << 16
    t = timing.time_gpu(lambda: lab.busy(x, probe, out=out, stream=stream), warmup=2, reps=5, stream=stream)
    return max(1, round(probe * target_ms / t.median_ms))


def measure_concurrency(lab, bps: int, reps: int = REPS) -> dict:
    """Both shapes x both launch modes x every stream count, with the model's predictions."""
    cuda = device.cuda()
    sm_count = device.facts().sm_count
    streams = [cuda.stream() for _ in range(max(STREAM_COUNTS))]
    scratch = cuda.to_device(np.ones(lab.DEFAULT_BLOCK, dtype=np.float32))
    iters = calibrate_iters(lab, FEW_BLOCKS, KERNEL_MS, streams[0])
    gate_iters = 2 * iters   # the gate outlasts the host's enqueueing of 16 launches (~0.5 ms)
    shapes = {}
    for shape, blocks in (("few_sms", FEW_BLOCKS), ("fills_gpu", sm_count * bps)):
        n = blocks * lab.DEFAULT_BLOCK
        xs = [cuda.to_device(np.full(n, 2.0, dtype=np.float32)) for _ in range(KERNELS)]
        outs = [cuda.device_array(n, dtype=np.float32) for _ in range(KERNELS)]
        alone = timing.time_gpu(lambda: lab.busy(xs[0], iters, out=outs[0], stream=streams[0]),
                                warmup=2, reps=10, stream=streams[0])
        modes = {}
        for mode in ("gated", "plain"):
            rows = []
            for count in progress_bar(STREAM_COUNTS, desc=f"{shape}, {mode}", unit="stream count"):
                hold = (lambda c=count: lab.hold(streams[:c], gate_iters, scratch)) if mode == "gated" else None
                runs, middle = median_run(lambda c=count: lab.run_independent(xs, iters, streams[:c], outs),
                                          reps, before=hold)
                rows.append({"streams": count, "makespan_ms": spread([t.data.makespan_ms for t in runs]),
                             "host_ms_per_launch": float(np.median([t.host_ms_per_launch() for t in runs])),
                             "timeline": middle.data.as_dict() if count in (1, max(STREAM_COUNTS)) else None})
            modes[mode] = rows
        checks.assert_matches(outs[-1], lab.busy_reference(np.full(n, 2.0), iters), rtol=1e-5,
                              what=f"{shape} outputs")
        shapes[shape] = {"blocks": blocks, "kernel_alone": alone.as_dict(), "modes": modes}
    record = {"provenance": reference.provenance(), "kernels": KERNELS, "block": lab.DEFAULT_BLOCK,
              "iters": iters, "gate_iters": gate_iters, "blocks_per_sm": bps, "sm_count": sm_count,
              "max_connections": int(os.environ["CUDA_DEVICE_MAX_CONNECTIONS"]),
              "shapes": shapes}
    add_predictions(record)
    return record


def add_predictions(record: dict):
    """Predict every measured configuration; calibration: one kernel alone, the 1-stream gaps of
    the gated run, and (plain runs) the host time between launches measured in that same
    configuration: the host's submit cost is an input of the model, not something it predicts.
    Fills in speed-ups and errors."""
    for shape in record["shapes"].values():
        slots = record["sm_count"] * record["blocks_per_sm"]
        block_ms = shape["kernel_alone"]["median_ms"] / -(-shape["blocks"] // slots)
        measured_gap = scheduler.stream_gap_ms(TimelineData.from_dict(shape["modes"]["gated"][0]["timeline"]))
        latency = max(0.0, measured_gap)       # the model's input; the measured value is kept below
        for mode, rows in shape["modes"].items():
            hosts = [0.0 if mode == "gated" else r["host_ms_per_launch"] for r in rows]
            for row, host in zip(rows, hosts):
                row["predicted_ms"] = predict_sweep(
                    shape["blocks"], block_ms, record["blocks_per_sm"], record["sm_count"], host,
                    latency, [row["streams"]], record["max_connections"])[row["streams"]].makespan_ms
            one_measured, one_predicted = rows[0]["makespan_ms"]["median"], rows[0]["predicted_ms"]
            for row in rows:
                row["speedup"] = one_measured / row["makespan_ms"]["median"]
                row["predicted_speedup"] = one_predicted / row["predicted_ms"]
                row["model_error"] = abs(row["predicted_speedup"] - row["speedup"]) / row["speedup"]
            shape.setdefault("model", {})[mode] = {"block_ms": block_ms, "launch_latency_ms": latency,
                                                    "measured_stream_gap_ms": measured_gap,
                                                    "host_launch_ms": hosts}


def measure_default_stream(lab, iters: int, reps: int = REPS) -> dict:
    """The pitfall: a stream-less launch after each kernel, on blocking and non-blocking streams."""
    cuda = device.cuda()
    n = FEW_BLOCKS * lab.DEFAULT_BLOCK
    xs = [cuda.to_device(np.full(n, 2.0, dtype=np.float32)) for _ in range(KERNELS)]
    outs = [cuda.device_array(n, dtype=np.float32) for _ in range(KERNELS)]
    counter = cuda.to_device(np.zeros(1, dtype=np.int32))
    blocking = [cuda.stream() for _ in range(KERNELS)]
    nonblocking = [lab.nonblocking_stream() for _ in range(KERNELS)]
    cases = {"one_stream": lambda: lab.run_independent(xs, iters, blocking[:1], outs),
             "16_streams": lambda: lab.run_independent(xs, iters, blocking, outs),
             "16_streams_with_default_stream_launches":
                 lambda: lab.run_independent_with_bookkeeping(xs, iters, blocking, counter, outs),
             "16_nonblocking_streams_with_default_stream_launches":
                 lambda: lab.run_independent_with_bookkeeping(xs, iters, nonblocking, counter, outs)}
    rows = {}
    for name, run in cases.items():
        runs, middle = median_run(run, reps)
        rows[name] = {"makespan_ms": spread([t.data.makespan_ms for t in runs]), "timeline": middle.data.as_dict()}
    one = rows["one_stream"]["makespan_ms"]["median"]
    for row in rows.values():
        row["speedup"] = one / row["makespan_ms"]["median"]
    return {"provenance": reference.provenance(), "iters": iters, "cases": rows}


def measure_events_vs_barriers(lab, iters: int, reps: int = REPS) -> dict:
    """When D's result is ready, ordered by events or by barriers, alone or beside a long kernel."""
    cuda = device.cuda()
    n = FEW_BLOCKS * lab.DEFAULT_BLOCK
    x = cuda.to_device(np.full(n, 2.0, dtype=np.float32))
    out = cuda.device_array_like(x)
    background_in, background_out = cuda.device_array_like(x), cuda.device_array_like(x)
    s1, s2, s3 = cuda.stream(), cuda.stream(), cuda.stream()
    stage_iters, background_iters = max(1, iters // 4), 4 * iters    # stages ~0.4 ms, background ~6 ms
    rows = {}
    for name in ("diamond_events", "diamond_synchronized"):
        diamond = lab.VARIANTS[name][0]
        for background in (False, True):
            def run():
                if background:
                    lab.busy(background_in, background_iters, out=background_out, stream=s3)
                diamond(x, stage_iters, s1, s2, out=out)
            with cuda.defer_cleanup():            # no frees (which synchronize) inside the runs
                runs, middle = median_run(run, reps)
            ready = [max(s.end_ms for s in t.data.spans if s.label == "add_kernel") - t.data.start_ms
                     for t in runs]               # from the first span's start to the end of D
            rows[f"{name}{'_beside_background' if background else ''}"] = {
                "d_ready_ms": spread(ready), "timeline": middle.data.as_dict()}
    checks.assert_matches(out, lab.diamond_reference(np.full(n, 2.0), stage_iters), rtol=1e-5,
                          what="diamond")
    return {"provenance": reference.provenance(), "stage_iters": stage_iters,
            "background_iters": background_iters, "cases": rows}


# --- the pipeline ----------------------------------------------------------------------------------

SLOWDOWN_METHOD = ("inside the recorder and bare alike: between two events on the default stream around "
                   "the call, from the host's first submission to the last op's end; the median over the "
                   "reps of each rep's recorded / bare - 1, the two taken in turn (timeline.windows_in_turn)")
OVERLAP_METHOD = ("copies alone, kernels alone and the pipeline taken in turn within each rep "
                  "(timeline.windows_in_turn), each timed from the GPU's side by timeline.Makespan on its declared "
                  "streams (an event before the block's first op, which alone is watched, and one on each "
                  "stream at its end); each rep's hidden share from its own three makespans, the median "
                  "over the reps")
PIPELINE_REPS = 15


def recorder_of(memory: str, streams) -> Timeline:
    """The pipeline's recorder: from pinned memory one event after each op, its streams opened with an
    event each, so no start event is recorded while other streams copy (docs/measuring.md, Lab 07);
    from pageable memory, where each copy makes the host wait, two events per op."""
    return Timeline(infer_starts=True, streams=streams) if memory == "pinned" else Timeline()


def recorder_free_hidden(pipeline_ms: float, copies_ms: float, kernels_ms: float) -> float:
    """The time the pipeline saved over its copies and kernels one after the other / the smaller."""
    return (copies_ms + kernels_ms - pipeline_ms) / min(copies_ms, kernels_ms)


def saved_too_much(shares) -> list[str]:
    """A share below 0 is a slow pipeline (pageable copies); above 1 in some reps, the noise of three
    makespans; a problem only where even the reps' p10 is above 1."""
    low = float(np.percentile(shares, 10))
    return [f"without the recorder: hidden share above 1 in 9 of 10 reps (p10 {low:.3f})"] if low > 1.0 else []


def issued_pipeline(lab, order, host_x, iters, streams, chunks, host_out, device_buffers, kernels=True):
    """The lab's pipeline issued in `order` (PIPELINE_STEPS); without `kernels`, its copies alone."""
    d_in, d_out = device_buffers
    submits = [lambda lo, hi, stream: d_in[lo:hi].copy_to_device(host_x[lo:hi], stream=stream),
               lambda lo, hi, stream: lab.busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=stream),
               lambda lo, hi, stream: d_out[lo:hi].copy_to_host(host_out[lo:hi], stream=stream)]
    scheduler.issue_in_order(order, lab.chunk_bounds(host_x.size, chunks), streams,
                             *(submits if kernels else submits[::2]))
    for stream in streams:
        stream.synchronize()
    return host_out


def measure_pipeline(lab) -> dict:
    """Copy/compute overlap of the chunked pipeline, pinned and pageable: without the recorder (the
    makespans of the pipeline, its copies alone and its kernels alone) and by the recorder's own
    events; the recorder's cost per op and what it does to the pipeline's time; each tuning step a
    student could try."""
    cuda = device.cuda()
    rng = np.random.default_rng(7)
    pinned_x = cuda.pinned_array(PIPELINE_N, dtype=np.float32)
    pinned_x[:] = checks.nonzero(rng, PIPELINE_N)
    pinned_out = cuda.pinned_array_like(pinned_x)
    hosts = {"pinned": (pinned_x, pinned_out),
             "pageable": (np.array(pinned_x), np.empty(PIPELINE_N, dtype=np.float32))}
    buffers = tuple(cuda.device_array(PIPELINE_N, dtype=np.float32) for _ in range(2))   # (d_in, d_out)
    streams = [cuda.stream() for _ in range(PIPELINE_STREAMS)]

    def kernels_only(iters, chunks, used=streams):
        for c, (lo, hi) in enumerate(lab.chunk_bounds(PIPELINE_N, chunks)):
            lab.busy(buffers[0][lo:hi], iters, out=buffers[1][lo:hi], stream=used[c % len(used)])

    copies, probed = (timing.time_gpu(fn, warmup=2, reps=REPS, hide_host=False).median_ms for fn in (
        lambda: issued_pipeline(lab, "depth_first", pinned_x, None, streams, PIPELINE_CHUNKS, pinned_out, buffers,
                                kernels=False), lambda: kernels_only(1024, PIPELINE_CHUNKS)))
    iters = max(1, round(1024 * 0.5 * copies / probed))   # the kernels take about half the copies' time

    def without_recorder(host_x, host_out, chunks, used=streams, order="depth_first") -> dict:
        """The three ways with no recorder open, each in a Makespan, `chunks` on the streams `used`,
        issued in `order`: name -> (context, call)."""
        pipeline = lab.pipeline if order == "depth_first" else functools.partial(issued_pipeline, lab, order)
        timed = functools.partial(Makespan, streams=used)
        return {"copies": (timed, lambda: issued_pipeline(lab, order, host_x, None, used, chunks, host_out, buffers,
                                                          kernels=False)),
                "kernels": (timed, lambda: kernels_only(iters, chunks, used)),
                "pipeline": (timed, lambda: pipeline(host_x, iters, used, chunks, host_out, buffers))}

    def overlap_without_recorder(figures) -> dict:
        """Makespans and the hidden share (OVERLAP_METHOD): each rep's share from that rep's three
        makespans, the median over the reps."""
        parts = ("pipeline", "copies", "kernels")
        shares = [recorder_free_hidden(*rep) for rep in zip(*(figures[k]["makespan"] for k in parts))]
        return {**{f"{name}_ms": timing.Timing(tuple(figures[name]["makespan"])).as_dict() for name in parts},
                "hidden_fraction": float(np.median(shares)), "hidden_fractions": shares, "method": OVERLAP_METHOD}

    small, host = cuda.device_array(256, dtype=np.float32), cuda.pinned_array(256, dtype=np.float32)
    host[:] = 1.0
    recorder = recorder_cost({"launch": lambda: lab.busy(small, 1, out=small, stream=streams[0]),
                              "copy": lambda: small.copy_to_device(host, stream=streams[0])}, streams[0])
    reserve_events(3 * PIPELINE_CHUNKS)         # one run's: each timeline gives its events back
    cases = {}
    for memory, (host_x, host_out) in hosts.items():
        timelines: list[Timeline] = []

        def recording():
            timelines.append(recorder_of(memory, streams))
            return timelines[-1]
        run = functools.partial(lab.pipeline, host_x, iters, streams, PIPELINE_CHUNKS, host_out, buffers)
        ways = {**without_recorder(host_x, host_out, PIPELINE_CHUNKS),
                "bare": (contextlib.nullcontext, run), "recorded": (recording, run)}
        figures = windows_in_turn(ways, PIPELINE_REPS)
        windows = {name: figure["window"] for name, figure in figures.items()}
        checks.assert_matches(host_out, lab.busy_reference(host_x, iters), rtol=1e-5, what=f"{memory} pipeline")
        bare = overlap_without_recorder(figures)
        runs = timelines[-PIPELINE_REPS:]                   # the warm-ups' timelines dropped
        middle = sorted(zip(windows["recorded"], range(len(runs)), runs))[len(runs) // 2][2]
        slowdown = spread([a / b - 1 for a, b in zip(windows["recorded"], windows["bare"])])   # each pair one rep's
        cases[memory] = {"bare": bare, "pipeline_ms": spread(windows["recorded"]), "slowdown_method": SLOWDOWN_METHOD,
                         "bare_window_ms": spread(windows["bare"]), "recorder_slowdown": slowdown["median"],
                         "recorder_slowdowns": slowdown, "events": middle.events,
                         "problems": saved_too_much(bare["hidden_fractions"]), "timeline": middle.data.as_dict()}
    steps = {}
    for name, (chunks, used, order, why) in PIPELINE_STEPS.items():
        pinned_out[:] = np.nan                        # each step's own result is checked below
        ways = without_recorder(pinned_x, pinned_out, chunks, streams[:used], order)
        steps[name] = {"chunks": chunks, "streams": used, "issue": order, "why": why,
                       **overlap_without_recorder(windows_in_turn(ways, PIPELINE_REPS))}
        ways["pipeline"][1]()
        if not np.array_equal(pinned_out, hosts["pageable"][1]):   # checked above; the same arithmetic
            raise AssertionError(f"pipeline step {name}: its result differs from the checked pipeline's")
    return {"provenance": reference.provenance(), "n": PIPELINE_N, "chunks": PIPELINE_CHUNKS,
            "streams": PIPELINE_STREAMS, "iters": iters,
            "copy_engines": int(device.cuda().get_current_device().ASYNC_ENGINE_COUNT),
            "recorder": {"events": cases["pinned"]["events"], **recorder}, "cases": cases, "steps": steps}


def measure_in_process(lab, name: str, reps: int = REPS) -> dict:
    """Record `name`, measured in this process, whose hardware queues were set before CUDA started."""
    connections = CONNECTIONS_OF.get(name, MAIN_CONNECTIONS)
    if os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") != str(connections):
        raise RuntimeError(f"lab 07 {name} needs CUDA_DEVICE_MAX_CONNECTIONS={connections} set before "
                           f"CUDA starts: measure it through in_fresh_process")
    bps = busy_blocks_per_sm(lab)
    if name in CONCURRENCY_RECORD.values():
        return measure_concurrency(lab, bps, reps)
    iters = calibrate_iters(lab, FEW_BLOCKS, KERNEL_MS, device.cuda().stream())
    return {"default_stream": lambda: measure_default_stream(lab, iters, reps),
            "events_vs_barriers": lambda: measure_events_vs_barriers(lab, iters, reps),
            "pipeline": lambda: measure_pipeline(lab)}[name]()


def in_fresh_process(name: str):
    """A Measurement's measure(lab): record `name` measured in a fresh process with
    CUDA_DEVICE_MAX_CONNECTIONS set for it (the connection count is read when CUDA starts)."""
    def measure(lab) -> dict:
        connections = CONNECTIONS_OF.get(name, MAIN_CONNECTIONS)
        with tempfile.TemporaryDirectory(prefix="kernellab-lab07-") as tmp:
            path = Path(tmp) / f"{name}.json"
            env = {**os.environ, "CUDA_DEVICE_MAX_CONNECTIONS": str(connections),
                   "KERNELLAB_TARGET": course_target.current()}
            command = [sys.executable, "-m", "experiments.lab07_streams", name, str(REPS), str(path)]
            done = subprocess.run(command, env=env, cwd=course_target.ROOT)
            if done.returncode:
                raise RuntimeError(f"lab 07 {name} at {connections} connections: `{' '.join(command)}` "
                                   f"exited {done.returncode}")
            return json.loads(path.read_text())
    return measure


# --- what the concurrency records say: read by the targets, the key figure and the claims ---------

def speedups(concurrency: dict, shape: str = "few_sms", mode: str = "gated") -> dict[int, float]:
    """Speed-up over one stream by stream count, for one kernel shape and launch mode."""
    return {r["streams"]: r["speedup"] for r in concurrency["shapes"][shape]["modes"][mode]}


def model_errors(concurrency: dict) -> dict[str, float]:
    """The model's worst error at 2-16 streams per shape and launch mode of one connection count."""
    return {f"{shape}/{mode}": max(r["model_error"] for r in rows if r["streams"] > 1)
            for shape, data in concurrency["shapes"].items() for mode, rows in data["modes"].items()}
