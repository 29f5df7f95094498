"""Session 18's third probe: what a closed Timeline leaves the sample after it (call B: a bare call
taken right after one read +0.4-2.7 us per call over the bare one before). Each rep: a bare sample,
a sample inside a Timeline (the pipeline's recorder), and a bare sample right after it, 100 calls
each, a one-block launch and a 1 KiB pinned copy. Per sample: us per call, the process's minor page
faults (getrusage) while it ran, and the Timeline's close in ms. Run plainly and with glibc told
never to give memory back (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_): if the carry-over is
pages given back at the close and faulted in again after it, it goes. Writes a JSON to argv[1]."""
import json, os, resource, sys, time

import numpy as np

from kernellab.gpu import device
from kernellab.gpu.timeline import Timeline, reserve_events
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


def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def sample(call, timeline=None):
    cuda.synchronize()
    f0 = faults()
    t0 = time.perf_counter()
    for _ in range(INNER):
        call()
    us = (time.perf_counter() - t0) * 1e6 / INNER
    f1 = faults()
    close_ms = None
    if timeline is not None:
        c0 = time.perf_counter()
        timeline.__exit__(None, None, None)
        close_ms = (time.perf_counter() - c0) * 1e3
    return us, f1 - f0, close_ms


out = {"env": {k: os.environ.get(k) for k in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_")}}
for name, call in calls.items():
    rows = {"bare_first": [], "inside": [], "bare_after": []}
    closes, close_faults = [], []
    for rep in range(REPS + 2):
        first = sample(call)
        t = Timeline(infer_starts=True, streams=(stream,))
        t.__enter__()
        inside = sample(call, t)
        after_close = faults()
        after = sample(call)
        if rep >= 2:
            rows["bare_first"].append(first)
            rows["inside"].append(inside)
            rows["bare_after"].append(after)
            closes.append(inside[2])
    med = lambda xs: float(np.median(xs))
    out[name] = {
        "bare_first_us": med([r[0] for r in rows["bare_first"]]),
        "inside_over_first_us": med([b[0] - a[0] for a, b in zip(rows["bare_first"], rows["inside"])]),
        "after_over_first_us": med([b[0] - a[0] for a, b in zip(rows["bare_first"], rows["bare_after"])]),
        "faults_per_sample": {k: med([r[1] for r in v]) for k, v in rows.items()},
        "close_ms": med(closes)}
    print(name, json.dumps(out[name]), flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
