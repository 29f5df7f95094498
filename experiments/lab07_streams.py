"""Lab 07 experiments: stream concurrency measured on a GPU, predicted by the block-scheduler model.

`LAB` below declares the measurements; `kernellab bench 07` (GPU) runs each in its own fresh
process, with CUDA_DEVICE_MAX_CONNECTIONS set by the experiment before CUDA starts and recorded
in the provenance (8 is the driver's default, 32 its maximum), so the tour, a notebook and bench
measure the same configuration whatever the caller's environment says:
- concurrency (at 32 connections) and concurrency_8_connections: 16 independent busy kernels on
  1, 2, 4, 8 and 16 streams, each kernel 8 blocks of 256 threads (a few SMs) or enough blocks to
  fill every SM; launched plainly from Python, and pre-enqueued behind a gate (`lab.hold`) so the
  host's launch cost drops out. Each makespan is the median of REPS timelines (events around every
  launch: `kernellab.gpu.timeline`); speed-up = makespan on 1 stream / on S streams.
  With each: the model's prediction of every configuration (`kernellab.scheduler`), from figures
  of the same run: one kernel's time alone (time_gpu), blocks per SM (the occupancy of
  busy_kernel), the host's time between launch submissions, the GPU's gap between kernels of one
  stream (both read from the timelines) and the number of hardware queues. Error =
  |predicted - measured| / measured speed-up.
- default_stream: the 16 kernels on 16 streams with a stream-less launch after each, on blocking
  and on non-blocking streams.
- events_vs_barriers: the diamond ordered by events and by cuda.synchronize, alone and beside an
  unrelated long kernel on a third stream; the figure is when D's result is ready.
- pipeline: the chunked copy/compute pipeline on pinned and on pageable host memory; hidden share
  of the smaller of copies and kernels, measured two ways in the same process: without the
  recorder, (copies alone + kernels alone - pipeline) / the smaller, each makespan from the GPU's
  side (`timeline.Makespan`: an event before the block's first op and one on each stream after its
  last, none per op), the share the host's windows give beside it; and from the pipeline's own events (one
  timeline per run: time both in flight / the smaller one's total); all taken in turn within each
  of PIPELINE_REPS reps (`alternating_windows`), each share the median over the reps. A share
  outside [0, 1] is reported as a measurement problem, never clamped. Beside it: what the
  recorder costs (host time per recorded launch and copy over the bare call, in the default
  Timeline and in the pipeline's, `infer_starts=True` with its streams opened, whose events `recorder.events` and each
  case's `events` say; the pipeline's window inside it, inside each of its parts and inside the
  Makespan against bare), and each
  tuning step a student could try (PIPELINE_STEPS: chunk counts, one stream, breadth-first issue,
  every copy on one stream),
  without the recorder.
The targets are judged on this run (`kernellab bench --repeat 3`: on the worst repeat); the
claims read the same records.

This module is the declaration, with the benchmarks, the validation, the targets and the key
figure; the measurements and the model they are compared with live in lab07_measure, the figures
in lab07_figures, the claims in lab07_claims, and the constants all of them share in
lab07_constants (re-exported here, with what tests and notebook 07 read on the experiment).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from kernellab.course import protocol
from kernellab.course import target as course_target
from kernellab.course import bench as harness
from kernellab.gpu import checks, device
from kernellab.gpu.traffic import Ledger

from experiments.lab07_claims import CLAIMS
from experiments.lab07_constants import (
    CONCURRENCY_RECORD, CONNECTIONS, CONNECTIONS_OF, FEW_BLOCKS, KERNEL_MS, KERNELS, MAIN_CONNECTIONS, NOMINAL,
    NUMBER, PIPELINE_CHUNKS, PIPELINE_N, PIPELINE_STEPS, PIPELINE_STEPS_MAIN, PIPELINE_STREAMS, REPS, SIGNATURE,
    SIM_ITERS, STREAM_COUNTS, TARGETS)
from experiments.lab07_figures import (
    draw_model_overlap, draw_model_timelines, draw_overlap, draw_pipeline_steps, draw_speedups, draw_timelines)
from experiments.lab07_measure import (
    OVERLAP_METHOD, SLOWDOWN_METHOD, in_fresh_process, measure_in_process, model_errors, recorders_judged,
    speedup_at_16)

# Read on the experiment (`protocol.experiment("07")`) by tests/instruments and notebook 07.
from experiments.lab07_claims import _sweep
from experiments.lab07_figures import predicted_pipeline
from experiments.lab07_measure import busy_blocks_per_sm, calibrate_iters, fraction_problems, predict_sweep


# --- the kernels as benchmarks: what `kernellab profile 07` measures -----------------------------

BENCH_ITERS = 64     # dependent FMAs per element in the busy benchmark


def kernel_benchmarks(lab) -> list[harness.Benchmark]:
    """busy_kernel and add_kernel alone, over one pipeline chunk and the whole pipeline buffer
    (256 MiB each way, 8x the L2: DRAM bytes are DRAM bytes): the bytes and time of the kernels
    that the stream experiments overlap, and the DRAM bytes Nsight Compute counts for them."""
    def busy_ledger(n):
        return Ledger("busy").add("busy", "x", reads=n).add("busy", "out", writes=n)

    def add_ledger(n):
        return Ledger("add").add("add", "p", reads=n).add("add", "q", reads=n).add("add", "out", writes=n)

    sizes = [PIPELINE_N // PIPELINE_CHUNKS, PIPELINE_N]
    return [
        harness.Benchmark(
            name="busy", axis="n", sizes=sizes, sim_sizes=[301], profile_size=PIPELINE_N,
            make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
            reference=lambda inputs: lab.busy_reference(inputs["x"], BENCH_ITERS),
            variants=[harness.Variant(
                "busy", lambda inputs, out: lab.busy(inputs["x"], BENCH_ITERS, out=out),
                f"one read and one write per element, {BENCH_ITERS} dependent FMAs between",
                ledger=busy_ledger)]),
        harness.Benchmark(
            name="add", axis="n", sizes=sizes, sim_sizes=[301], profile_size=PIPELINE_N,
            make_inputs=lambda rng, n: {"p": checks.nonzero(rng, n), "q": checks.nonzero(rng, n)},
            reference=lambda inputs: inputs["p"].astype(np.float64) + inputs["q"],
            variants=[harness.Variant("add", lambda inputs, out: lab.add(inputs["p"], inputs["q"], out=out),
                                      "two reads and one write per element", ledger=add_ledger)]),
    ]


# --- validation (both modes) -----------------------------------------------------------------------

def validate(lab, seed: int = 0) -> list[str]:
    """Run the lab's stream functions on awkward sizes and check them against NumPy."""
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    streams = [cuda.stream() for _ in range(3)]
    hosts = [checks.nonzero(rng, n) for n in (37, 300, 85)]
    outs = lab.run_independent([cuda.to_device(h) for h in hosts], SIM_ITERS, streams[:2])
    cuda.synchronize()
    for k, (out, host) in enumerate(zip(outs, hosts)):
        checks.assert_matches(out, lab.busy_reference(host, SIM_ITERS), rtol=1e-5, what=f"kernel {k}")
    for name in ("diamond_events", "diamond_synchronized"):
        diamond = lab.VARIANTS[name][0]
        out = diamond(cuda.to_device(hosts[2]), SIM_ITERS, streams[0], streams[1])
        cuda.synchronize()
        checks.assert_matches(out, lab.diamond_reference(hosts[2], SIM_ITERS), rtol=1e-5, what=name)
    host_x = cuda.pinned_array(301, dtype=np.float32)
    host_x[:] = checks.nonzero(rng, 301)
    result = lab.pipeline(host_x, SIM_ITERS, streams, 4)
    checks.assert_matches(result, lab.busy_reference(host_x, SIM_ITERS), rtol=1e-5, what="pipeline")
    return ["run_independent", "diamond_events", "diamond_synchronized", "pipeline"]


