"""Lab 04's experiments: float32 GEMM variants against cuBLAS, the fused epilogue against the
unfused chain, and what each kernel costs in registers and occupancy.

Declared as `LAB` (kernellab.course.protocol) at the end: `kernellab bench 04` validates every
version, then times them at n = 512 .. 4096 (M = N = K = n), with cuBLAS (torch.matmul, TF32
off) where torch is importable, records every kernel's registers, shared memory and occupancy,
and checks the lab's targets at n = 4096 within the same run:
- each fused epilogue saves at least the time its saved bytes take at the measured copy bandwidth,
  against the unfused form compiled alike (uncapped with uncapped, capped with capped);
- the best Numba GEMM reaches >= 40% of cuBLAS float32.
`kernellab tour 04` validates the versions on this device and draws the figures.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol, reference, registers
from kernellab.gpu import checks, device
from kernellab.gpu.launches import record_launches
from kernellab.show import plots
from kernellab.course.claims import (Claim, Compare, Missing, course_solution, need, profile_rows_beside, repeats_ms,
                                     row, says, states, target, typical_ms)

P = 0.1                                   # dropout probability in every measurement
HEADLINE_N = 4096                         # the size the targets are stated at
SIZES = [512, 1024, 2048, 4096]
TOUR_SIZES = [HEADLINE_N]                 # the tour on a GPU measures the headline size only
SIM_SIZES = [11]                          # M = N = K = 11: no tile divides it
SIM_TILE = 8                              # the simulator runs each thread in Python: tiny tiles
SIM_TILES = (16, 8, 8, 4, 4)
SIM_TILES_2D = (8, 16, 8, 4, 4)
TARGET_FRACTION_OF_CUBLAS = 0.70       # issue 27: the best Numba GEMM at 70% of cuBLAS fp32
NEAR_COPY_PCT = 80.0                    # a memory-bound kernel at this share of copy or more runs near copy speed
# Each fused epilogue against the unfused form that differs from it only by the fusion: the same
# matmul, compiled alike (uncapped with uncapped, capped at 128 registers with capped), so a
# saving is the epilogue's and not the register cap's. (Uncapped, fusing pushes the 8 x 8 kernel
# past 128 registers: that pair measures the fusion with its occupancy cost.)
PAIRS = {"tiled": ("tiled_unfused", "tiled_fused"),
         "register_tiled": ("register_tiled_unfused", "register_tiled_fused"),
         "register_tiled_capped": ("register_tiled_capped_unfused", "register_tiled_capped_fused"),
         "double_buffered": ("double_buffered_unfused", "double_buffered_fused"),
         "double_buffered_capped": ("double_buffered_capped_unfused", "double_buffered_capped_fused"),
         "bk16": ("bk16_unfused", "bk16_fused")}
# The steps from the 8 x 8 kernel toward cuBLAS, in the lab's order (the lab's GEMM_STEPS).
LADDER = ("interior", "vector", "unrolled", "warp_tiled", "bk16", "bk16_double_buffered")
# The TFLOP/s figure's lines (8 at most, one colour each): the textbook kernels, the first step and
# the fastest of the ladder; the steps figure shows every step.
TFLOPS_SHOWN = ("naive", "tiled", "register_tiled_2d", "register_tiled", "double_buffered_capped", "interior",
                "bk16", "cublas")


def recorded_pairs(epilogue: dict) -> dict:
    """The PAIRS whose two variants a result holds (a recording older than a pair lacks it)."""
    return {family: names for family, names in PAIRS.items()
            if all(name in epilogue["variants"] for name in names)}


def tile_options(lab, name: str) -> dict:
    """The launcher options a variant runs with: the lab's defaults on a GPU, tiny tiles in the simulator."""
    if name == "naive":
        return {}
    if name.startswith("tiled"):
        return {"tile": SIM_TILE if device.is_simulator() else lab.TILE}
    if name.startswith("register_tiled_2d"):
        return {"tiles": lab.GemmTiles(*SIM_TILES_2D) if device.is_simulator() else lab.TILES_2D}
    own = lab.GEMM_CANDIDATES.get(name.removesuffix("_unfused").removesuffix("_fused"), ({}, ""))[0]
    if device.is_simulator():    # tiny tiles, too small for warp tiles: the steps are the lab tests'
        return {"tiles": lab.GemmTiles(*SIM_TILES), **({"steps": lab.PLAIN} if "steps" in own else {})}
    return {"tiles": own.get("tiles", lab.REGISTER_TILES)}


