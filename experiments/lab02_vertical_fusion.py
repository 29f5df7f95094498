"""Lab 02's experiments: the fused chain against the unfused one, the copy ceiling and torch.

Declared once, in `LAB` at the end (kernellab.course.protocol): `kernellab bench 02` (on a GPU)
validates every version, then times them over n = 4K .. 64M float32 elements, with torch eager
and torch.compile where torch is importable, and checks the lab's targets at n = 2^26 within the
same run:
- the fused chain reaches >= 90% of the bandwidth ceiling of its own read:write mix (about 4:1:
  x, w, b, r and the mask read, out written), measured in the same run (`timing.ceiling_for_mix`);
  a 4:1 stream outruns a 1:1 copy on HBM, so the copy is not this kernel's ceiling;
- unfused time / fused time >= the ledgers' byte ratio (the predicted speed-up);
- a fused Numba version that reads what torch.compile reads (the mask too) is at least as fast
  as torch.compile: the same bytes, so the comparison is of how fast each moves them.
Each fused version is reported; the first target counts the best of them, the last the best of
those that read the mask (`fused_generator` draws it in the kernel and reads a byte less).
`kernellab tour 02` validates the versions on this device and draws the figures.
"""

from __future__ import annotations

import statistics
from pathlib import Path


from experiments import lab00_indexing
from kernellab.course import bench as harness
from kernellab.course import protocol
from kernellab.course.claims import (Claim, Missing, need, profile_rows_beside, repeats_of, repeats_ms, row, says, target,
                                     typical_ms)
from kernellab.gpu import checks, device
from kernellab.gpu.traffic import Ledger
from kernellab.show import plots

NUMBER = "02"
P = 0.1                                  # dropout probability in every measurement
HEADLINE_N = 2**26                       # the size the targets are stated at
SIZES = [2**k for k in range(12, 27, 2)]  # 4K .. 64M elements: launch-bound to bandwidth-bound
TOUR_SIZES = [2**14, 2**20, 2**26]       # a quick live sweep for the tour on a GPU
SIM_SIZES = [517]                        # awkward and tiny: the simulator runs each thread in Python
SIM_GRID_STRIDE_BLOCKS = 2               # the default 4 blocks per SM is far too many to simulate
INPUTS = ("x", "w", "b", "r")
TARGET_PCT_OF_CEILING = 90.0
BLOCK = 256                              # every launcher's default block (the lab's DEFAULT_BLOCK)


def chain_inputs(lab, rng, n: int) -> dict:
    """Host inputs of the chain: x, w, b, r (nonzero float32), a dropout seed, and the keep-mask
    the kernels' generator draws from that seed (so a version that reads the mask and one that
    draws it compute the same result)."""
    seed = int(rng.integers(0, 2**32))
    host = {name: checks.nonzero(rng, n) for name in INPUTS}
    host["mask"] = lab.keep_mask(n, P, seed)
    host["seed"] = seed
    return host


def chain_reference(lab, host: dict):
    """The float64 result every version must compute, from `chain_inputs` (the lab's reference)."""
    return lab.reference_chain(*(host[k] for k in INPUTS), P, host["seed"], host["mask"])


def ledger_for(lab, variant: str, with_mask: bool = True):
    """The ledger a version of the chain declares (every fused version moves the same bytes)."""
    ledger = lab.unfused_chain_ledger if variant == "unfused" else lab.fused_chain_ledger
    return lambda n: ledger(n, with_mask=with_mask)


def torch_eager_ledger(n):
    """torch runs `relu(x * w + b) * mask * scale + r` op by op: 6 kernels, 5 intermediates."""
    ledger = Ledger("torch eager")
    steps = [("mul", ["x", "w"], "t_mul"), ("add", ["t_mul", "b"], "t_add"),
             ("relu", ["t_add"], "t_relu"), ("mul_mask", ["t_relu", "mask"], "t_mask"),
             ("mul_scale", ["t_mask"], "t_scale"), ("add_r", ["t_scale", "r"], "out")]
    for op, reads, write in steps:
        for name in reads:
            ledger.add(op, name, reads=n, itemsize=1 if name == "mask" else 4)
        ledger.add(op, write, writes=n)
    return ledger


def torch_baselines(torch, lab):
    """torch eager and torch.compile on the same chain, with the same mask (validated alike)."""
    scale = float(lab.dropout_constants(P)[1])

    def chain(x, w, b, r, mask):
        return torch.relu(x * w + b) * mask * scale + r

    compiled = torch.compile(chain)
    return [
        harness.torch_variant(torch, "torch_eager",
                              lambda x, w, b, r, mask, seed: chain(x, w, b, r, mask),
                              "what eager frameworks run: one kernel per op",
                              ledger=torch_eager_ledger),
        harness.torch_variant(torch, "torch_compile",
                              lambda x, w, b, r, mask, seed: compiled(x, w, b, r, mask),
                              "torch.compile fuses the chain into one Triton kernel",
                              ledger=ledger_for(lab, "fused")),
    ]


