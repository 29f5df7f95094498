"""Reads call A's pairings.json(.gz) (pairings.py): per call and round, each pairing's median per-op cost
over bare for the judged ways, with a bootstrap standard error that assumes independent reps and one
by blocks of 10 reps (host drift makes neighbouring reps alike); the lag-1 autocorrelation of the
paired differences; collections inside windows by way; and the cost by the way taken just before."""
import gzip
import json
import sys
from collections import defaultdict

import numpy as np

path = sys.argv[1]
data = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
rng = np.random.default_rng(0)
WAYS = ("inferred_starts", "recorded")


def boot_se(diffs, block=1, n=2000):
    diffs = np.asarray(diffs)
    blocks = [diffs[i:i + block] for i in range(0, len(diffs), block)]
    meds = []
    for _ in range(n):
        pick = rng.integers(0, len(blocks), len(blocks))
        meds.append(np.median(np.concatenate([blocks[i] for i in pick])))
    return float(np.std(meds))


print("call   round gc_off pairing      way              median  se(iid) se(blocks10) lag1  bare_med")
for row in data["rows"]:
    s = row["samples_us"]
    for way in WAYS:
        d = np.subtract(s[way], s["bare"])
        lag1 = float(np.corrcoef(d[:-1], d[1:])[0, 1])
        print(f"{row['call']:6} {row['round']:5} {str(row['gc_off']):6} {row['pairing']:12} {way:16} {np.median(d):7.2f} "
              f"{boot_se(d):7.2f} {boot_se(d, 10):11.2f} {lag1:5.2f} {np.median(s['bare']):8.1f}")

windows = data["windows"]
print("\ncollections inside windows, by way (gc on): count, total ms, windows")
per = defaultdict(lambda: [0, 0.0, 0])
for w in windows:
    if not w["gc_off"]:
        key = (w["call"], w["pairing"], w["way"])
        per[key][0] += w["gc"]
        per[key][1] += 1e3 * w["gc_s"]
        per[key][2] += 1
for key, (count, ms, n) in sorted(per.items()):
    if count:
        print(" ", key, count, f"{ms:.2f} ms", n)

print("\nthe recorder's cost by the way just before it (among all, gc on): the sample's paired difference")
for call in ("copy", "launch"):
    before = defaultdict(list)
    for row in data["rows"]:
        if row["call"] != call or row["pairing"] != "among_all" or row["gc_off"]:
            continue
        order = [w for w in windows if w["call"] == call and w["pairing"] == "among_all"
                 and w["round"] == row["round"] and not w["gc_off"]]
        names = list(row["samples_us"])
        warm = len(names)            # time_host_in_turn's warm-up: each way once, first
        seen = defaultdict(int)
        prev_of = defaultdict(dict)  # way -> rep -> predecessor
        for i, w in enumerate(order[warm:], start=warm):
            rep = seen[w["way"]]
            prev_of[w["way"]][rep] = order[i - 1]["way"]
            seen[w["way"]] += 1
        s = row["samples_us"]
        for rep, (a, b) in enumerate(zip(s["inferred_starts"], s["bare"])):
            # the pair's difference, keyed by what came before each of its two samples
            before[("is after", prev_of["inferred_starts"][rep])].append(a - b)
            before[("bare after", prev_of["bare"][rep])].append(a - b)
    for key, values in sorted(before.items()):
        print(f"  {call} {key[0]:10} {key[1]:24} n={len(values):3} median {np.median(values):6.2f}")
