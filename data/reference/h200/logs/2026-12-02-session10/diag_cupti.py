"""Can CUPTI's activity trace time Lab 07's ops with no event on their streams, and what does it
cost? Session 9 left the recorder's ≤ 5 us per op MISSED: two cuEventRecords and the hook already
cost more on the lent H200's host. CUPTI (cupti-python 13.0.1, libcupti 13.0.85, matching the
driver's CUDA 13.0) timestamps each kernel and copy on the GPU side. Taken in turn, as the lab
takes its ways (timing.time_host_in_turn, lab07_measure.alternating_windows):
  1. host us per op (a one-block launch, a 1 KiB pinned copy): bare before CUPTI was ever
     enabled; then bare / CUPTI activities on / the trace-only Timeline / both;
  2. the pinned pipeline's window: bare / CUPTI on / the pipeline's recorder / Makespan, ROUNDS
     rounds of REPS reps;
  3. the overlap seen in CUPTI's records of one pipeline run: the share of the kernels' union
     that a copy covers, and the copies' union against copies alone."""
import contextlib
import os
import sys
import time

import numpy as np

from kernellab.course import protocol, target
from kernellab.gpu import device, timing
from kernellab.gpu.timeline import Makespan, Timeline, reserve_events
from experiments.lab07_measure import alternating_windows, paired_ratio

ROUNDS, REPS = int(os.environ.get("ROUNDS", 2)), int(os.environ.get("REPS", 20))
cuda = device.cuda()
lab, experiment = target.load("07"), protocol.experiment("07")
stream = cuda.stream()
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
for call in calls.values():
    call()
cuda.synchronize()
before = timing.time_host_in_turn({"bare": (contextlib.nullcontext, c) for c in [calls["launch"]]},
                                  inner=100, reps=30)
before_copy = timing.time_host_in_turn({"bare": (contextlib.nullcontext, calls["copy"])}, inner=100, reps=30)
print(f"before CUPTI: launch {1e3 * np.median(before['bare'].samples_ms):.1f} us, "
      f"copy {1e3 * np.median(before_copy['bare'].samples_ms):.1f} us", flush=True)

import ctypes  # noqa: E402
import glob  # noqa: E402
for library in glob.glob(os.path.join(os.environ.get("CUPTI_SITE", "/tmp/site"), "nvidia/cu13/lib/libcupti.so*")):
    ctypes.CDLL(library, mode=ctypes.RTLD_GLOBAL)   # the wheel's libcupti, where the module can find it
from cupti import cupti  # noqa: E402  (after the bare figures: loading CUPTI may change the driver's paths)

print("cupti imported from", cupti.__file__, flush=True)
records = []
KINDS = (cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY)


def requested():
    return 8 * 1024 * 1024, 0


def completed(activities):
    for a in activities:
        if a.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
            records.append(("kernel", a.start, a.end, a.stream_id, a.correlation_id, 0))
        elif a.kind == cupti.ActivityKind.MEMCPY:
            records.append(({1: "h2d", 2: "d2h"}.get(a.copy_kind, str(a.copy_kind)), a.start, a.end,
                            a.stream_id, a.correlation_id, a.bytes))


cupti.activity_register_callbacks(requested, completed)


@contextlib.contextmanager
def traced():
    for kind in KINDS:
        cupti.activity_enable(kind)
    try:
        yield
    finally:
        for kind in KINDS:
            cupti.activity_disable(kind)
        cupti.activity_flush_all(1)


# 1. per op
reserve_events(60 * 100 + 100)
ways = {"bare": contextlib.nullcontext, "cupti": traced, "trace_only": lambda: Timeline(timed=()),
        "cupti+trace_only": lambda: contextlib.ExitStack()}


def both():
    stack = contextlib.ExitStack()
    stack.enter_context(traced())
    stack.enter_context(Timeline(timed=()))
    return stack