def chain_benchmark(lab, torch=None) -> harness.Benchmark:
    """Every version of the chain on the same inputs; the mask is the one the generator draws,
    so the version that draws it in the kernel computes the same result without reading it."""

    def runner(launcher, with_mask=True):
        extra = {"blocks": SIM_GRID_STRIDE_BLOCKS} if \
            launcher is lab.fused_chain_grid_stride and device.is_simulator() else {}
        return lambda d, out: launcher(*(d[k] for k in INPUTS), P, d["seed"],
                                       mask=d["mask"] if with_mask else None, out=out, **extra)

    def with_temporaries(d, out):
        return {**d, "temporaries": lab.unfused_temporaries(d["x"])}, out

    def unfused_runner(d, out):
        return lab.unfused_chain(*(d[k] for k in INPUTS), P, d["seed"], mask=d["mask"], out=out,
                                 temporaries=d["temporaries"])

    variants = [harness.Variant(name, unfused_runner, why, ledger=ledger_for(lab, name),
                                setup=with_temporaries) if launcher is lab.unfused_chain else
                harness.Variant(name, runner(launcher), why, ledger=ledger_for(lab, name))
                for name, (launcher, why) in lab.VARIANTS.items()]
    variants.append(harness.Variant(
        "unfused_allocating", runner(lab.unfused_chain),
        "the unfused chain allocating its three intermediates on every call: the Python around "
        "the launches, measured on its own", ledger=ledger_for(lab, "unfused")))
    variants.append(harness.Variant(
        GENERATOR, runner(lab.fused_chain, with_mask=False),
        "fused, the dropout mask drawn in the kernel from (seed, index): no mask to read",
        ledger=ledger_for(lab, "fused", with_mask=False)))
    return harness.Benchmark(
        name="chain", axis="n (float32 elements)", sizes=SIZES, sim_sizes=SIM_SIZES,
        tour_sizes=TOUR_SIZES, make_inputs=lambda rng, n: chain_inputs(lab, rng, n),
        reference=lambda host: chain_reference(lab, host), variants=variants, rtol=1e-5,
        baselines=torch_baselines(torch, lab) if torch is not None else ())


def benchmarks(lab, torch) -> list[harness.Benchmark]:
    return [chain_benchmark(lab, torch)]


def validate(lab, seed: int) -> list[str]:
    """What the benchmark's validation does not cover: the block the declaration states is the
    launchers' default, and the host's keep-mask, which every benchmark reference reads, keeps
    about 1 - p of the elements and changes with the seed."""
    if lab.DEFAULT_BLOCK != BLOCK:
        raise AssertionError(f"the launchers' DEFAULT_BLOCK is {lab.DEFAULT_BLOCK}; LAB declares {BLOCK}")
    n = 100_000
    keep = lab.keep_mask(n, P, seed)
    if abs(keep.mean() - (1 - P)) > 0.01 or (keep == lab.keep_mask(n, P, (seed + 1) % 2**32)).all():
        raise AssertionError(f"keep_mask(p={P}, seed={seed}) keeps {keep.mean():.1%} of the "
                             f"elements (want about {1 - P:.0%}), or ignores the seed")
    return ["declared block", "keep_mask"]


def size_label(n: int) -> str:
    return f"2^{n.bit_length() - 1}" if n & (n - 1) == 0 else f"{n:,}"


def headline_size(result: dict) -> int:
    """The size the targets are stated at, or the largest measured when the sweep stops short."""
    return HEADLINE_N if HEADLINE_N in result["sizes"] else max(result["sizes"])


def predicted(lab, n: int) -> float:
    """The unfused/fused speed-up the ledgers predict at n (with the mask, as benchmarked)."""
    return lab.predicted_speedup(lab.unfused_chain_ledger(n, with_mask=True),
                                 lab.fused_chain_ledger(n, with_mask=True))


GENERATOR = "fused_generator"            # the one fused version that reads no mask
GIVEN = ("fused_4_per_thread", "fused_vectorized")   # the fused versions the lab gives, not the student's
FOUR_PER_THREAD = "fused_4_per_thread"
FOUR_PER_THREAD_SINCE = "2026-12-07"     # its kernel loads the four mask bytes before the first store


def fastest_reading_the_mask(fused: dict) -> str:
    """The fastest fused version among those that read the mask, as torch.compile's kernel does."""
    return min((name for name in fused if name != GENERATOR), key=lambda name: fused[name]["median_ms"])


