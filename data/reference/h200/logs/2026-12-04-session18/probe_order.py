"""Session 18's second probe: does a way's place in time_host_in_turn's order move its figure?

Call A's probe found bare_nogc (a bare call inside a context that turns the collector off, which
made no pass) +0.8-1.6 us per op over bare. In time_host_in_turn's rotation every way always
follows the same way, and bare_nogc followed the pipeline's recorder. Here bare calls follow each
of the recorder's ways: in the fixed rotation, "bare_after_X" always comes right after X; then the
same ways shuffled each rep (a seeded permutation). Per op over the first bare, median of paired
differences, for a one-block launch and a 1 KiB pinned copy. Writes one JSON to argv[1]."""
import contextlib, json, random, sys, time

import numpy as np

from kernellab.gpu import device, timing
from kernellab.gpu.timeline import Timeline, events_around, reserve_events
from solutions import lab07_streams as lab

REPS, INNER = 60, 100
cuda = device.cuda()
stream = cuda.stream()
small = cuda.device_array(256, dtype=np.float32)
host = cuda.pinned_array(256, dtype=np.float32)
host[:] = 1.0
calls = {"launch": lambda: lab.busy(small, 1, out=small, stream=stream),
         "copy": lambda: small.copy_to_device(host, stream=stream)}
reserve_events(REPS * INNER + INNER)
null = contextlib.nullcontext
ways = {"bare": null,
        "pipeline": lambda: Timeline(infer_starts=True, streams=(stream,)), "bare_after_pipeline": null,
        "trace_only": lambda: Timeline(timed=()), "bare_after_trace_only": null,
        "event_after": null, "bare_after_event_after": null,
        "recorded": Timeline, "bare_after_recorded": null}
wrap = {"event_after": lambda call: events_around(call, stream, before=False)}


def per_call(opened, call):
    with opened():
        cuda.synchronize()
        started = time.perf_counter()
        for _ in range(INNER):
            call()
        elapsed = time.perf_counter() - started
    return elapsed * 1e6 / INNER


def measure(order_of_rep, settle):
    out = {}
    for name, call in calls.items():
        bound = {w: (o, wrap.get(w, lambda c: c)(call)) for w, o in ways.items()}
        for w, (o, c) in bound.items():
            per_call(o, c)
        samples = {w: [] for w in ways}
        for rep in range(REPS):
            for w in order_of_rep(rep):
                if settle:
                    per_call(null, call)
                samples[w].append(per_call(*bound[w]))
        cuda.synchronize()
        out[name] = {"bare_us": float(np.median(samples["bare"]))}
        for w in ways:
            if w != "bare":
                d = [a - b for a, b in zip(samples[w], samples["bare"])]
                out[name][w] = float(np.median(d))
        print(name, {k: round(v, 2) for k, v in out[name].items()}, flush=True)
    return out


names = list(ways)
rng = random.Random(18)
result = {"fixed_rotation": measure(lambda rep: names[rep % len(names):] + names[:rep % len(names)], False),
          "shuffled": measure(lambda rep: rng.sample(names, len(names)), False),
          "shuffled_settled": measure(lambda rep: rng.sample(names, len(names)), True)}
json.dump(result, open(sys.argv[1], "w"), indent=1)