def targets(lab, records: dict) -> dict:
    """Each target of the lab against this run's measurement, with how it was measured."""
    main, default = records["concurrency"], records[CONCURRENCY_RECORD[8]]
    errors = {f"{connections}/{key}": error for connections in CONNECTIONS
              for key, error in model_errors(records[CONCURRENCY_RECORD[connections]]).items()}
    pipeline = records["pipeline"]
    pinned = pipeline["cases"]["pinned"]
    by_events, bare = pinned["hidden_fraction"], pinned["bare"]["hidden_fraction"]
    judged = recorders_judged(pipeline["recorder"])
    recorder_us = max(judged[call]["inferred_starts"] for call in ("launch", "copy"))
    two_events_us = max(judged[call]["recorded"] for call in ("launch", "copy"))
    lighter_us = {way: max(pipeline["recorder"][call][f"{way}_over_bare_us"] for call in ("launch", "copy"))
                  for way in ("trace_only", "first_op_makespan")
                  if f"{way}_over_bare_us" in pipeline["recorder"]["launch"]}
    hot_path = pipeline["recorder"]["launch"].get("hot_path", "hot path in Python (a record from before it was compiled)")
    return {
        "speedup_16_streams": {
            "value": speedup_at_16(main), "target": TARGETS["speedup_16_streams"],
            "met": speedup_at_16(main) >= TARGETS["speedup_16_streams"],
            "at_8_connections": speedup_at_16(default),
            "method": f"16 busy kernels x 8 blocks x 256 threads, pre-enqueued behind a gate event; "
                      f"median makespan of timelines (CUDA events around each launch) on 1 stream / on "
                      f"16 streams, CUDA_DEVICE_MAX_CONNECTIONS={MAIN_CONNECTIONS} (at the driver's "
                      f"default of 8: {speedup_at_16(default):.2f}x)"},
        "model_error": {
            "value": max(errors.values()), "per_configuration": errors, "target": TARGETS["model_error"],
            "met": max(errors.values()) <= TARGETS["model_error"],
            "method": "|predicted - measured| / measured speed-up over 1 stream, worst over 2, 4, 8, 16 "
                      "streams, both shapes, both launch modes, 8 and 32 connections; model calibrated on "
                      "one kernel alone, the 1-stream gaps, the host time between launches measured in "
                      "each configuration, and the connection count as its hardware queues"},
        "hidden_fraction": {
            "value": min(by_events, bare), "by_events": by_events, "without_recorder": bare,
            "target": TARGETS["hidden_fraction"],
            "met": min(by_events, bare) >= TARGETS["hidden_fraction"] and not pinned["problems"],
            "problems": pinned["problems"],
            "method": f"the smaller of two measures of the share of the smaller of copies and kernels "
                      f"hidden: without the recorder, (copies alone + kernels alone - pipeline) / the "
                      f"smaller ({OVERLAP_METHOD}); and from the pipeline's own events (a timeline per run: "
                      f"time both in flight / the smaller one's total, less the copy-out engine's wait for "
                      f"the first kernel that the makespan pays: hidden_by_events), median of "
                      f"{len(pinned['hidden_fractions'])} runs; 2^26 float32 from pinned memory in "
                      f"{PIPELINE_CHUNKS} chunks over {PIPELINE_STREAMS} streams; a share outside [0, 1] "
                      f"is a measurement problem"},
        "overlap_methods_agree": {
            "value": 100 * abs(by_events - bare), "target": TARGETS["methods_agree_points"],
            "met": 100 * abs(by_events - bare) <= TARGETS["methods_agree_points"],
            "method": "|hidden share from the recorder's events - hidden share without the recorder|, "
                      "in percentage points, pinned pipeline"},
        "recorder_us_per_op": {
            "value": recorder_us, "target": TARGETS["recorder_us_per_op"],
            "met": recorder_us <= TARGETS["recorder_us_per_op"],
            "two_events_per_op_us": two_events_us,
            "pairings_us": {f"{call}_{pairing}": figure for call in ("launch", "copy")
                            for pairing, figure in judged[call].items() if pairing.startswith("inferred_starts_")},
            "method": f"host time per call inside the pipeline's recorder, Timeline(infer_starts=True) with its "
                      f"stream opened (one CUDA event per op: the fewer events Lab 07 records; the default "
                      f"Timeline, a pair per op, beside it as two_events_per_op_us) over the same call bare, the "
                      f"worse of a one-block launch and a 1 KiB pinned copy on a stream, each {judged['launch']['method']} "
                      f"(pairings_us: each pairing's figure); events reserved before; {hot_path}"},
        **{f"{way}_us_per_op": {
            "value": us, "target": TARGETS["recorder_us_per_op"], "met": us <= TARGETS["recorder_us_per_op"],
            "method": f"as recorder_us_per_op, inside {what}"}
           for way, us in lighter_us.items()
           for what in [{"trace_only": "Timeline(timed=()) (no event on the hot path: the trace alone)",
                         "first_op_makespan": "the overlap's Makespan (its stream declared: only the block's "
                                              "first op watched, an event before it and one per stream at "
                                              "the end)"}[way]]},
        "recorder_slowdown": {
            "value": pinned["recorder_slowdown"], "target": TARGETS["recorder_slowdown"],
            "met": pinned["recorder_slowdown"] <= TARGETS["recorder_slowdown"],
            "method": f"the pinned pipeline inside its recorder (Timeline(infer_starts=True)) against "
                      f"bare: {SLOWDOWN_METHOD}"},
    }


