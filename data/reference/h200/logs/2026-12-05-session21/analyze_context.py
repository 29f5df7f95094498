"""Reads call B's context.json(.gz) (context.py): per round and group, the median per-copy cost over
bare of the two recorders, each with a bootstrap standard error (reps taken as independent), and the
bare call's median."""
import gzip
import json
import sys

import numpy as np

path = sys.argv[1]
rows = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
rng = np.random.default_rng(0)


def se(d, n=2000):
    d = np.asarray(d)
    return float(np.std([np.median(d[rng.integers(0, len(d), len(d))]) for _ in range(n)]))


print("round group            bare_us  inferred_starts      recorded")
for row in rows:
    s = row["samples_us"]
    cells = []
    for way in ("inferred_starts", "recorded"):
        d = np.subtract(s[way], s["bare"])
        cells.append(f"{np.median(d):6.2f} +- {se(d):4.2f}")
    print(f"{row['round']:5} {row['group']:16} {np.median(s['bare']):7.1f}  {cells[0]}  {cells[1]}")
