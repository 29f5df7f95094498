"""Session 23: per op over bare, among all the ways, the pipeline's recorder against its floor (one
event after the call recorded from C + the compiled hook with halves doing nothing), and the judged
figure, per repeat of <call>/lab07.json.gz (argv[1], default callA)."""
import gzip
import json
import sys
from pathlib import Path

CALL = sys.argv[1] if len(sys.argv) > 1 else "callA"
d = json.loads(gzip.open(Path(__file__).parent / CALL / "lab07.json.gz").read())
print(f"Session 23 {CALL}: per op over bare, among all the ways (us): the pipeline's recorder against its floor")
print("(one event after the call recorded from C + the compiled hook with halves doing nothing), and the judged figure")
for i, r in enumerate(d["repeats"]):
    rec = r["pipeline"]["recorder"]
    parts = []
    for call in ("launch", "copy"):
        f = rec[call]
        floor = f["event_after_compiled_over_bare_us"] + f["hooks_only_compiled_over_bare_us"]
        parts.append(f"{call}: bare {f['bare_us']['median']:.1f}, recorder {f['inferred_starts_over_bare_us']:+.2f}, "
                     f"floor {floor:+.2f} (event {f['event_after_compiled_over_bare_us']:+.2f}, "
                     f"hook {f['hooks_only_compiled_over_bare_us']:+.2f})")
    t = r["targets"]["recorder_us_per_op"]
    print(f"repeat {i+1}: " + "; ".join(parts) + f"; judged {t['value']:+.2f} ({'met' if t['met'] else 'MISSED'})")