def key_figure(lab, records: dict) -> str:
    """16 streams over 1 at each connection count, the model's worst error, the overlap."""
    conc = records["concurrency"]
    default = records.get(CONCURRENCY_RECORD[8])
    at_8 = f"{speedup_at_16(default):.1f}x at the default 8" if default else "not measured at 8 yet"
    pinned = records.get("pipeline", {}).get("cases", {}).get("pinned", {})
    overlap = (f"copy/compute overlap hides {pinned['bare']['hidden_fraction']:.0%} without the recorder, "
               f"{pinned['hidden_fraction']:.0%} by its events" if "bare" in pinned
               else "overlap measured without the recorder not recorded yet")
    return (f"16 x 8-block kernels: 16 streams {speedup_at_16(conc):.1f}x over 1 (pre-enqueued, "
            f"{conc['max_connections']} connections; {at_8}); model error <= "
            f"{max(model_errors(conc).values()):.0%} at {conc['max_connections']}; {overlap}")


LAB = protocol.Lab(
    number=NUMBER, title="streams and events",
    kernels=(protocol.Kernel("busy_kernel", "1-D: 256 threads, one element each, `iters` dependent FMAs",
                             block_size=256),
             protocol.Kernel("add_kernel", "1-D: 256 threads, one element each", block_size=256),
             protocol.Kernel("count_kernel", "1 block of 32 threads; thread 0 counts", block_size=32)),
    references=("busy_reference", "diamond_reference"),
    validate=validate,
    benchmarks=lambda lab, torch: kernel_benchmarks(lab),
    measurements=tuple(protocol.Measurement(name, in_fresh_process(name), why) for name, why in (
        ("concurrency", "16 kernels on 1-16 streams at 32 hardware queues, against the model"),
        ("concurrency_8_connections", "the same at the driver's default of 8 hardware queues"),
        ("default_stream", "the pitfall: a stream-less launch after each kernel"),
        ("events_vs_barriers", "the diamond ordered by events and by device-wide barriers"),
        ("pipeline", "copy/compute overlap, pinned and pageable, with and without the recorder, and its cost"))),
    figures=(protocol.Figure("lab07_timelines", draw_timelines, needs=("concurrency",)),
             protocol.Figure("lab07_speedup", draw_speedups, needs=("concurrency",)),
             protocol.Figure("lab07_overlap", draw_overlap, needs=("pipeline",)),
             protocol.Figure("lab07_pipeline_steps", draw_pipeline_steps, needs=("pipeline",)),
             protocol.Figure("lab07_timelines_model", draw_model_timelines),
             protocol.Figure("lab07_overlap_model", draw_model_overlap)),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)


if __name__ == "__main__":          # one record in this fresh process: NAME REPS OUT.json
    name, reps, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    out.write_text(json.dumps(measure_in_process(course_target.load(NUMBER), name, reps)))
