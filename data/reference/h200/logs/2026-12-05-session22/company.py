"""Session 22, call B: is the gap between bench 07's two pairings of the recorder's cost the time
between paired samples, or the company of the other instruments? In one process, for the copy and the
launch, rounds of three pairings in a shuffled order, each as bench 07 takes its ways
(experiments.lab07_measure.recorder_ways, timing.time_host_in_turn, 100 calls a sample):
  beside_bare  the bare call, `recorded` and `inferred_starts` alone (300 reps), as the bench's target pairing;
  spaced       the same three and 11 fillers, each the bare call again (150 reps): a rep as long as one
               among all the ways, so paired samples lie as far apart, with no other instrument's code;
  among_all    all the ways (150 reps), as the bench's other pairing.
If spaced reads like among_all, the spacing makes the gap; if it reads like beside_bare, the other
instruments do. The fillers' own figure over bare is each pairing's A/A check (it should read ~0).
Writes one JSON to argv[1]: per pairing, round and call, every way's samples and the medians."""
import contextlib
import json
import random
import sys
import time

import numpy as np

from experiments.lab07_measure import TARGET_WAYS, recorder_ways
from kernellab.gpu import device, timing
from kernellab.gpu.timeline import reserve_events
from solutions import lab07_streams as lab

ROUNDS, INNER, FILLERS = 3, 100, 11
cuda = device.cuda()
stream = cuda.stream()
reserve_events(300 * INNER + INNER)
calls, ways = recorder_ways(lab, stream)
rng = np.random.default_rng(0)


def pairing(name: str, round_: int, call: str, reps: int) -> dict:
    made = {way: ways[way](calls[call]) for way in ways}
    if name == "beside_bare":
        taken_ways = {w: made[w] for w in ("bare", *TARGET_WAYS)}
    elif name == "spaced":
        taken_ways = {**{w: made[w] for w in ("bare", *TARGET_WAYS)},
                      **{f"filler_{i}": (contextlib.nullcontext, calls[call]) for i in range(FILLERS)}}
    else:
        taken_ways = made
    started = time.perf_counter()
    taken = timing.time_host_in_turn(taken_ways, inner=INNER, reps=reps)
    samples = {way: [1e3 * t for t in taken[way].samples_ms] for way in taken_ways}
    judged = [*TARGET_WAYS, *(["filler_0"] if name == "spaced" else [])]
    over, se = {}, {}
    for way in judged:
        paired = np.array(samples[way]) - np.array(samples["bare"])
        over[way] = float(np.median(paired))
        se[way] = float(np.std([np.median(rng.choice(paired, len(paired))) for _ in range(500)]))
    row = {"pairing": name, "round": round_, "call": call, "reps": reps, "seconds": time.perf_counter() - started,
           "bare_us": float(np.median(samples["bare"])), "over_bare_us": over, "se_us": se}
    print(json.dumps(row), flush=True)
    return {**row, "samples_us": samples}


rows = []
order = random.Random(22)
for call in ("copy", "launch"):
    for round_ in range(ROUNDS):
        for name in order.sample(["beside_bare", "spaced", "among_all"], 3):
            rows.append(pairing(name, round_, call, 300 if name == "beside_bare" else 150))
with open(sys.argv[1], "w") as f:
    json.dump({"rows": rows}, f)