def targets(lab, records: dict) -> dict:
    """The lab's performance targets, measured within one run (the `chain` record).

    Each fused Numba version is reported; a target is met when the best of them meets it
    ("fused" is the one-element-per-thread kernel students write).
    """
    result = records["chain"]
    n = headline_size(result)
    fused = {name: harness.row(result, name, n) for name in result["variants"]
             if name.startswith("fused") and harness.row(result, name, n).get("median_ms")}
    best = min(fused, key=lambda name: fused[name]["median_ms"])
    unfused_ms = harness.row(result, "unfused", n)["median_ms"]
    speedup = predicted(lab, n)
    out = {
        "n": n,
        "copy_gbps": result["copy_gbps"],
        "fused_versions": {name: {"ms": row["median_ms"], "gbps": row["gbps"],
                                  "ceiling_gbps": row["ceiling_gbps"], "ceiling_mix": row["ceiling_mix"],
                                  "pct_of_ceiling": row["pct_of_ceiling"],
                                  "speedup_over_unfused": unfused_ms / row["median_ms"]}
                           for name, row in fused.items()},
        "best_fused": best,
        "best_fused_reaches_90pct_of_ceiling": max(r["pct_of_ceiling"] for r in fused.values())
        >= TARGET_PCT_OF_CEILING,
        "predicted_speedup": speedup,
        "measured_speedup": unfused_ms / fused["fused"]["median_ms"],
        "speedup_at_least_predicted": unfused_ms / fused["fused"]["median_ms"] >= speedup,
    }
    for name in ("torch_eager", "torch_compile"):
        if name in result["variants"]:
            out[f"{name}_ms"] = harness.row(result, name, n).get("median_ms")
    if out.get("torch_compile_ms"):
        same_bytes = fastest_reading_the_mask(fused)
        out["best_fused_reading_the_mask"] = same_bytes
        out["best_fused_at_least_as_fast_as_torch_compile"] = \
            fused[same_bytes]["median_ms"] <= out["torch_compile_ms"]
    return out


def key_figure(lab, records: dict) -> str:
    """The tour's one line: measured against predicted speed-up, and the fused kernel's bandwidth."""
    result = records["chain"]
    n = headline_size(result)
    unfused, fused = harness.row(result, "unfused", n), harness.row(result, "fused", n)
    # a recording from before the temporaries were preallocated timed their allocation too
    allocating = "" if "unfused_allocating" in result["variants"] else "; unfused allocating per call"
    return (f"fused {unfused['median_ms'] / fused['median_ms']:.2f}x faster than unfused "
            f"(predicted {predicted(lab, n):.2f}x), {fused['pct_of_copy']:.0f}% of copy bandwidth "
            f"at n = {size_label(n)}{allocating}")


# --- figures -------------------------------------------------------------------------------------

def traffic_figure(lab, records: dict, figures_dir: Path) -> Path:
    """Bytes per op, unfused vs fused, stacked: from the ledgers (checked by the meter in tests)."""
    n = HEADLINE_N
    ledgers = {"unfused\n(4 kernels)": lab.unfused_chain_ledger(n, with_mask=True),
               "fused\n(mask)": lab.fused_chain_ledger(n, with_mask=True),
               "fused\n(generator)": lab.fused_chain_ledger(n, with_mask=False)}
    fig, (ax,) = plots.new_figure(f"Memory traffic of out = dropout(relu(x*w + b)) + r, n = {size_label(n)}",
                                  None, source=plots.LEDGER_SOURCE)
    plots.stacked_bytes(ax, ledgers)
    return plots.save(fig, "lab02_traffic", figures_dir)


# 4 versions and the empty kernel (dotted): fused_vectorized and torch.compile would hide fused, and the record's
# fused_4_per_thread predates the present kernel (their claims tell them)
TIME_FIGURE_LEAVES_OUT = ("unfused_allocating", GENERATOR, "fused_vectorized", "torch_compile", FOUR_PER_THREAD)
# the allocation is its own topic, and torch eager is told by its claim: one grey baseline bar
BANDWIDTH_FIGURE_LEAVES_OUT = ("unfused_allocating", "torch_eager")


