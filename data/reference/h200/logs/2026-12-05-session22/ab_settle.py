"""Session 22, call D: bench 07's recorder cost with and without the settling calls, on one machine
in one process: experiments.lab07_measure.measure_recorder_cost exactly as bench 07 runs it, with
SETTLE_CALLS 0 (the code before b992b3c) and 20, in the order 0, 20, 20, 0. Per run and call, what the
target judges (recorders_judged: the pipeline's recorder, the worse of the two pairings) and each
pairing's figure, the halves, and the opening's cost where it settled. Prints one JSON line per run."""
import json
import os
import sys
import time

from experiments import lab07_measure as m
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", str(m.MAIN_CONNECTIONS))   # as bench 07's pipeline
from kernellab.gpu import device
from solutions import lab07_streams as lab

stream = device.cuda().stream()
rows = []
for order, settle in enumerate(map(int, (sys.argv[2] if len(sys.argv) > 2 else "0,20,20,0").split(","))):
    m.SETTLE_CALLS = settle
    started = time.perf_counter()
    cost = m.measure_recorder_cost(lab, stream)
    judged = m.recorders_judged(cost)
    row = {"order": order, "settle": settle, "seconds": round(time.perf_counter() - started, 1)}
    for call in ("copy", "launch"):
        close = cost[call]["targeted"]
        row[call] = {"judged": judged[call]["inferred_starts"],
                     "among_all": judged[call]["inferred_starts_among_all"],
                     "beside_bare": judged[call]["inferred_starts_beside_bare"],
                     "halves": close["inferred_starts_over_bare_halves_us"],
                     "opening_us": close.get("inferred_starts_settle_over_bare_us"),
                     "bare_us": cost[call]["bare_us"]["median"]}
    print(json.dumps(row), flush=True)
    rows.append(row)
with open(sys.argv[1], "w") as f:
    json.dump(rows, f)
