"""Re-derive Lab 07's pipeline problems and targets offline from a stored reference file (nothing
re-timed): a recorder-free share above 1 is a problem only when the reps' p10 is above 1
(`lab07_measure.saved_too_much`; call B's repeat 2 read a median of 1.009 with the kernels fully
hidden), then each repeat's targets recomputed and judged over the repeats as `kernellab bench
--repeat` judges them.

    python rederive_problems.py SOURCE_LAB07_JSON DESTINATION_LAB07_JSON
"""
import json
import sys
from pathlib import Path

import kernellab  # noqa: F401
from kernellab.course import bench, claims, protocol
from experiments.lab07_measure import fraction_problems, saved_too_much

source, destination = Path(sys.argv[1]), Path(sys.argv[2])
stored = json.loads(source.read_text())
experiment, solution = protocol.experiment("07"), claims.course_solution("07")
for records in stored["repeats"]:
    for case in records["pipeline"]["cases"].values():
        case["problems"] = fraction_problems(case["hidden_fractions"]) + saved_too_much(case["bare"]["hidden_fractions"])
    records["targets"] = experiment.targets(solution, records)
stored["records"]["pipeline"], stored["records"]["targets"] = stored["repeats"][0]["pipeline"], stored["repeats"][0]["targets"]
stored["targets_over_repeats"] = bench.targets_over_repeats(stored["repeats"])
stored["records_note"] += ("; on 2026-12-02 (session 7) the pipeline's problems and the targets were re-derived "
                           "offline (nothing re-timed): a recorder-free share above 1 is a problem only when the "
                           "reps' p10 is above 1")
destination.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
print({path: t["met"] for path, t in stored["targets_over_repeats"]["targets"].items()})
