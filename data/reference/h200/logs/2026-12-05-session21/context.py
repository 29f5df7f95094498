"""Session 21, call B: which of bench 07's other ways raise the recorder's cost when taken among them?
Call A found the pairing among all the ways read the pipeline's recorder 0.6-1.5 us per copy over the
pairing beside the bare call alone, in 5 of 5 rounds, with the garbage collector on or off. Here the
copy is taken (experiments.lab07_measure.recorder_ways, timing.time_host_in_turn, 150 reps of 100)
with the bare call and the two recorders alone, then with one group of the other ways added each
time, then among all, in two rounds with the groups in a different order: the group whose company
raises the recorders' figures is what the all-ways pairing charges them for. Writes one JSON to argv[1]."""
import json
import random
import sys

from experiments.lab07_measure import TARGET_WAYS, recorder_ways
from kernellab.gpu import device, timing
from kernellab.gpu.timeline import reserve_events
from solutions import lab07_streams as lab

INNER, REPS = 100, 150
GROUPS = {"alone": (),
          "python_hot_path": ("recorded_python", "trace_only_python", "inferred_starts_python"),
          "raw_events": ("events_only", "event_after_only", "event_after_compiled"),
          "hooks_no_events": ("hooks_only", "hooks_only_compiled", "trace_only"),
          "makespan": ("first_op_makespan",)}
cuda = device.cuda()
stream = cuda.stream()
reserve_events(REPS * INNER + INNER)
calls, ways = recorder_ways(lab, stream)
GROUPS["all"] = tuple(w for w in ways if w not in ("bare", *TARGET_WAYS))
rows = []
order = random.Random(21)
for round_ in range(2):
    for group in order.sample(list(GROUPS), len(GROUPS)):
        names = ["bare", *TARGET_WAYS, *GROUPS[group]]
        taken = timing.time_host_in_turn({way: ways[way](calls["copy"]) for way in names}, inner=INNER, reps=REPS)
        samples = {way: [1e3 * t for t in taken[way].samples_ms] for way in names}
        over = {way: sorted(a - b for a, b in zip(samples[way], samples["bare"])) for way in names if way != "bare"}
        row = {"round": round_, "group": group, "over_bare_us": {way: d[len(d) // 2] for way, d in over.items()},
               "bare_us": sorted(samples["bare"])[REPS // 2]}
        print(json.dumps(row), flush=True)
        rows.append({**row, "samples_us": samples})
json.dump(rows, open(sys.argv[1], "w"))
