"""Is it the event before each stream's FIRST op that slows Lab 07's pipeline? Session 8 (call C):
a timing event before each copy in cost +15.2% / +0.7% (two rounds), one after each copy out
+0.5-0.8%. On a stream those two sit at the same place, except before the stream's first op
(the first copy in): so the difference is the four events before the streams' first ops, which
`Timeline(infer_starts=True)` still records. The ways, each taken in turn with bare
(lab07_measure.alternating_windows), ROUNDS rounds per process (run it in several processes):
raw pooled events (cuEventRecord, no trace) after every op, with or without one before each
stream's first op (timed or not; at its place or all four up front; after an untimed event);
the two recorders; and bare / recorded on non-blocking streams (no implicit wait on the legacy
default stream, where the window's events are recorded). Prints each way's slowdown per round
(median, p10, p90) and the per-rep slowdowns of the first-op way."""
import contextlib
import ctypes
import os
import sys

import numpy as np

from kernellab.course import protocol, target
from kernellab.gpu import device, hooks
from kernellab.gpu.timeline import Timeline, _event_recorder, reserve_events
from experiments.lab07_measure import alternating_windows, paired_ratio

ROUNDS, REPS = int(os.environ.get("ROUNDS", 3)), int(os.environ.get("REPS", 20))
cuda = device.cuda()
lab, experiment = target.load("07"), protocol.experiment("07")
n, chunks, iters = experiment.PIPELINE_N, experiment.PIPELINE_CHUNKS, 168
host_x = cuda.pinned_array(n, dtype=np.float32)
host_x[:] = 1.5
host_out = cuda.pinned_array_like(host_x)
buffers = (cuda.device_array(n, dtype=np.float32), cuda.device_array(n, dtype=np.float32))
streams = [cuda.stream() for _ in range(4)]


def non_blocking_stream():
    handle = ctypes.c_void_p()
    libcuda = ctypes.CDLL("libcuda.so.1")
    if libcuda.cuStreamCreate(ctypes.byref(handle), 1):     # CU_STREAM_NON_BLOCKING
        raise RuntimeError("cuStreamCreate failed")
    return cuda.external_stream(handle.value)


streams_nb = [non_blocking_stream() for _ in range(4)]
record = _event_recorder()
pools = {timing: [cuda.event(timing=timing) for _ in range(8 * chunks)] for timing in (True, False)}
reserve_events(4 * chunks)


def run(on=streams):
    return lambda: lab.pipeline(host_x, iters, on, chunks, host_out, buffers)


def marks(first="none", timing_first=True, after_all=True):
    """Pooled events: after every op (after_all); before each stream's first op: first = "none",
    "at_place" (just before it), "up_front" (all four on entry), "after_untimed" (an untimed
    event, then the timed one, just before it)."""
    def opened(on=streams):
        used = iter(range(10 ** 9))
        seen = set()

        def mark(key, timing=True):
            pool = pools[timing]
            if record(int(pool[next(used) % len(pool)].handle), key):
                raise RuntimeError("cuEventRecord failed")

        def key_of(*args, **kwargs):
            stream = args[1] if len(args) > 1 and not kwargs else kwargs.get("stream", 0)
            key = Timeline._key(stream)
            if key not in seen:
                seen.add(key)
                if first == "at_place":
                    mark(key, timing_first)
                elif first == "after_untimed":
                    mark(key, False)
                    mark(key, timing_first)
            return key
        after = mark if after_all else None
        sub = hooks.subscribe(**{op: hooks.Bracket(key_of, after)
                                 for op in (hooks.LAUNCH, "copy_to_device", "copy_to_host")})
        if first == "up_front":
            for s in on:
                key = Timeline._key(s)
                seen.add(key)
                mark(key, timing_first)
        return sub
    return opened


ways = {"bare": (contextlib.nullcontext, run()),
        "after every op": (marks(), run()),
        "after every op + before first, at its place": (marks("at_place"), run()),
        "after every op + before first, untimed": (marks("at_place", timing_first=False), run()),
        "after every op + before first, all up front": (marks("up_front"), run()),
        "after every op + before first, after an untimed": (marks("after_untimed"), run()),
        "before first only": (marks("at_place", after_all=False), run()),
        "Timeline(infer_starts=True)": (lambda: Timeline(infer_starts=True), run()),
        "Timeline()": (Timeline, run()),
        "bare, non-blocking streams": (contextlib.nullcontext, run(streams_nb)),
        "Timeline(infer_starts=True), non-blocking": (lambda: Timeline(infer_starts=True), run(streams_nb)),
        "after every op + before first, non-blocking": (lambda: marks("at_place")(streams_nb), run(streams_nb))}
FOCUS = "after every op + before first, at its place"
print(f"pid {os.getpid()}: {ROUNDS} rounds x {REPS} reps, ways in turn; slowdown against bare "
      f"(the non-blocking ways against bare, non-blocking streams)", flush=True)
for round_ in range(ROUNDS):
    figures = alternating_windows(ways, REPS)
    bare, bare_nb = figures["bare"]["window"], figures["bare, non-blocking streams"]["window"]
    print(f"round {round_ + 1}: bare {np.median(bare):.3f} ms, non-blocking bare {np.median(bare_nb):.3f} ms")
    for name, figure in figures.items():
        if name.startswith("bare"):
            continue
        r = paired_ratio(figure["window"], bare_nb if "non-blocking" in name else bare)
        print(f"  {name:50s} {np.median(figure['window']):7.3f} ms {100 * r['median']:+6.1f}% "
              f"(p10 {100 * r['p10']:+5.1f}, p90 {100 * r['p90']:+5.1f})")
    per_rep = [100 * (a / b - 1) for a, b in zip(figures[FOCUS]["window"], bare)]
    print(f"  per rep, {FOCUS}: " + " ".join(f"{v:+.0f}" for v in per_rep), flush=True)
sys.stdout.flush()
