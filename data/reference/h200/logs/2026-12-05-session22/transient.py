"""Session 22, call C: does opening an instrument (or closing the one before) leave a transient on
the code it hooks? Call B found bench 07's recorder reading ~1 us per op higher when its samples were
spaced among bare calls (fillers) than when taken beside bare alone, while the fillers' own A/A read
~0. On this project's 2-core machine, in the simulator, the first copy after a Timeline opened and
closed took +5-17 us, and re-setting the copy method on its class alone (which invalidates the
interpreter's specializations on that type) added ~6 us over the next 100 calls. Here, on a GPU, in
one process, for the copy and the launch: the bare call, `inferred_starts` and `recorded` taken in
turn (timing.in_turn, as bench 07), each sample CALLS calls inside its context, each call timed on
its own. Per way and predecessor (the way of the sample before), the median over samples of the mean
per-call time in buckets of call index; and per rep, each recorder's mean over calls SETTLE.. minus
the bare call's (the steady per-op cost) and the excess of its first SETTLE calls. Writes argv[1]."""
import json
import sys
import time

import numpy as np

from experiments.lab07_measure import TARGET_WAYS, recorder_ways
from kernellab.gpu import device, timing
from kernellab.gpu.timeline import reserve_events
from solutions import lab07_streams as lab

REPS, CALLS, SETTLE = 200, 120, 20
BUCKETS = ((0, 1), (1, 5), (5, 20), (20, 40), (40, 60), (60, CALLS))
cuda = device.cuda()
stream = cuda.stream()
reserve_events(REPS * CALLS + CALLS)
calls, ways = recorder_ways(lab, stream)
names = ["bare", *TARGET_WAYS]
out = {"buckets": BUCKETS, "settle": SETTLE, "calls": CALLS, "samples": []}
for call in ("copy", "launch"):
    made = {way: ways[way](calls[call]) for way in names}
    previous = None
    clock = time.perf_counter
    for rep, name in timing.in_turn(names, REPS + 1):
        opened, fn = made[name]
        times = []
        with opened():
            cuda.synchronize()
            for _ in range(CALLS):
                started = clock()
                fn()
                times.append(clock() - started)
        if rep > 0:   # the first rep warms every way up
            out["samples"].append({"call": call, "rep": rep, "way": name, "after": previous,
                                   "us": [round(1e6 * t, 3) for t in times]})
        previous = name
cuda.synchronize()

rows = out["samples"]
for call in ("copy", "launch"):
    print(f"== {call}: median over samples of the mean us per call, by call index")
    for way in names:
        for after in ("bare", *TARGET_WAYS):
            got = [np.array(s["us"]) for s in rows if s["call"] == call and s["way"] == way and s["after"] == after]
            cells = " ".join(f"[{a}:{b}] {np.median([g[a:b].mean() for g in got]):7.2f}" for a, b in BUCKETS)
            print(f"  {way:<16} after {after:<16} n {len(got):3d}: {cells}")
    by_rep = {}
    for s in rows:
        if s["call"] == call:
            by_rep.setdefault(s["rep"], {})[s["way"]] = np.array(s["us"])
    for way in TARGET_WAYS:
        steady = [r[way][SETTLE:].mean() - r["bare"][SETTLE:].mean() for r in by_rep.values()]
        whole = [r[way][:100].mean() - r["bare"][:100].mean() for r in by_rep.values()]
        first = [(r[way][:SETTLE] - r[way][SETTLE:].mean()).sum() - (r["bare"][:SETTLE] - r["bare"][SETTLE:].mean()).sum()
                 for r in by_rep.values()]
        print(f"  {way} over bare: calls {SETTLE}-{CALLS} {np.median(steady):+.2f} us per op; first 100 calls "
              f"(as the bench) {np.median(whole):+.2f}; excess of the first {SETTLE} calls {np.median(first):+.1f} us per sample")
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
