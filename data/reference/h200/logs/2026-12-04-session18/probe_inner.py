"""Session 18, call F: does a way's cost per op depend on how many ops a sample holds? Bench 07's
recorder costs (experiments.lab07_measure.measure_recorder_cost) with 25, 100 and 400 calls per sample
(bench 07 takes 100), in one process, each in turn twice: a cost paid once per opened block (the
hooks installed, numba-cuda's class modified, the call site re-specialized) shrinks per op as the
sample grows, and one paid per op does not. Writes one JSON to argv[1]."""
import json
import sys

from experiments.lab07_measure import measure_recorder_cost
from kernellab.gpu import device
from solutions import lab07_streams as lab

WAYS = ("hooks_only_compiled", "event_after_compiled", "trace_only", "inferred_starts", "first_op_makespan")
cuda = device.cuda()
stream = cuda.stream()
found = []
for round_ in range(2):
    for inner in (25, 100, 400):
        taken = measure_recorder_cost(lab, stream, reps=30, inner=inner)
        row = {"round": round_, "inner": inner,
               **{call: {"bare_us": taken[call]["bare_us"]["median"], "recorded": taken[call]["us_per_op"],
                         **{way: taken[call][f"{way}_over_bare_us"] for way in WAYS}} for call in ("launch", "copy")}}
        found.append(row)
        print(json.dumps(row), flush=True)
json.dump(found, open(sys.argv[1], "w"), indent=1)
