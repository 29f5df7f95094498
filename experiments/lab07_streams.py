"""Lab 07 experiments: stream concurrency measured on a GPU, predicted by the block-scheduler model.

`LAB` declares the measurements; `kernellab bench 07` (GPU) runs each in its own fresh process with
CUDA_DEVICE_MAX_CONNECTIONS set before CUDA starts (8, the driver's default, or 32, its maximum):
concurrency and concurrency_8_connections (16 busy kernels on 1-16 streams, small or GPU-filling,
launched plainly or pre-enqueued, against the model), default_stream (a stream-less launch after each
kernel), events_vs_barriers (the diamond ordered both ways) and pipeline (the chunked copy/compute
pipeline from pinned and pageable memory, each tuning step, and the recorder's cost). The targets are
judged on the worst repeat (`kernellab bench --repeat 3`). Measurements: lab07_measure; figures:
lab07_figures; claims: lab07_claims; shared constants: lab07_constants.
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
from kernellab.gpu.timeline import COST_METHOD
from kernellab.gpu.traffic import Ledger

from experiments.lab07_claims import CLAIMS, recorder_over_bare_us
from experiments.lab07_constants import (
    CONCURRENCY_RECORD, CONNECTIONS, MAIN_CONNECTIONS, NUMBER, PIPELINE_CHUNKS, PIPELINE_N, PIPELINE_STREAMS,
    SIM_ITERS, TARGETS)
from experiments.lab07_figures import draw_overlap, draw_pipeline_steps, draw_speedups, draw_timelines
from experiments.lab07_measure import (
    OVERLAP_METHOD, SLOWDOWN_METHOD, in_fresh_process, measure_in_process, model_errors, speedups)

# Read on the experiment (`protocol.experiment("07")`) by tests/instruments and notebook 07.
from experiments.lab07_constants import KERNEL_MS, STREAM_COUNTS  # noqa: F401
from experiments.lab07_figures import predicted_pipeline  # noqa: F401
from experiments.lab07_measure import busy_blocks_per_sm, calibrate_iters, predict_sweep  # noqa: F401


# --- the kernels as benchmarks: what `kernellab profile 07` measures -----------------------------

BENCH_ITERS = 64     # dependent FMAs per element in the busy benchmark


def kernel_benchmarks(lab) -> list[harness.Benchmark]:
    """busy_kernel and add_kernel alone, over one pipeline chunk and the whole buffer (8x the L2)."""
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
                ledger=lambda n: Ledger("busy").add("busy", "x", reads=n).add("busy", "out", writes=n))]),
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


def recorder_figures(pipeline: dict) -> dict:
    """The pipeline's recorder per op over its floor (one event after the call) and over the bare call,
    the worse of a launch and a copy; the pinned pipeline's slowdown."""
    costs, pinned = pipeline["recorder"], pipeline["cases"]["pinned"]

    def worst(way):
        return max(way(costs[c]) for c in ("launch", "copy"))
    return {"over_floor_us": worst(lambda c: recorder_over_bare_us(c) - c["event_after_only_over_bare_us"]),
            "recorder_us_per_op": worst(recorder_over_bare_us),
            "floor_us_per_op": worst(lambda c: c["event_after_only_over_bare_us"]),
            "pipeline_slowdown": pinned["recorder_slowdown"]}


def targets(lab, records: dict) -> dict:
    """Each target of the lab against this run's measurement, with how it was measured."""
    main, default = records["concurrency"], records[CONCURRENCY_RECORD[8]]
    errors = {f"{connections}/{key}": error for connections in CONNECTIONS
              for key, error in model_errors(records[CONCURRENCY_RECORD[connections]]).items()}
    pinned, recorder = records["pipeline"]["cases"]["pinned"], recorder_figures(records["pipeline"])
    bare = pinned["bare"]["hidden_fraction"]
    return {
        "speedup_16_streams": {
            "value": speedups(main)[16], "target": TARGETS["speedup_16_streams"],
            "met": speedups(main)[16] >= TARGETS["speedup_16_streams"], "at_8_connections": speedups(default)[16],
            "method": f"16 busy kernels x 8 blocks x 256 threads, pre-enqueued behind a gate event; median "
                      f"makespan of timelines on 1 stream / on 16 streams, CUDA_DEVICE_MAX_CONNECTIONS={MAIN_CONNECTIONS}"},
        "model_error": {
            "value": max(errors.values()), "per_configuration": errors, "target": TARGETS["model_error"],
            "met": max(errors.values()) <= TARGETS["model_error"],
            "method": "|predicted - measured| / measured speed-up over 1 stream, worst over 2-16 streams, both "
                      "shapes, both launch modes, 8 and 32 connections; the model calibrated on one kernel alone, "
                      "the 1-stream gaps, the host's time between launches and the connection count"},
        "hidden_fraction": {
            "value": bare, "target": TARGETS["hidden_fraction"],
            "met": bare >= TARGETS["hidden_fraction"] and not pinned["problems"], "problems": pinned["problems"],
            "method": f"share of the smaller of copies and kernels hidden, without the recorder ({OVERLAP_METHOD}); "
                      f"2^26 float32 from pinned memory in {PIPELINE_CHUNKS} chunks over {PIPELINE_STREAMS} streams"},
        "recorder_over_floor": {
            "value": recorder["over_floor_us"], "target": TARGETS["recorder_over_floor_us"],
            "met": recorder["over_floor_us"] <= TARGETS["recorder_over_floor_us"], **recorder,
            "method": f"host time per op inside the pipeline's recorder (Timeline(infer_starts=True), its stream "
                      f"opened) minus the same call with one event recorded after it, each over the bare call, the "
                      f"worse of a one-block launch and a 1 KiB pinned copy ({COST_METHOD}); beside it, "
                      f"reported: the recorder's cost per op and the pinned pipeline's slowdown inside it "
                      f"({SLOWDOWN_METHOD})"},
    }


def key_figure(lab, records: dict) -> str:
    """16 streams over 1 and the model's worst error."""
    conc, default = records["concurrency"], records.get(CONCURRENCY_RECORD[8])
    at_8 = f"{speedups(default)[16]:.1f}x at the default 8" if default else "not measured at 8 yet"
    return (f"16 x 8-block kernels: 16 streams {speedups(conc)[16]:.1f}x over 1 (pre-enqueued, "
            f"{conc['max_connections']} hardware queues; {at_8}); model error <= "
            f"{max(model_errors(conc).values()):.0%} at {conc['max_connections']}")


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
             protocol.Figure("lab07_speedup", draw_speedups, needs=tuple(CONCURRENCY_RECORD.values())),
             protocol.Figure("lab07_overlap", draw_overlap, needs=("pipeline",)),
             protocol.Figure("lab07_pipeline_steps", draw_pipeline_steps, needs=("pipeline",))),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)


if __name__ == "__main__":          # one record in this fresh process: NAME REPS OUT.json
    name, reps, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    out.write_text(json.dumps(measure_in_process(course_target.load(NUMBER), name, reps)))