def bandwidth_figure(lab, records: dict, figures_dir: Path) -> Path:
    """Each version's GB/s at the headline size, against the copy and the fused kernel's mix ceiling."""
    result = records["chain"]
    n = headline_size(result)
    fig, (ax,) = plots.new_figure("Bandwidth of each version (labels: % of the copy ceiling)", result)
    plots.bandwidth_bars(ax, {**result, "rows": [r for r in result["rows"]
                                                 if r["variant"] not in BANDWIDTH_FIGURE_LEAVES_OUT]}, n)
    for label in ax.texts:                       # each % inside its bar, clear of the ceiling lines
        label.xy = label.xyann = (label.xy[0], label.xy[1] / 2)
        label.set_va("center")
    date = result["provenance"]["date"][:10]
    if date < FOUR_PER_THREAD_SINCE:             # the record timed the older fused_chain_4_per_thread
        older = f"{FOUR_PER_THREAD}\n(older version, {date})"
        ax.set_xticks(ax.get_xticks(), [older if t.get_text() == FOUR_PER_THREAD else t.get_text()
                                        for t in ax.get_xticklabels()], ha="right", rotation_mode="anchor")
    fused = harness.row(result, "fused", n)
    if "ceiling_gbps" in fused:                  # recorded before ceilings by mix: the copy alone
        ax.axhline(fused["ceiling_gbps"], color="C3", linestyle="--",
                   label=f"ceiling of the fused kernel's read:write mix ({fused['ceiling_gbps']:.0f} GB/s)")
        ax.set_ylim(top=1.3 * max(fused["ceiling_gbps"], result["copy_gbps"]))
        ax.legend(loc="upper left")
    return plots.save(fig, "lab02_bandwidth", figures_dir)


def time_figure(lab, records: dict, figures_dir: Path) -> Path:
    result = records["chain"]
    shown = {**result, "variants": {name: info for name, info in result["variants"].items()
                                    if name not in TIME_FIGURE_LEAVES_OUT},
             "rows": [{**r, "median_ms": ms(result, r["variant"], r["size"])} if r.get("median_ms") else r
                      for r in result["rows"]]}          # each point the median of the repeats
    fig, (ax,) = plots.new_figure("Time per call against n (median of the repeats): the launches, then "
                                  "bandwidth", result)
    plots.time_vs_size(ax, shown)
    return plots.save(fig, "lab02_time_vs_size", figures_dir)


# --- claims: what the discussion says, checked against the records -----------------------------
# (the byte ratio a claim compares with is the recorded one: each row's `bytes` are the ledger the
# run declared, so a claim depends neither on a student's stub nor on the solutions being shipped)

def recorded_prediction(result: dict, n) -> float:
    """The unfused/fused speed-up the recorded ledgers predict at n (their bytes per call)."""
    return row(result, "unfused", n)["bytes"] / row(result, "fused", n)["bytes"]


def ms(result: dict, variant: str, n) -> float:
    """A version's time at n: the median of its repeats' medians (a phenomenon is read on the
    median; a target on the worst repeat, the row's own median_ms)."""
    return typical_ms(row(result, variant, n))


def pct_of_ceiling(timed: dict) -> float:
    """A row's share of the ceiling of its read:write mix for a finding: the median of its repeats'
    shares, each against its own repeat's ceiling (the row's own `pct_of_ceiling` is its worst
    repeat's, which judges the target)."""
    return float(statistics.median(timed.get("repeat_pct_of_ceiling") or [need(timed, "pct_of_ceiling")]))


def exposed_samples(records: dict, variant: str, n) -> tuple[int, int]:
    """(samples whose host submit outlasted the timing's hold, samples) of a row, over every repeat:
    the same repeats whose median the time is."""
    rows = [row(chain, variant, n) for chain in repeats_of(records, "chain", NUMBER)]
    return sum(r["host_exposed"] for r in rows), sum(r["reps"] for r in rows)


def _chain_values(records):
    chain = need(records, "chain")
    n = headline_size(chain)
    small = min(chain["sizes"])
    fused, unfused = row(chain, "fused", n), row(chain, "unfused", n)
    ratios = [u / f for u, f in zip(repeats_ms(unfused), repeats_ms(fused))]
    measured = ms(chain, "unfused", n) / ms(chain, "fused", n)
    prediction = recorded_prediction(chain, n)
    efficiency = pct_of_ceiling(fused) / pct_of_ceiling(unfused)
    allocating = [1e3 * (ms(chain, "unfused_allocating", size) - ms(chain, "unfused", size)) for size in chain["sizes"]]
    return {"n": size_label(n), "small": size_label(small), "fused": ms(chain, "fused", n),
            "unfused": ms(chain, "unfused", n), "measured": measured, "lo": min(ratios), "hi": max(ratios),
            "repeats": len(ratios), "predicted": prediction, "gap": measured / prediction,
            "unfused_pct": pct_of_ceiling(unfused), "fused_pct": pct_of_ceiling(fused),
            "efficiency": efficiency, "close_off": 100 * abs(measured / prediction / efficiency - 1),
            "alloc_us": 1e3 * (ms(chain, "unfused_allocating", n) - ms(chain, "unfused", n)),
            "alloc_small_us": 1e3 * (ms(chain, "unfused_allocating", small) - ms(chain, "unfused", small)),
            "alloc_pct": 100 * (ms(chain, "unfused_allocating", n) / ms(chain, "unfused", n) - 1),
            "alloc_lo_us": min(allocating), "alloc_hi_us": max(allocating), "sizes": len(allocating),
            "alloc_small_exposed": exposed_samples(records, "unfused_allocating", small)[0],
            "alloc_exposed": exposed_samples(records, "unfused_allocating", n)[0],
            "samples": exposed_samples(records, "unfused_allocating", n)[1],
            "unfused_small_us": 1e3 * ms(chain, "unfused", small),
            "fused_small_us": 1e3 * ms(chain, "fused", small),
            "empty_kernel_us": 1e3 * chain["launch_floor_ms"],
            "fused_over_empty": ms(chain, "fused", small) / chain["launch_floor_ms"],
            "unfused_over_fused": ms(chain, "unfused", small) / ms(chain, "fused", small)}


