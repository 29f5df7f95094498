"""Session 22, call B: company.py's pairings side by side, per call and round: the pipeline's recorder
(inferred_starts) and the default one (recorded) over bare, +- bootstrap standard errors, in each
pairing, and the spaced pairing's A/A (a filler, the bare call again, over bare)."""
import gzip
import json
from pathlib import Path

rows = json.loads(gzip.open(Path(__file__).parent / "callB" / "company.json.gz").read())["rows"]
for call in ("copy", "launch"):
    print(f"== {call}: us per call over bare (+- standard error); bare call's median us")
    for round_ in range(3):
        cells = []
        for name in ("beside_bare", "spaced", "among_all"):
            row = next(r for r in rows if r["call"] == call and r["round"] == round_ and r["pairing"] == name)
            over, se = row["over_bare_us"], row["se_us"]
            cell = (f"{name} inferred_starts {over['inferred_starts']:+.2f}+-{se['inferred_starts']:.2f} "
                    f"recorded {over['recorded']:+.2f}+-{se['recorded']:.2f} (bare {row['bare_us']:.0f})")
            if "filler_0" in over:
                cell += f" A/A {over['filler_0']:+.2f}+-{se['filler_0']:.2f}"
            cells.append(cell)
        print(f"  round {round_}: " + " | ".join(cells))