ways["cupti+trace_only"] = both
for name, call in calls.items():
    records.clear()
    taken = timing.time_host_in_turn({w: (o, call) for w, o in ways.items()}, inner=100, reps=60)
    line = [f"{name}: bare {1e3 * np.median(taken['bare'].samples_ms):.1f} us"]
    for w in ways:
        if w != "bare":
            over = [1e3 * d for d in timing.paired(taken[w], taken["bare"])]
            line.append(f"{w} +{np.median(over):.1f} (p10 {np.percentile(over, 10):+.1f}, p90 {np.percentile(over, 90):+.1f})")
    print("; ".join(line), f"[{len(records)} CUPTI records]", flush=True)

# 2. the pipeline's window
n, chunks, iters = experiment.PIPELINE_N, experiment.PIPELINE_CHUNKS, 168
host_x = cuda.pinned_array(n, dtype=np.float32)
host_x[:] = 1.5
host_out = cuda.pinned_array_like(host_x)
buffers = (cuda.device_array(n, dtype=np.float32), cuda.device_array(n, dtype=np.float32))
streams = [cuda.stream() for _ in range(4)]
reserve_events(8 * chunks)


def run():
    lab.pipeline(host_x, iters, streams, chunks, host_out, buffers)


ways = {"bare": (contextlib.nullcontext, run), "cupti": (traced, run),
        "recorder": (lambda: Timeline(infer_starts=True, streams=streams), run),
        "makespan": (Makespan, run)}
print(f"pipeline: {n} float32, {chunks} chunks, 4 streams; {ROUNDS} rounds x {REPS} reps in turn", flush=True)
for round_ in range(ROUNDS):
    records.clear()
    figures = alternating_windows(ways, REPS)
    bare = figures["bare"]["window"]
    print(f"round {round_ + 1}: bare {np.median(bare):.3f} ms", flush=True)
    for name, figure in figures.items():
        if name != "bare":
            r = paired_ratio(figure["window"], bare)
            print(f"  {name:10s} {np.median(figure['window']):7.3f} ms {100 * r['median']:+6.1f}% "
                  f"(p10 {100 * r['p10']:+5.1f}, p90 {100 * r['p90']:+5.1f})", flush=True)
    print("  per rep, cupti: " + " ".join(f"{100 * (a / b - 1):+.0f}" for a, b in zip(figures["cupti"]["window"], bare)))


# 3. one pipeline run's CUPTI records; copies alone and kernels alone, traced the same way
def union(intervals):
    merged = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def length(xs):
    return sum(e - s for s, e in xs)


def intersection(xs, ys):
    total, j = 0, 0
    for s, e in xs:
        for s2, e2 in ys:
            total += max(0, min(e, e2) - max(s, s2))
    return total


def traced_once(fn):
    records.clear()
    cuda.synchronize()
    with traced():
        t = time.perf_counter()
        fn()
        cuda.synchronize()
        wall = 1e3 * (time.perf_counter() - t)
    return list(records), wall


for rep in range(3):
    got, wall = traced_once(run)
    kernels = union([(r[1], r[2]) for r in got if r[0] == "kernel"])
    copies = union([(r[1], r[2]) for r in got if r[0] in ("h2d", "d2h")])
    span = (max(r[2] for r in got) - min(r[1] for r in got)) / 1e6
    print(f"pipeline run {rep + 1}: {len(got)} records ({sum(r[0] == 'kernel' for r in got)} kernels, "
          f"{sum(r[0] == 'h2d' for r in got)} h2d, {sum(r[0] == 'd2h' for r in got)} d2h) on streams "
          f"{sorted({r[3] for r in got})}; span {span:.3f} ms (host wall {wall:.3f}); kernels' union "
          f"{length(kernels) / 1e6:.3f} ms, copies' union {length(copies) / 1e6:.3f} ms; a copy covers "
          f"{100 * intersection(kernels, copies) / length(kernels):.1f}% of the kernels' time; "
          f"(copies + kernels - span) / kernels {100 * (length(copies) + length(kernels) - span * 1e6) / length(kernels):.1f}%",
          flush=True)
try:
    context = int(cuda.current_context().handle.value)
    print("CUPTI stream id of the lab's streams:",
          [cupti.get_stream_id_ex(context, int(s.handle.value), 0) for s in streams], flush=True)
except Exception as e:      # a probe: print what failed and go on
    print("stream ids: failed:", type(e).__name__, e, flush=True)
sys.stdout.flush()
