"""Session 22: how well a pairing pairs. From session 21's call A windows (every sample in the order
it ran), per pairing and round: the spread (IQR / 1.349) of the recorder's sample minus the bare
call's `lag` reps later (lag 0: the same rep, as the bench pairs them), and the bootstrap standard
error of the median paired difference. A spread that grows with the lag is a host whose speed drifts
between samples: the farther apart two paired samples lie, the less the pairing cancels."""
import gzip
import json
from pathlib import Path

import numpy as np

source = Path(__file__).parent.parent / "2026-12-05-session21" / "callA" / "pairings.json.gz"
rng = np.random.default_rng(0)


def sd(values):
    q1, q3 = np.percentile(values, [25, 75])
    return (q3 - q1) / 1.349


for row in json.loads(gzip.open(source).read())["rows"]:
    bare, recorded = (np.array(row["samples_us"][w]) for w in ("bare", "inferred_starts"))
    n = len(bare)
    paired = recorded - bare
    se = np.std([np.median(rng.choice(paired, n)) for _ in range(500)])
    lags = " ".join(f"lag {k}: {sd(recorded[k:] - bare[:n - k]):.1f}" for k in (0, 1, 3, 10, 30))
    print(f"{row['pairing']:<11} {row['call']:<6} round {row['round']}{' gc off' if row['gc_off'] else ''}: "
          f"n {n}, median {np.median(paired):.2f} +- {se:.2f} us; spread by lag {lags}")
