"""Session 22, calls A and C (argv[1]: the call's folder, default callA): bench 07's two pairings of the recorder's cost per op over bare, with the
beside-bare pairing's two halves (taken before and after the pairing among all the ways), per repeat
and call, from <call>/lab07.json.gz; and the other per-op ways among all, for the breakdown."""
import gzip
import json
import sys
from pathlib import Path

here = Path(__file__).parent
CALL = sys.argv[1] if len(sys.argv) > 1 else "callA"
record = json.loads(gzip.open(here / CALL / "lab07.json.gz").read())
for i, repeat in enumerate(record["repeats"]):
    target = repeat["targets"]["recorder_us_per_op"]
    print(f"repeat {i + 1}: value {target['value']:.2f} us per op, {'met' if target['met'] else 'MISSED'}")
    for call, figures in repeat["pipeline"]["recorder"].items():
        if call not in ("copy", "launch"):
            continue
        close = figures["targeted"]
        halves = close["inferred_starts_over_bare_halves_us"]
        among = figures["inferred_starts_over_bare_us"]
        where = "above both" if among > max(halves) else "below both" if among < min(halves) else "between"
        spread = figures["inferred_starts_over_bare_spread_us"]
        print(f"  {call}: bare {figures['bare_us']['median']:.1f} us; inferred_starts among all {among:.2f} "
              f"(p10 {spread['p10']:.1f}, p90 {spread['p90']:.1f}), beside bare {close['inferred_starts_over_bare_us']:.2f}, "
              f"halves {halves[0]:.2f} / {halves[1]:.2f}: among all {where}")
        parts = {k[:-len("_over_bare_us")]: v for k, v in figures.items() if k.endswith("_over_bare_us")}
        print("    among all: " + ", ".join(f"{k} {v:+.2f}" for k, v in sorted(parts.items())))
