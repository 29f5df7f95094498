"""Re-derive a bench file's rates offline from its stored repeats (nothing re-timed): every timed
row rated again against its own repeat's ceilings (`bench.rate_against_ceilings`: the ceiling
never below a measured mix with more writes, and a row above it within the two timings'
resolution at the ceiling), the lab's targets recomputed from the re-rated records, then the
repeats combined as `kernellab bench --repeat` combines them.

    python rederive_rates.py LAB BENCH_OUT_REFERENCE_DIR DESTINATION_DIR
"""
import json
import sys
from pathlib import Path

import kernellab  # noqa: F401
from kernellab.course import bench, claims, protocol, target

lab, source, destination = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
name = f"lab{target.lab_number(lab)}.json"
experiment = protocol.experiment(lab)
solution = claims.course_solution(lab)
work = destination / "rederived"
for r in range(1, 4):
    stored = json.loads((source / f"repeat-{r}" / name).read_text())
    records = stored["records"]
    for record in records.values():
        if bench.is_result(record):
            for row in record["rows"]:
                if "gbps" in row:
                    bench.rate_against_ceilings(row, record["ceilings"])
            record["instrument_errors"] = bench.instrument_errors(record)
    if getattr(experiment, "targets", None):
        records["targets"] = experiment.targets(solution, records)
    (work / f"repeat-{r}").mkdir(parents=True, exist_ok=True)
    (work / f"repeat-{r}" / name).write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
previous = json.loads((source / name).read_text())
combined = bench.combine_repeats([json.loads((work / f"repeat-{r}" / name).read_text()) for r in range(1, 4)])
if "profile" in previous:
    combined["profile"] = previous["profile"]
combined["records_note"] += ("; on 2026-12-02 the rates were re-derived offline from the stored repeats "
                             "(nothing re-timed): the ceiling of a mix is never below a measured mix with "
                             "more writes, and a row above its ceiling by less than the two timings' "
                             "resolution is at the ceiling, not an instrument error")
(destination / name).write_text(json.dumps(combined, indent=1, sort_keys=True) + "\n")
print(f"{name}: targets missed in some repeat: "
      f"{[p for p, t in combined['targets_over_repeats']['targets'].items() if not t['met']] or 'none'}")