RATIO_FROM_N = 2**20                  # from here on the sweep's times follow bytes, not launches


def _ratio_values(records):
    """The unfused/fused ratio at every recorded size from RATIO_FROM_N on, against the ledgers'."""
    chain = need(records, "chain")
    sizes = [n for n in chain["sizes"] if n >= RATIO_FROM_N]
    if not sizes:
        raise Missing(f"chain has no size from {size_label(RATIO_FROM_N)} on")
    ratios = [ms(chain, "unfused", n) / ms(chain, "fused", n) for n in sizes]
    return {"from_n": size_label(min(sizes)), "n": size_label(max(sizes)), "lo": min(ratios), "hi": max(ratios),
            "predicted": max(recorded_prediction(chain, n) for n in sizes)}


def _versions_values(records):
    chain = need(records, "chain")
    n = headline_size(chain)
    fused = row(chain, "fused", n)
    slots = device.facts().max_threads_per_sm
    blocks_per_sm, block = 4, BLOCK               # fused_chain_grid_stride's grid (validate checks BLOCK)
    occupancy = {r["variant"]: r["achieved_occupancy_pct"] for r in profile_rows_beside(chain, NUMBER)
                 if r["benchmark"] == "chain" and r["size"] == n and r["variant"] in ("fused", "fused_grid_stride")}
    if len(occupancy) < 2:
        raise Missing(f"no Nsight Compute rows of fused and fused_grid_stride at n = {size_label(n)}")
    return {"n": size_label(n), "pct": fused["pct_of_copy"], "gbps": fused["gbps"], "copy": chain["copy_gbps"],
            "blocks_per_sm": blocks_per_sm, "block": block, "slots_pct": 100 * blocks_per_sm * block / slots,
            "grid_stride": row(chain, "fused_grid_stride", n)["pct_of_copy"],
            "stride_occ": occupancy["fused_grid_stride"], "fused_occ": occupancy["fused"]}


FUSED_BYTES_IN_FLIGHT = 4 * 4 + 1     # per thread: x, w, b, r and the mask byte, all loaded before its use


def _four_values(records):
    """The bytes in flight one element per thread keeps (Nsight's occupancy, every resident thread
    counted as waiting on all its loads) against what this kernel's own read rate needs at Lab 00's
    latency per load (an estimate, like this one: neither is a bound); fused_vectorized (4 neighbouring elements, 16-byte loads) and the recorded
    fused_chain_4_per_thread against one element per thread."""
    chain = need(records, "chain")
    n = headline_size(chain)
    profiled = {r["variant"]: r for r in profile_rows_beside(chain, NUMBER)
                if r["benchmark"] == "chain" and r["size"] == n and r["kernel"].startswith("fused_chain")}
    if "fused" not in profiled:
        raise Missing(f"no Nsight Compute row of fused at n = {size_label(n)}")
    flight = lab00_indexing.bytes_in_flight({**need(records, "lab00"), "lab03": need(records, "lab03")})
    occupancy = profiled["fused"]["achieved_occupancy_pct"]
    read_tbps = profiled["fused"]["dram_bytes_read"] / profiled["fused"]["gpu_time_ns"] / 1e3
    return {"n": size_label(n), "four": ms(chain, FOUR_PER_THREAD, n), "fused": ms(chain, "fused", n),
            "vectorized": ms(chain, "fused_vectorized", n),
            "fused_pct": pct_of_ceiling(row(chain, "fused", n)),
            "occupancy": occupancy, "in_flight": occupancy / 100 * flight["slots"] * FUSED_BYTES_IN_FLIGHT / 1e6,
            "read": read_tbps, "latency": flight["latency"], "needed": read_tbps * flight["latency"],
            "slack": occupancy / 100 * flight["slots"] * FUSED_BYTES_IN_FLIGHT / 1e6 / (read_tbps * flight["latency"]),
            "date": chain["provenance"]["date"][:10], "four_timed": (
                f"The record ({chain['provenance']['date'][:10]}) predates the present fused_chain_4_per_thread: the "
                "version it timed loaded each mask byte after the previous element's store, and took"
                if chain["provenance"]["date"][:10] < FOUR_PER_THREAD_SINCE else
                "The present fused_chain_4_per_thread, its mask bytes loaded before its first store, took")}


