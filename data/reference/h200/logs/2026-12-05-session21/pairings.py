"""Session 21, call A: why do bench 07's two pairings of the recorder's cost disagree (session 20,
call C: +4.15 against +6.61 us per copy in one repeat)? In one process, for each call (copy, launch),
rounds of the two pairings exactly as bench 07 takes them (experiments.lab07_measure.recorder_ways,
timing.time_host_in_turn): all the ways (150 reps), then the bare call and TARGET_WAYS alone (300).
If the pairings measure different things, each keeps its own level round after round; if the gap is
noise, they swap places and the rounds' scatter matches it. Every window is logged in the order it
ran, with its enter time and the garbage collections inside it (gc.callbacks), so the predecessor
of each sample and the host's drift can be read afterwards. The last rounds take the copy with the
garbage collector off inside the windows (it collects between them, outside the clocks): if
collections another way left cause the gap, it closes there. Writes one JSON to argv[1]."""
import contextlib
import gc
import json
import sys
import time

from experiments.lab07_measure import TARGET_WAYS, recorder_ways
from kernellab.gpu import device, timing
from kernellab.gpu.timeline import reserve_events
from solutions import lab07_streams as lab

ROUNDS, GC_OFF_ROUNDS, INNER = 3, 2, 100
cuda = device.cuda()
stream = cuda.stream()
reserve_events(150 * INNER + INNER)
calls, ways = recorder_ways(lab, stream)
collections = []          # (perf_counter at start, seconds, generation)
started = {}


def on_gc(phase, info):
    if phase == "start":
        started["t"] = time.perf_counter()
    else:
        collections.append((started["t"], time.perf_counter() - started["t"], info["generation"]))


gc.callbacks.append(on_gc)
windows = []              # per window: pairing, round, call, way, enter, leave, gc count and seconds inside


def logged(tag: dict, way: str, opened, gc_off: bool):
    @contextlib.contextmanager
    def window():
        if gc_off:
            gc.disable()
        with opened() as it:
            enter = time.perf_counter()
            seen = len(collections)
            yield it
            leave = time.perf_counter()
            inside = [c for c in collections[seen:] if enter <= c[0] <= leave]
            windows.append({**tag, "way": way, "enter": enter, "leave": leave, "gc": len(inside),
                            "gc_s": sum(c[1] for c in inside), "gc_gen": max((c[2] for c in inside), default=-1)})
        if gc_off:
            gc.enable()
    return window


def pairing(name: str, round_: int, call: str, names, reps: int, gc_off: bool = False) -> dict:
    tag = {"pairing": name, "round": round_, "call": call, "gc_off": gc_off}
    made = {way: ways[way](calls[call]) for way in names}
    taken = timing.time_host_in_turn({way: (logged(tag, way, opened, gc_off), fn) for way, (opened, fn) in made.items()},
                                     inner=INNER, reps=reps)
    samples = {way: [1e3 * t for t in taken[way].samples_ms] for way in names}
    over = {way: sorted(a - b for a, b in zip(samples[way], samples["bare"])) for way in TARGET_WAYS}
    row = {**tag, "samples_us": samples,
           "over_bare_us": {way: over[way][len(over[way]) // 2] for way in TARGET_WAYS}}
    print(json.dumps({k: v for k, v in row.items() if k != "samples_us"}), flush=True)
    return row


rows = []
t0 = time.time()
for call in ("copy", "launch"):
    for round_ in range(ROUNDS):
        rows.append(pairing("among_all", round_, call, list(ways), 150))
        rows.append(pairing("beside_bare", round_, call, ["bare", *TARGET_WAYS], 300))
for round_ in range(GC_OFF_ROUNDS):
    rows.append(pairing("among_all", round_, "copy", list(ways), 150, gc_off=True))
    rows.append(pairing("beside_bare", round_, "copy", ["bare", *TARGET_WAYS], 300, gc_off=True))
print(f"{time.time() - t0:.0f} s; {len(collections)} collections", flush=True)
json.dump({"rows": rows, "windows": windows, "collections": collections}, open(sys.argv[1], "w"))