def block_tile(lab, name: str) -> tuple[int, int]:
    """(rows, cols) of C one block computes: what sets how often A and B are re-read."""
    options = tile_options(lab, name)
    if "tile" in options:
        return options["tile"], options["tile"]
    return options["tiles"][0], options["tiles"][1]


def gemm_inputs(rng, n):
    return {"a": checks.nonzero(rng, (n, n)), "b": checks.nonzero(rng, (n, n))}


def cublas_baseline(torch):
    """cuBLAS float32 through torch.matmul, with TF32 off (the issue's reference)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    return harness.torch_variant(torch, "cublas", lambda a, b: torch.matmul(a, b),
                                 "cuBLAS SGEMM via torch.matmul, TF32 off")


def matmul_benchmark(lab, torch=None) -> harness.Benchmark:
    def runner(name, launcher):
        options = tile_options(lab, name)
        return lambda d, out: launcher(d["a"], d["b"], out=out, **options)

    variants = [harness.Variant(name, runner(name, launcher), why)
                for name, (launcher, why) in lab.VARIANTS.items()]
    return harness.Benchmark(
        name="matmul", axis="n (M = N = K)", sizes=SIZES, sim_sizes=SIM_SIZES, tour_sizes=TOUR_SIZES,
        make_inputs=gemm_inputs, reference=lambda h: lab.matmul_reference(h["a"], h["b"]),
        variants=variants, rtol=1e-4, flops=lambda n: 2.0 * n**3,
        baselines=[cublas_baseline(torch)] if torch is not None else ())


def epilogue_benchmark(lab) -> harness.Benchmark:
    """Each matmul with the epilogue unfused (3 more kernels) and fused, with their ledgers."""

    def make_inputs(rng, n):
        host = gemm_inputs(rng, n)
        host["bias"] = checks.nonzero(rng, n)
        host["mask"] = (rng.random((n, n)) >= P).astype(np.uint8)
        return host

    def expected(h):
        return lab.linear_relu_dropout_reference(h["a"], h["b"], h["bias"], h["mask"], P)

    def variant(name, launcher, why):
        options = tile_options(lab, name)
        rows, cols = block_tile(lab, name)
        return harness.Variant(
            name, lambda d, out: launcher(d["a"], d["b"], d["bias"], d["mask"], P, out=out, **options),
            why, ledger=lambda n: lab.linear_ledger(n, n, n, fused=name.endswith("_fused"),
                                                    block_rows=rows, block_cols=cols))

    return harness.Benchmark(
        name="epilogue", axis="n (M = N = K)", sizes=SIZES, sim_sizes=SIM_SIZES, tour_sizes=TOUR_SIZES,
        make_inputs=make_inputs, reference=expected, rtol=1e-4, flops=lambda n: 2.0 * n**3,
        variants=[variant(name, launcher, why) for name, (launcher, why) in lab.EPILOGUE_VARIANTS.items()])


def benchmarks(lab, torch) -> list[harness.Benchmark]:
    return [matmul_benchmark(lab, torch), epilogue_benchmark(lab)]


# --- register pressure ------------------------------------------------------------------------

def measure_registers(lab) -> dict:
    """Registers, shared memory, spills and occupancy of every declared kernel at its block."""
    rows = registers.report(lab, registers.declared_blocks(KERNELS))
    print(registers.table(rows))
    return {"provenance": reference.provenance(), "rows": rows}


def validate(lab, seed: int) -> list[str]:
    """Every kernel the lab declares SIGNATURES for is declared here; on a GPU, each launcher
    launches its kernels with the declared block (a tiny product at the default tiles: ~20 s in
    the simulator, so there the benchmarks' small tiles are all it runs)."""
    declared = {k.name: k.block_size for k in KERNELS}
    if tuple(lab.GEMM_STEPS) != LADDER:
        raise AssertionError(f"lab 04's GEMM_STEPS {lab.GEMM_STEPS} are not the ladder its claims read: {LADDER}")
    if set(declared) != set(lab.SIGNATURES):
        raise AssertionError(f"lab 04's declared kernels differ from its SIGNATURES: "
                             f"{sorted(set(declared) ^ set(lab.SIGNATURES))}")
    if device.is_simulator():
        return [f"{len(declared)} kernels declared"]
    rng = np.random.default_rng(seed)
    host = {**gemm_inputs(rng, 3), "bias": checks.nonzero(rng, 3), "mask": np.ones((3, 3), np.uint8)}
    d = {k: device.cuda().to_device(v) for k, v in host.items()}
    launchers = [lambda launcher=launcher: launcher(d["a"], d["b"]) for launcher, _ in lab.VARIANTS.values()]
    launchers += [lambda launcher=launcher: launcher(d["a"], d["b"], d["bias"], d["mask"], P)
                  for launcher, _ in lab.EPILOGUE_VARIANTS.values()]
    with record_launches() as launches:
        for launch in launchers:
            launch()
    wrong = sorted({f"{l.name}: {l.block}" for l in launches
                    if l.block[0] * l.block[1] * l.block[2] != declared.get(l.name)})
    if wrong:
        raise AssertionError(f"launched with a block other than the declared one: {', '.join(wrong)}")
    return [f"{len(launches)} launches at the declared blocks"]


# --- targets ------------------------------------------------------------------------------------

def targets(lab, records: dict) -> dict:
    """The lab's targets at n = 4096, from one run's records (printed, and saved by the bench)."""
    goals = targets_at(records["matmul"], records["epilogue"], HEADLINE_N)
    print(report(goals))
    return goals


def targets_at(matmul: dict, epilogue: dict, n: int) -> dict:
    """The targets at size n, from one run's results."""
    copy_gbps = epilogue["copy_gbps"]
    pairs = {}
    for family, (unfused_name, fused_name) in recorded_pairs(epilogue).items():
        unfused, fused = harness.row(epilogue, unfused_name, n), harness.row(epilogue, fused_name, n)
        saved_bytes = unfused["bytes"] - fused["bytes"]
        saved_ms = unfused["median_ms"] - fused["median_ms"]
        predicted_ms = saved_bytes / (copy_gbps * 1e9) * 1e3
        pairs[family] = {"fused_variant": fused["variant"], "unfused_ms": unfused["median_ms"],
                         "fused_ms": fused["median_ms"], "saved_bytes": saved_bytes, "saved_ms": saved_ms,
                         "bytes_at_copy_speed_ms": predicted_ms, "ratio": saved_ms / predicted_ms,
                         "met": saved_ms >= predicted_ms}
    tflops = {name: harness.row(matmul, name, n)["gflops"] / 1e3 for name in matmul["variants"]
              if harness.row(matmul, name, n).get("gflops")}
    numba = {k: v for k, v in tflops.items() if not matmul["variants"][k]["baseline"]}
    best = max(numba, key=numba.get)
    out = {"n": n, "copy_gbps": copy_gbps, "epilogue": pairs,
           "epilogue_target_met": all(p["met"] for p in pairs.values()),
           "tflops": tflops, "best_numba": best, "best_numba_tflops": numba[best]}
    if "cublas" in tflops:
        out["fraction_of_cublas"] = numba[best] / tflops["cublas"]
        out["cublas_target_met"] = out["fraction_of_cublas"] >= TARGET_FRACTION_OF_CUBLAS
    return out


def report(goals: dict) -> str:
    lines = [f"Lab 04 targets at n = {goals['n']} (one run; copy bandwidth {goals['copy_gbps']:.0f} GB/s):"]
    for family, p in goals["epilogue"].items():
        lines.append(f"  {family:<16} unfused {p['unfused_ms']:.3f} ms, {p['fused_variant']} {p['fused_ms']:.3f} ms: saved "
                     f"{p['saved_ms']:.3f} ms; its {p['saved_bytes'] / 1e6:.0f} MB take "
                     f"{p['bytes_at_copy_speed_ms']:.3f} ms at copy speed: ratio {p['ratio']:.2f} "
                     f"{'PASS' if p['met'] else 'FAIL'} (target >= 1)")
    best = f"  best Numba GEMM {goals['best_numba']} {goals['best_numba_tflops']:.1f} TFLOP/s"
    if "fraction_of_cublas" in goals:
        lines.append(f"{best}, cuBLAS {goals['tflops']['cublas']:.1f}: ratio {goals['fraction_of_cublas']:.2f} "
                     f"{'PASS' if goals['cublas_target_met'] else 'FAIL'} (target >= {TARGET_FRACTION_OF_CUBLAS})")
    else:
        lines.append(f"{best}; torch not importable here: no cuBLAS comparison")
    return "\n".join(lines)


# --- figures --------------------------------------------------------------------------------------

def tflops_figure(result: dict, figures_dir: Path) -> Path:
    fig, (ax,) = plots.new_figure("float32 GEMM (M = N = K = n): TFLOP/s, cuBLAS dashed", result)
    lines = {name: [r for r in harness.rows_for(result, name) if r.get("gflops")] for name in TFLOPS_SHOWN
             if name in result["variants"]}
    lines = {name: rows for name, rows in lines.items() if rows}
    ranked = sorted(lines, key=lambda name: -lines[name][-1]["gflops"])   # the legend reads as the lines stack
    for i, name in enumerate(ranked):
        rows = lines[name]
        ax.plot([r["size"] for r in rows], [r["gflops"] / 1e3 for r in rows],
                "--" if result["variants"][name]["baseline"] else "-", marker="o", markersize=3,
                color=f"C{i}", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n")
    ax.set_ylabel("TFLOP/s")
    ax.grid(True, alpha=0.3)
    plots.legend(ax)
    return plots.save(fig, "lab04_gemm_tflops", figures_dir)


def steps_figure(result: dict, figures_dir: Path, n: int) -> Path:
    """The ladder at size n: each step's TFLOP/s as a bar, under the FP32 FMA roof and cuBLAS of the
    same run (every step has the 8 x 8 kernel's bytes: one intensity, so on the roofline they would
    stand on one vertical line; here they stand side by side). Each bar, and cuBLAS, is its slowest
    repeat, as `gemm_ladder`, `gemm_steps` and the key figure read it."""
    chain = [name for name in ("register_tiled", *LADDER) if name in result["variants"]]
    fig, (ax,) = plots.new_figure(f"The steps toward cuBLAS, float32 GEMM at n = {n} (each its slowest repeat)",
                                  result)
    tflops = [harness.row(result, name, n)["gflops"] / 1e3 for name in chain]
    roof = result["ceilings"]["fp32_fma_tflops"]
    bars = ax.bar(range(len(chain)), tflops, color="tab:blue")
    for bar, value in zip(bars, tflops):
        ax.annotate(f"{value:.1f}\n{value / roof:.0%} of roof", (bar.get_x() + bar.get_width() / 2, value),
                    ha="center", va="bottom", fontsize="small")
    ax.axhline(roof, color="k", label=f"FP32 FMA roof {roof:.1f} TFLOP/s (same run)")
    if "cublas" in result["variants"]:
        cublas = harness.row(result, "cublas", n)["gflops"] / 1e3
        ax.axhline(cublas, color="tab:green", linestyle="--", label=f"cuBLAS {cublas:.1f} TFLOP/s")
    ax.set_xticks(range(len(chain)), chain, rotation=20)
    ax.set_ylim(0, roof * 1.3)                       # room above the roof for the legend
    ax.set_ylabel("TFLOP/s")
    plots.legend(ax, loc="upper center", ncols=2)
    return plots.save(fig, "lab04_gemm_steps", figures_dir)


def repeat_savings(result: dict, unfused_name: str, fused_name: str, n: int) -> list[float]:
    """Unfused less fused time (ms) in each repeat (each repeat's own median), or the one saving
    of a result without repeats."""
    unfused, fused = harness.row(result, unfused_name, n), harness.row(result, fused_name, n)
    if unfused.get("repeat_ms") and fused.get("repeat_ms"):
        return [u - f for u, f in zip(unfused["repeat_ms"], fused["repeat_ms"])]
    return [unfused["median_ms"] - fused["median_ms"]]


def epilogue_figure(result: dict, figures_dir: Path, n: int) -> Path:
    """The time fusing the epilogue saves per call, for each like-for-like pair (the median of the
    repeats, their range as the error bar), beside what the saved bytes take at copy speed."""
    fig, (ax,) = plots.new_figure(f"out = dropout(relu(a @ b + bias)), n = {n}: the time fusing saves", result)
    pairs = recorded_pairs(result)
    copy = result["copy_gbps"] * 1e9
    for i, (family, (unfused_name, fused_name)) in enumerate(pairs.items()):
        saved = repeat_savings(result, unfused_name, fused_name, n)
        middle = statistics.median(saved)
        ax.bar(i, middle, 0.6, color="C0", yerr=[[middle - min(saved)], [max(saved) - middle]], capsize=4,
               label="saved per call (median of the repeats; bar: their range)" if not i else None)
        at_copy = (harness.row(result, unfused_name, n)["bytes"] - harness.row(result, fused_name, n)["bytes"]) \
            / copy * 1e3
        ax.hlines(at_copy, i - 0.35, i + 0.35, colors="k", linestyles="--",
                  label="the saved bytes at copy speed" if not i else None)
    ax.set_xticks(range(len(pairs)), list(pairs), rotation=15)
    ax.set_ylabel("time saved per call (ms)")
    ax.set_ylim(0, ax.get_ylim()[1] * 1.3)                 # room above the bars for the legend
    ax.legend(loc="upper left")
    return plots.save(fig, "lab04_epilogue", figures_dir)


def traffic_figure(lab, figures_dir: Path, n: int = HEADLINE_N) -> Path:
    """Bytes per op of the register-tiled forms, from the ledgers (checked by the meter in tests)."""
    rows, cols = lab.REGISTER_TILES.bm, lab.REGISTER_TILES.bn
    ledgers = {"unfused\n(4 kernels)": lab.linear_ledger(n, n, n, False, rows, cols),
               "fused\n(1 kernel)": lab.linear_ledger(n, n, n, True, rows, cols)}
    fig, (ax,) = plots.new_figure(f"Memory traffic, n = {n}, {rows} x {cols} block tiles", None,
                                  source=plots.LEDGER_SOURCE)
    plots.stacked_bytes(ax, ledgers)
    return plots.save(fig, "lab04_traffic", figures_dir)


def headline(result: dict) -> int:
    """The size the figures and claims read: the targets' n where it was measured."""
    return HEADLINE_N if HEADLINE_N in result["sizes"] else max(result["sizes"])


def worst_fraction_of_cublas(matmul: dict, best: str, n: int) -> tuple[float, int]:
    """(the least of `best`'s TFLOP/s over cuBLAS's, each repeat against its own cuBLAS; the
    repeats): the fraction of cuBLAS a target judges."""
    ratios = [c / b for b, c in zip(repeats_ms(harness.row(matmul, best, n)), repeats_ms(harness.row(matmul, "cublas", n)))]
    return min(ratios), len(ratios)


def key_figure(lab, records) -> str:
    goals = targets_at(records["matmul"], records["epilogue"], headline(records["matmul"]))
    cublas = (f", {worst_fraction_of_cublas(records['matmul'], goals['best_numba'], goals['n'])[0]:.0%} of "
              f"cuBLAS (worst repeat)" if "fraction_of_cublas" in goals else "")
    pairs = goals["epilogue"]       # the fastest like-for-like pair recorded (a recording may lack one)
    pair = pairs[next(f for f in ("register_tiled_capped", "double_buffered", "tiled") if f in pairs)]
    return (f"best GEMM {goals['best_numba']} {goals['best_numba_tflops']:.1f} TFLOP/s{cublas}; fused "
            f"epilogue ({pair['fused_variant']}) {'saves' if pair['saved_ms'] > 0 else 'costs'} "
            f"{abs(pair['saved_ms']):.2f} ms at n = {goals['n']} "
            f"({pair['ratio']:.1f}x its bytes at copy speed)")


FIGURES = (
    protocol.Figure("lab04_traffic", lambda lab, records, out: traffic_figure(lab, out)),
    protocol.Figure("lab04_gemm_tflops", lambda lab, records, out: tflops_figure(records["matmul"], out),
                    needs=("matmul",)),
    protocol.Figure("lab04_gemm_steps", lambda lab, records, out: steps_figure(
        records["matmul"], out, headline(records["matmul"])), needs=("matmul",)),
    protocol.Figure("lab04_epilogue", lambda lab, records, out: epilogue_figure(
        records["epilogue"], out, headline(records["epilogue"])), needs=("epilogue",)),
    protocol.Figure("lab04_registers", lambda lab, records, out: registers.figure(
        records["registers"], out, "lab04_registers"), needs=("registers",)),
)


# --- claims: what the discussion says, checked against the records -----------------------------

def _tflops_values(records):
    matmul = need(records, "matmul")
    n = headline(matmul)
    tflops = {name: row(matmul, name, n)["gflops"] / 1e3 for name in matmul["variants"]}
    numba = {k: v for k, v in tflops.items() if not matmul["variants"][k]["baseline"]}
    best = max(numba, key=numba.get)
    if "cublas" not in tflops:   # a live tour times no baselines: the claim reads the reference
        raise Missing("matmul has no cublas row (no torch baseline timed in this run)")
    fraction, repeats = worst_fraction_of_cublas(matmul, best, n)
    return {"n": n, **tflops, "best": best, "best_tflops": numba[best], "fraction": fraction,
            "repeats": repeats, "target": TARGET_FRACTION_OF_CUBLAS}


def _steps_values(records):
    """Each step of the ladder at its slowest repeat (`gflops`), as the ladder and the key figure read it."""
    matmul = need(records, "matmul")
    n = headline(matmul)
    chain = ("register_tiled", *LADDER)
    missing = [name for name in chain if name not in matmul["variants"]]
    if missing:
        raise Missing(f"matmul has no row for {', '.join(missing)} (recorded before the steps existed)")
    tflops = {name: row(matmul, name, n)["gflops"] / 1e3 for name in chain}
    steps = {after: tflops[after] / tflops[before] - 1 for before, after in zip(chain, chain[1:])}
    largest = max(steps, key=steps.get)
    double = [r for r in profile_rows_beside(matmul, "04") if r["benchmark"] == "matmul" and r["size"] == n
              and r["variant"] == "bk16_double_buffered" and r.get("registers_per_thread")]
    if not double:
        raise Missing("no Nsight Compute row of bk16_double_buffered (`kernellab profile 04`)")
    return {"n": n, **tflops, "vector_step": steps["vector"], "double_step": steps["bk16_double_buffered"],
            "largest": largest, "largest_step": steps[largest],
            "double_regs": double[0]["registers_per_thread"], "two_blocks_regs": course_solution("04").CAPPED_REGISTERS}


def _behind(tflops: dict) -> dict:
    return {**tflops, "behind": tflops["register_tiled"] / tflops["tiled"]}


def _epilogue_values(records):
    """What fusing the epilogue saves in each like-for-like pair at the headline size (medians of the
    repeats), against the repeats' own spread, the saved bytes at copy speed, and the time Nsight
    Compute measured for the three elementwise kernels fusing removes."""
    epilogue = need(records, "epilogue")
    n = headline(epilogue)
    pairs = recorded_pairs(epilogue)
    if not pairs:
        raise Missing("epilogue has no pair of unfused and fused rows")
    saved, share, ratio, at_copy, spread = [], [], [], [], []
    for unfused_name, fused_name in pairs.values():
        unfused, fused = row(epilogue, unfused_name, n), row(epilogue, fused_name, n)
        saving = typical_ms(unfused) - typical_ms(fused)
        copy_ms = (unfused["bytes"] - fused["bytes"]) / (epilogue["copy_gbps"] * 1e9) * 1e3
        saved.append(saving)
        share.append(saving / typical_ms(unfused))
        ratio.append(saving / copy_ms)
        at_copy.append(copy_ms)
        spread += [max(r.get("repeat_ms") or [r["p90_ms"]]) - min(r.get("repeat_ms") or [r["p10_ms"]])
                   for r in (unfused, fused)]
    elementwise = [r for r in profile_rows_beside(epilogue, "04") if r["benchmark"] == "epilogue" and r["size"] == n
                   and r["variant"] == "register_tiled_capped_unfused" and not r["kernel"].startswith("matmul")]
    if len(elementwise) != 3:
        raise Missing("no Nsight Compute rows of the three elementwise kernels (`kernellab profile 04`)")
    elementwise_ms = sum(r["gpu_time_ns"] for r in elementwise) / 1e6
    unfused, fused = (row(epilogue, name, n) for name in PAIRS["register_tiled_capped"])
    saved_bytes = unfused["bytes"] - fused["bytes"]
    copy_ms = saved_bytes / (epilogue["copy_gbps"] * 1e9) * 1e3
    tiles = course_solution("04").REGISTER_TILES
    ledger = course_solution("04").linear_ledger(n, n, n, False, tiles.bm, tiles.bn).with_distinct("bias", n)
    ops = {r["kernel"].removesuffix("_kernel") for r in elementwise}
    elementwise_bytes = sum(e.bytes - e.cached_bytes for e in ledger.entries if e.op in ops)   # compulsory
    return {"n": n, "pairs": len(pairs), "repeats": len(row(epilogue, PAIRS["register_tiled_capped"][0], n)
                                                         .get("repeat_ms") or [0]),
            "lo": min(saved), "hi": max(saved), "share_lo": min(share), "share_hi": max(share),
            "spread": max(spread), "over_spread": min(saved) / max(spread),
            "ratio_lo": min(ratio), "ratio_hi": max(ratio), "at_copy": min(at_copy),
            "elementwise_ms": elementwise_ms, "elementwise_over": elementwise_ms / copy_ms,
            "elementwise_mb": elementwise_bytes / 1e6, "saved_mb": saved_bytes / 1e6,
            "elementwise_pct": 100 * elementwise_bytes / (elementwise_ms * 1e-3) / (epilogue["copy_gbps"] * 1e9),
            "near_copy": NEAR_COPY_PCT}


def _naive_values(records):
    """The naive kernel's loads against the DRAM bytes Nsight Compute measured for it."""
    matmul = need(records, "matmul")
    n = headline(matmul)
    found = [r for r in profile_rows_beside(matmul, "04") if r["benchmark"] == "matmul" and r["variant"] == "naive"
             and r["size"] == n]
    if not found:
        raise Missing("no Nsight Compute row of the naive kernel (`kernellab profile 04`)")
    requested = 2 * n**3 * 4                   # two 4-byte loads per multiply-add
    dram = found[0]["dram_bytes_read"]
    sectors = found[0]["l1_sectors_per_request"]
    return {"n": n, "requested_gb": requested / 1e9, "dram_gb": dram / 1e9, "dram_share": dram / requested,
            "sectors": sectors, "sector_bytes": 32 * sectors,
            "dram_pct": found[0]["dram_throughput_pct"], "sm_pct": found[0]["sm_throughput_pct"],
            "ms": typical_ms(row(matmul, "naive", n))}


CLAIMS = [
    Claim("gemm_ladder",
          "At n = {n}: naive {naive:.1f}, 16 x 16 tiled {tiled:.1f}, 4 x 4 per thread {register_tiled_2d:.1f}, "
          "8 x 8 per thread {register_tiled:.1f}, double-buffered {double_buffered:.1f} (capped at 128 "
          "registers: {double_buffered_capped:.1f}) TFLOP/s; cuBLAS {cublas:.1f} (each its slowest of {repeats} "
          "repeats). The best Numba GEMM ({best}) reaches {fraction:.0%} of cuBLAS in the worst repeat, each "
          "repeat against its own cuBLAS (target: at least {target:.0%}, {met}).",
          headline="best Numba float32 GEMM ({best}) at {n}^3: {fraction:.0%} of cuBLAS in the worst of {repeats} "
                   "repeats (target {target:.0%})",
          values=_tflops_values, checks=(target("met", "fraction", ">=", "target"),)),
    Claim("gemm_steps",
          "From the 8 x 8 kernel ({register_tiled:.1f} TFLOP/s at n = {n}, each figure its slowest repeat), one step at a time: no bounds "
          "checks where the tiles divide {interior:.1f}, 16-byte global loads {vector:.1f}, the k loop "
          "unrolled {unrolled:.1f}, warp tiles {warp_tiled:.1f}, bk = 16 {bk16:.1f}, then double "
          "buffering {bk16_double_buffered:.1f}. The 16-byte loads {vector_verb} (the step's own effect: "
          "{vector_step:+.0%}); double buffering on bk = 16 {double_verb} ({double_step:+.0%}). The largest "
          "step is {largest} ({largest_step:+.0%}). Double buffering holds the next tiles in registers: "
          "{double_regs} per thread (Nsight Compute's count), {double_past} the {two_blocks_regs} that let two "
          "blocks share an SM.",
          headline="steps toward cuBLAS: the largest is {largest} ({largest_step:+.0%}); 16-byte loads "
                   "{vector_verb} ({vector_step:+.0%}), double buffering {double_verb} ({double_step:+.0%})",
          values=_steps_values,
          checks=(says("vector_verb", "vector", ">", "interior", "help", "do not help here"),
                  says("double_verb", "bk16_double_buffered", ">", "bk16", "helps", "does not help here"),
                  says("double_past", "double_regs", ">", "two_blocks_regs", "past", "within")),
          explains="each step is one switch of the lab's register-tiled factory (GemmSteps). NVVM does not "
                   "unroll the k loop, whose 64 multiply-adds per step exceed its unroll threshold, so the "
                   "unrolled step writes it out by hand. The steps stop at bk = 16 by the lab's rule "
                   "(check_tiles): every kernel's tiles must fit twice, for double buffering, in the 48 KiB "
                   "of static shared memory a CUDA kernel may declare, and two buffers of bk = 32 tiles do "
                   "not."),
    Claim("tiled_below_model",
          "The 16 x 16 tiled kernel runs at {tiled:.1f} TFLOP/s, {behind:.0f}x behind the 8 x 8 register "
          "tile, though each thread does 16 multiply-adds per two global loads (8 per load).",
          headline="the 16 x 16 tiled kernel: {tiled:.1f} TFLOP/s, {behind:.0f}x behind the 8 x 8 register "
                   "tile",
          values=lambda records: _behind(_tflops_values(records)),
          checks=(Compare("behind", ">", 1.0),),
          explains="its inner loop is mostly instructions that are not multiply-adds. In its PTX (sm_90, "
                   "numba-cuda 0.30) the loop over the tile is unrolled 4 times, yet each multiply-add still "
                   "brings two shared loads and 64-bit index arithmetic with negative-index wrap-around "
                   "checks. The 8 x 8 kernel's unsigned indices drop those checks, and each value it loads from "
                   "shared memory feeds 4 multiply-adds."),
    Claim("epilogue_saving",
          "At n = {n}, fusing the epilogue saves {lo:.3f}-{hi:.3f} ms per call over the {pairs} pairs, "
          "{share_lo:.1%}-{share_hi:.1%} of the unfused call (each time the median of {repeats} repeats). "
          "A variant's repeats differ by at most {spread:.3f} ms, so the smallest saving is {over_spread:.0f}x "
          "that spread ({resolved}). The saving is {ratio_lo:.2f}-{ratio_hi:.2f}x what the saved bytes take "
          "at copy speed, {at_copy:.3f} ms ({beyond}). Under Nsight Compute the three elementwise kernels "
          "fusing removes took {elementwise_ms:.3f} ms, {elementwise_over:.2f}x that. "
          "Leaving out the bias re-reads a cache serves, they move {elementwise_mb:.0f} MB, more than the "
          "{saved_mb:.0f} MB fusing saves (the fused kernel still reads bias and mask, under its math), at "
          "{elementwise_pct:.0f}% of copy ({pace} {near_copy:.0f}%).",
          headline="fusing the epilogue saves {lo:.2f}-{hi:.2f} ms at n = {n}: {over_spread:.0f}x the repeats' "
                   "spread, {ratio_lo:.1f}-{ratio_hi:.1f}x its bytes at copy speed",
          values=_epilogue_values,
          checks=(says("resolved", "over_spread", ">", 3, "far outside the noise of the repeats",
                       "within a few spreads of the noise"),
                  says("beyond", "ratio_lo", ">=", 1, "at least that in every pair", "less than that in a pair"),
                  states("elementwise_mb", ">", "saved_mb"),
                  says("pace", "elementwise_pct", "<", "near_copy", "short of copy speed: below",
                       "near copy speed: at least")),
          explains="the saving is about the time of the three elementwise kernels fusing removes; the last "
                   "two sentences set their bytes against the bytes fusing saves, and their speed against copy."),
    Claim("naive_from_cache",
          "At n = {n} the naive kernel's loads ask for {requested_gb:.0f} GB; under Nsight Compute DRAM "
          "served {dram_gb:.1f} GB of them ({dram_share:.1%}: {absorbed}). A warp's load asks for 128 B and "
          "touched {sectors:.1f} sectors ({sector_bytes:.0f} B) on average: the load unit merges repeated "
          "addresses before any cache sees them. Its DRAM was {dram_pct:.1f}% busy and its SM {sm_pct:.0f}%: "
          "it waits on load instructions, not on DRAM. It takes {ms:.0f} ms.",
          headline="naive GEMM: DRAM served {dram_share:.1%} of its loads ({absorbed}); SM {sm_pct:.0f}% busy, "
                   "DRAM {dram_pct:.1f}%",
          values=_naive_values,
          checks=(says("absorbed", "dram_share", "<", 0.1, "the load units merge and the caches serve the rest",
                       "the load units and caches serve less than 90%"),
                  states("sector_bytes", "<", 128),
                  states("sm_pct", ">", "dram_pct"))),
]

_ELEMENTWISE = "2-D: 32 x 8 threads, one element each"
_REGISTER_TILED = "2-D grid of 1-D blocks: 256 threads, each 8 x 8 of a 128 x 128 tile of C"
KERNELS = (
    protocol.Kernel("matmul_naive_kernel", "2-D: 16 x 16 threads, one element of C each", block_size=256),
    protocol.Kernel("matmul_tiled_kernel", "2-D: TILE x TILE (16 x 16) threads, one element of C each",
                    block_size=256),
    protocol.Kernel("linear_relu_dropout_tiled_kernel", "as matmul_tiled_kernel, the epilogue fused",
                    block_size=256),
    protocol.Kernel("matmul_register_tiled_2d_kernel",
                    "2-D: 16 x 16 threads, each 4 x 4 of a 64 x 64 tile of C", block_size=256),
    *(protocol.Kernel(name, _REGISTER_TILED, block_size=256) for name in (
        "matmul_register_tiled_kernel", "matmul_register_tiled_capped_kernel",
        "matmul_double_buffered_kernel", "matmul_double_buffered_capped_kernel",
        "linear_relu_dropout_register_tiled_kernel", "linear_relu_dropout_register_tiled_capped_kernel",
        "linear_relu_dropout_double_buffered_kernel", "linear_relu_dropout_double_buffered_capped_kernel")),
    *(protocol.Kernel(name, _ELEMENTWISE, block_size=256)
      for name in ("add_bias_kernel", "relu_kernel", "dropout_kernel")),
)

LAB = protocol.Lab(
    number="04", title="GEMM with a fused epilogue",
    kernels=KERNELS,
    references=("matmul_reference", "linear_relu_dropout_reference"),
    validate=validate,
    benchmarks=benchmarks,
    measurements=(protocol.Measurement(
        "registers", measure_registers,
        "registers, shared memory, spills and occupancy of every kernel (the driver's figures)"),),
    figures=FIGURES,
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