def _ceiling_values(records):
    chain = need(records, "chain")
    fused = row(chain, "fused", headline_size(chain))
    return {"gbps": fused["gbps"], "pct": fused["pct_of_copy"], "copy": chain["copy_gbps"],
            "pct_of_ceiling": need(fused, "pct_of_ceiling"), "ceiling": fused["ceiling_gbps"],
            "target": TARGET_PCT_OF_CEILING}


def _torch_values(records):
    chain = need(records, "chain")
    n = headline_size(chain)
    fused, eager, compiled = (row(chain, name, n) for name in ("fused", "torch_eager", "torch_compile"))
    reading_mask = {name: row(chain, name, n) for name in chain["variants"]
                    if name.startswith("fused") and name != GENERATOR}
    best = fastest_reading_the_mask(reading_mask)
    against_compiled = [c / b for c, b in zip(repeats_ms(compiled), repeats_ms(reading_mask[best]))]
    return {"n": size_label(n), "fused": ms(chain, "fused", n), "eager": ms(chain, "torch_eager", n),
            "compiled": ms(chain, "torch_compile", n), "over_eager": ms(chain, "torch_eager", n) / ms(chain, "fused", n),
            "eager_bytes": eager["bytes"] / fused["bytes"],
            "vs_compiled": ms(chain, "torch_compile", n) / ms(chain, "fused", n),
            "eager_off": 100 * abs((ms(chain, "torch_eager", n) / ms(chain, "fused", n))
                                   / (eager["bytes"] / fused["bytes"]) - 1),
            "best": best, "best_whose": "given" if best in GIVEN else "yours", "best_ms": ms(chain, best, n), "best_vs_compiled": min(against_compiled),
            "repeats": len(against_compiled), "generator_ms": ms(chain, GENERATOR, n)}


CLAIMS = [
    Claim("fusion_follows_bytes",
          "At n = {n} the unfused chain takes {unfused:.3f} ms and the fused kernel {fused:.3f} ms (medians of "
          "{repeats} repeats): {measured:.2f}x (repeats {lo:.2f}-{hi:.2f}x), {more} the {predicted:.2f}x its "
          "bytes predict. The unfused kernels run at {unfused_pct:.0f}% of the ceiling of their read:write mix, "
          "the fused kernel at {fused_pct:.0f}% (medians too): {efficiency:.2f}x, {close} the {gap:.2f}x left to explain "
          "({close_off:.0f}% apart).",
          headline="fused: {measured:.2f}x the speed of the unfused chain at n = {n}, {more} the {predicted:.2f}x "
                   "its bytes predict",
          values=_chain_values,
          checks=(says("more", "measured", ">=", "predicted", "more than", "less than"),
                  says("close", "close_off", "<", 15, "close to", "not close to"))),
    Claim("ratio_stays_above_bytes",
          "From n = {from_n} to {n} the unfused/fused ratio measured {lo:.2f}x to {hi:.2f}x, against the "
          "{predicted:.2f}x the ledgers predict: {where} the prediction at every size from {from_n}.",
          headline="from n = {from_n} on, the ratio stays {where} the prediction ({lo:.2f}x to {hi:.2f}x)",
          values=_ratio_values,
          checks=(says("where", "lo", ">", "predicted", "above", "not always above"),),
          explains="the ledgers count requested bytes; they leave out how near each kernel runs to the "
                   "ceiling of its read:write mix (the first claim above), and each launch's own start and "
                   "end, which the unfused chain pays four times"),
    Claim("allocation_is_its_own_cost",
          "Allocating and freeing the three temporaries on every call adds {alloc_lo_us:.0f} to {alloc_hi_us:.0f} us "
          "per call over the {sizes} sizes. At n = {small} it adds {alloc_small_us:.0f} "
          "us, where the launches take {unfused_small_us:.1f} us: {sets} (times: medians of the repeats). The host's "
          "submit outlasted the timing's hold in {alloc_small_exposed} of the repeats' {samples} samples there: "
          "{small_window}. At n = {n}, beside "
          "{unfused:.3f} ms of GPU work per call, it adds {alloc_us:.0f} us: {alloc_pct:.0f}% on top of that work, {share}; "
          "there the submit outlasted the hold in {alloc_exposed} of {samples} samples: {window}.",
          headline="allocating and freeing the temporaries on every call: +{alloc_lo_us:.0f} to +{alloc_hi_us:.0f} us "
                   "per call over the sizes. At n = {small}, {alloc_small_us:.0f} us against {unfused_small_us:.1f} us "
                   "of launches ({sets}; {small_window}); at n = {n}, {alloc_pct:.0f}% on top of the GPU work ({share}; {window})",
          values=_chain_values,
          explains="numba-cuda allocates each temporary from the driver and frees it later, in batches; a free "
                   "can wait for the GPU's queued work, so the difference is allocating, freeing, and any host "
                   "time that enters the window",
          checks=(says("sets", "alloc_small_us", ">", "unfused_small_us", "the allocation, not the kernels, sets the time",
                       "the kernels still set the time"),
                  says("small_window", "alloc_small_exposed", "<", 1, "time the GPU itself waits",
                       "the window includes host time"),
                  says("window", "alloc_exposed", "<", 1, "time the GPU itself waits",
                       "the window includes host time"),
                  says("share", "alloc_pct", "<", 10, "a small share", "not a small share"))),
    Claim("small_n_is_launches",
          "At n = {small} the fused kernel takes {fused_small_us:.1f} us of GPU time, {fused_over_empty:.1f}x an empty "
          "kernel launched back to back ({empty_kernel_us:.1f} us): {sits}. The unfused chain's four launches take "
          "{unfused_small_us:.1f} us, {unfused_over_fused:.1f}x fused: {count}.",
          headline="at n = {small}: fused {fused_small_us:.1f} us, unfused {unfused_small_us:.1f} us ({count})",
          values=_chain_values,
          checks=(says("sits", "fused_over_empty", "<", 4, "it costs about a launch, not its bytes", "its bytes show"),
                  says("count", "unfused_over_fused", ">", 2, "the launch count sets the time",
                       "the launch count does not set the time"))),
    Claim("fused_near_ceiling",
          "The fused kernel moves {gbps:.0f} GB/s: {pct_of_ceiling:.0f}% of the ceiling of its read:write mix "
          "({ceiling:.0f} GB/s; target at least {target:.0f}%: {met}) and {pct:.0f}% of the copy ceiling "
          "({copy:.0f} GB/s). A read-heavy mix {outruns} a 1:1 copy.",
          headline="fused `dropout(relu(x*w+b))+r`: {pct_of_ceiling:.0f}% of the ceiling of its read:write mix (target {target:.0f}%: {met})",
          values=_ceiling_values,
          checks=(target("met", "pct_of_ceiling", ">=", "target"),
                  says("outruns", "ceiling", ">", "copy", "outruns", "does not outrun")),
          explains="a kernel below the ceiling of its mix keeps too few bytes in flight (Lab 00) or spends "
                   "its time on something besides moving them"),
    Claim("grid_stride_not_a_launch_saving",
          "The grid-stride version ({blocks_per_sm} blocks of {block} per SM: {slots_pct:.0f}% of an SM's thread "
          "slots) moves the same bytes at {grid_stride:.0f}% of copy, {than} {pct:.0f}% for one thread per "
          "element. Nsight found {stride_occ:.0f}% of the thread slots occupied against {fused_occ:.0f}%: {why}.",
          headline="grid-stride over {blocks_per_sm} blocks per SM: {grid_stride:.0f}% of copy, {than} {pct:.0f}% for "
                   "one thread per element",
          values=_versions_values,
          checks=(says("than", "grid_stride", "<", "pct", "below the", "at or above the"),
                  says("why", "stride_occ", "<", "fused_occ", "fewer resident threads keep fewer bytes in flight",
                       "it keeps as many threads resident, so the cause lies elsewhere"))),
    Claim("one_per_thread_is_enough",
          "One element per thread runs at {fused_pct:.0f}% of the ceiling of its mix. It loads {bytes_each} bytes "
          "before it stores; with {occupancy:.0f}% of the thread slots occupied that is about {in_flight:.2f} MB in "
          "flight, {enough} the {needed:.2f} MB its own read rate ({read:.2f} TB/s) needs at the {latency:.2f} us a "
          "load Lab 00 estimated: {suffices}. Both are estimates, not bounds: the first counts every resident thread as "
          "always waiting on all its bytes, and Lab 00 tells the second's errors; they are {slack:.1f}x apart. "
          "At n = {n}, "
          "fused_vectorized (4 neighbouring elements per thread, 16-byte loads) takes {vectorized:.3f} ms against "
          "{fused:.3f} ms: {vec_faster}. {four_timed} {four:.3f} ms ({four_faster}).",
          headline="one element per thread: {fused_pct:.0f}% of the ceiling of its mix, about {in_flight:.2f} MB in flight "
                   "({enough} the {needed:.2f} MB its read rate needs at Lab 00's latency: {suffices}); 4 per "
                   "thread in 16-byte loads: {vectorized:.3f} ms against {fused:.3f} ms ({vec_faster})",
          values=lambda records: {**_four_values(records), "bytes_each": FUSED_BYTES_IN_FLIGHT},
          checks=(says("enough", "in_flight", ">=", "needed", "more than", "less than"),
                  says("suffices", "in_flight", ">=", "needed", "enough by these estimates",
                       "too few by these estimates"),
                  says("vec_faster", "vectorized", "<", "fused", "faster", "not faster"),
                  says("four_faster", "four", "<", "fused", "faster", "slower"))),
    Claim("torch_eager_follows_bytes",
          "torch eager (six kernels, their outputs served from its caching allocator's pool: no cudaMalloc per call) "
          "takes {eager:.3f} ms at "
          "n = {n}: fused is {over_eager:.2f}x faster, and eager moves {eager_bytes:.2f}x the fused bytes "
          "({follows}, {eager_off:.0f}% apart).",
          headline="fused: {over_eager:.2f}x the speed of torch eager, which moves {eager_bytes:.2f}x its bytes",
          values=_torch_values,
          checks=(says("follows", "eager_off", "<", 20, "the speed-up follows the bytes",
                       "the speed-up does not follow the bytes"),)),
    Claim("torch_compile_parity",
          "torch.compile's Triton kernel reads the mask too and takes {compiled:.3f} ms (times here are medians "
          "of the repeats). Reading the same bytes, the one-element-per-thread kernel takes {fused:.3f} ms "
          "({vs_compiled:.2f}x torch.compile's speed) and the fastest fused Numba version, {best} ({best_whose}), "
          "{best_ms:.3f} ms "
          "({best_vs_compiled:.2f}x in the worst of {repeats} repeats, each against its own torch.compile; "
          "target: at least as fast, {verdict}). Drawing the mask in the kernel instead (fused_generator, a byte less per element) "
          "takes {generator_ms:.3f} ms.",
          headline="the fastest fused version reading the mask, {best} ({best_whose}): {best_vs_compiled:.2f}x "
                   "torch.compile in the worst of {repeats} repeats (target 1x: {verdict}); the one-element kernel "
                   "you write: {vs_compiled:.2f}x (medians)",
          values=_torch_values,
          checks=(target("verdict", "best_vs_compiled", ">=", 1),),
          explains="both move the same bytes, so the faster one runs closer to the ceiling of their mix"),
]


def takeaway() -> str:
    """The notebook's last cell: the key figure and four lines, from the records the claims read."""
    from kernellab.course import claims
    chain = _chain_values(claims.sources(NUMBER))
    count = claims.words_of(next(c for c in CLAIMS if c.name == "small_n_is_launches"), chain)["count"]
    return "\n".join([
        f"What to take away (key figure: at n = {chain['n']} the fused kernel is {chain['measured']:.2f}x "
        f"faster than the unfused chain; its bytes predicted {chain['predicted']:.2f}x)",
        "- Unfused, each kernel writes its result to memory and the next reads it back; fused, it stays in a register.",
        "- A memory-bound kernel's time follows its bytes and how near its ceiling it runs: count the bytes first.",
        f"- The rest: the fused kernel runs at {chain['fused_pct']:.0f}% of the ceiling of its read:write mix, the "
        f"unfused kernels at {chain['unfused_pct']:.0f}% of theirs (the bar labels give % of the copy ceiling).",
        f"- At n = {chain['small']}: fused {chain['fused_small_us']:.1f} us, unfused "
        f"{chain['unfused_small_us']:.1f} us; {count}.",
    ])


LAB = protocol.Lab(
    number=NUMBER, title="vertical fusion",
    kernels=(
        protocol.Kernel("affine_kernel", "1-D: one thread per element (unfused, 1 of 4)", block_size=BLOCK),
        protocol.Kernel("relu_kernel", "1-D: one thread per element (unfused, 2 of 4)", block_size=BLOCK),
        protocol.Kernel("dropout_kernel", "1-D: one thread per element (unfused, 3 of 4)", block_size=BLOCK),
        protocol.Kernel("add_kernel", "1-D: one thread per element (unfused, 4 of 4)", block_size=BLOCK),
        protocol.Kernel("fused_chain_kernel", "1-D: one thread per element, the whole chain", block_size=BLOCK),
        protocol.Kernel("fused_chain_grid_stride_kernel",
                        "1-D: a fixed grid of 4 blocks per SM, each thread looping", block_size=BLOCK),
        protocol.Kernel("fused_chain_4_per_thread_kernel",
                        "1-D: 4 elements per thread, a grid stride apart", block_size=BLOCK),
        protocol.Kernel("fused_chain_vectorized_kernel",
                        "1-D: 4 neighbouring elements per thread, 16-byte loads and stores", block_size=BLOCK),
    ),
    references=("reference_chain",),
    validate=validate,
    benchmarks=benchmarks,
    figures=(protocol.Figure("lab02_traffic", traffic_figure),
             protocol.Figure("lab02_bandwidth", bandwidth_figure, needs=("chain",)),
             protocol.Figure("lab02_time_vs_size", time_figure, needs=("chain",))),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
