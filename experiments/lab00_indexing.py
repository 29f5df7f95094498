"""Lab 00 experiments: validate every variant, then put "grid = 2-4x the SM count" to the test.

The claim comes from the seed article. A grid-stride kernel with k blocks per SM is timed
against the one-thread-per-element launch, for k from 1 to 64, on a memory-bound
`out = a * x + b` over 2^26 float32 (512 MiB moved), next to the copy ceiling of the same run
(`grid_size_sweep`, a measurement). The same two launches are declared as a benchmark over n
(`axpb`), which `kernellab profile 00` runs under Nsight Compute for the DRAM bytes Lab 09's
roofline places.

The lab is declared once, in `LAB` at the end (kernellab/course/protocol.py).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.course.claims import Claim, Missing, need, says
from kernellab.gpu import checks, device, timing, traffic
from kernellab.show import plots

GPU_N = 1 << 26
BLOCKS_PER_SM = (1, 2, 4, 8, 16, 32, 64)
BLOCK = 256
A, B = np.float32(1.5), np.float32(-0.25)   # float32, as the kernels declare (a Python float: float64)


def validate(lab, seed: int = 0) -> list[str]:
    """The 2D kernel on a fresh non-zero matrix into a poisoned output (the `axpb` benchmark
    validates lab.VARIANTS, at every size it runs); what was validated."""
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    matrix, bias = checks.nonzero(rng, (5, 45)), checks.nonzero(rng, 45)
    out = checks.poisoned(matrix.shape)
    lab.add_row_bias(cuda.to_device(matrix), cuda.to_device(bias), out=out)
    checks.assert_matches(out, lab.reference_add_row_bias(matrix, bias), rtol=1e-6,
                          what="lab 00 add_row_bias")
    return ["add_row_bias"]


# --- the benchmark: both launches of a*x + b against n --------------------------------------------

def axpb_ledger(name: str, n: int) -> traffic.Ledger:
    """1 read of x and 1 write of out per element: 8 bytes of float32."""
    return traffic.Ledger(name).add(name, "x", reads=n).add(name, "out", writes=n)


def axpb_benchmarks(lab, torch=None) -> list[harness.Benchmark]:
    """`axpb`: each of lab.VARIANTS over n (the grid-stride one at its default of 4 blocks per SM),
    in blocks of BLOCK threads, as the grid sweep launches them (at the launchers' default of 128,
    an H200 ran the one-thread-per-element kernel 1.55x slower: twice the blocks, each as short)."""
    return [harness.Benchmark(
        name="axpb", axis="n (float32 elements)",
        sizes=[1 << k for k in range(10, 27, 2)], sim_sizes=[300], tour_sizes=[1 << 16, GPU_N],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
        reference=lambda inputs: lab.reference_axpb(inputs["x"], A, B),
        flops=lambda n: 2.0 * n,                       # a multiply and an add per element
        variants=[harness.Variant(name, lambda d, out, run=run: run(d["x"], A, B, out=out, block=BLOCK), why,
                                  ledger=lambda n, name=name: axpb_ledger(name, n))
                  for name, (run, why) in lab.VARIANTS.items()])]


# --- the measurement: grid size against bandwidth (GPU only) ------------------------------------

def measure_grid_sweep(lab) -> dict:
    """GB/s of each launch shape against the copy ceiling measured in the same run (GPU only)."""
    cuda = device.cuda()
    facts = device.facts()
    x = cuda.to_device(np.ones(GPU_N, dtype=np.float32))
    out = cuda.device_array(GPU_N, dtype=np.float32)
    moved = 2 * GPU_N * 4
    ceiling = timing.ceilings()["copy"]
    rows = []

    def measure(label, blocks, fn):
        t = timing.time_gpu(fn, warmup=5, reps=50)
        gbps = moved / (t.median_ms * 1e-3) / 1e9
        rows.append({"variant": label, "blocks": blocks, **t.as_dict(), "gbps": gbps,
                     "pct_of_copy": 100 * gbps / ceiling["gbps"]})
        print(f"{label:<28} {blocks:>8} blocks  {t}  {gbps:7.0f} GB/s "
              f"({100 * gbps / ceiling['gbps']:.0f}% of copy)")

    full_grid = lab.blocks_for(GPU_N, BLOCK)
    measure("one_thread_per_element", full_grid, lambda: lab.axpb(x, A, B, out=out, block=BLOCK))
    for k in BLOCKS_PER_SM:
        blocks = k * facts.sm_count
        measure(f"grid_stride {k}x SMs", blocks,
                lambda blocks=blocks: lab.axpb_grid_stride(x, A, B, out=out, blocks=blocks, block=BLOCK))
    return {"provenance": reference.provenance(), "n": GPU_N, "block": BLOCK,
            "bytes_moved": moved, "copy_ceiling": ceiling, "rows": rows}


def draw_grid_sweep(lab, records: dict, figures_dir: Path) -> Path:
    """Bandwidth against blocks per SM, the article's 2-4x band shaded, the full grid as a line."""
    record = records["grid_size_sweep"]
    rows = record["rows"]
    sm = record["provenance"]["sm_count"]
    stride = [r for r in rows if r["variant"].startswith("grid_stride")]
    full = next(r for r in rows if r["variant"] == "one_thread_per_element")
    fig, (ax,) = plots.new_figure(f"out = a*x + b, n = 2^{int(np.log2(record['n']))} float32: "
                                  f"grid size vs bandwidth", record)
    ax.plot([r["blocks"] / sm for r in stride], [r["gbps"] for r in stride], "o-",
            label="grid-stride, k blocks per SM")
    ax.axhline(full["gbps"], color="C1", ls="--",
               label=f"one thread per element ({full['blocks']} blocks)")
    ax.axhline(record["copy_ceiling"]["gbps"], color="k", ls=":", label="copy ceiling (same run)")
    ax.axvspan(2, 4, color="C2", alpha=0.15, label="article: grid = 2-4x SMs")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("blocks per SM (k)")
    ax.set_ylabel("GB/s (read + write)")
    ax.legend(fontsize="small")
    return plots.save(fig, "lab00_grid_size", figures_dir)


def key_figure(lab, records: dict) -> str:
    values = _grid_values(records)
    return (f"grid-stride best at {values['best_k']}x SMs ({values['best']:.0f}% of copy); "
            f"4x SMs gives {values['at4']:.0f}%, full grid {values['full']:.0f}%")


# --- claims: what the discussion says, checked against the records -----------------------------

def grid_stride_pct(records: dict) -> dict[int, float]:
    """{blocks per SM: % of the copy ceiling} of the grid-stride launches in the sweep."""
    sweep = need(records, "grid_size_sweep")
    sm = sweep["provenance"]["sm_count"]
    return {r["blocks"] // sm: r["pct_of_copy"] for r in sweep["rows"]
            if r["variant"].startswith("grid_stride")}


def one_thread_per_element(records: dict) -> dict:
    rows = [r for r in need(records, "grid_size_sweep", "rows") if r["variant"] == "one_thread_per_element"]
    if not rows:
        raise Missing("grid_size_sweep has no one_thread_per_element row")
    return rows[0]


def _grid_values(records):
    pct = grid_stride_pct(records)
    best_k = max(pct, key=pct.get)
    full = {k: v for k, v in pct.items() if k >= 8}
    return {"at2": pct[2], "at4": pct[4], "best_k": best_k, "best": pct[best_k],
            "lo": min(full.values()), "hi": max(full.values()),
            "full": one_thread_per_element(records)["pct_of_copy"],
            "blocks": one_thread_per_element(records)["blocks"],
            "at4_of_best": 100 * pct[4] / pct[best_k], "spread": max(full.values()) - min(full.values())}


def _ceiling_values(records):
    """The best launch against the copy ceiling and against the fastest Numba copy kernel (a
    copy_<loads>x<type> method) measured beside it."""
    ceiling = need(records, "grid_size_sweep", "copy_ceiling")
    numba = {m: g for m, g in ceiling["by_method_gbps"].items() if m.startswith("copy_")}
    fastest = max(numba, key=numba.get)
    return {**_grid_values(records), "ceiling_method": ceiling["method"], "ceiling_gbps": ceiling["gbps"],
            "numba_copy": 100 * numba[fastest] / ceiling["gbps"],
            "numba_copy_method": fastest}


CLAIMS = [
    Claim("grid_2_4x_sms",
          "A grid-stride grid of 2x and 4x the SM count reaches {at2:.0f}% and {at4:.0f}% of the copy "
          "ceiling measured in the same run; the best grid ({best_k}x SMs) reaches {best:.0f}%, so 4x "
          "SMs gets {at4_of_best:.0f}% of the best grid's speed: for a streaming kernel the article's "
          "2-4x SMs {verdict}.",
          headline="grid-stride at 2x and 4x SMs: {at2:.0f}% and {at4:.0f}% of copy; best grid ({best_k}x SMs): {best:.0f}%",
          values=_grid_values,
          checks=(says("verdict", "at4_of_best", "<", 90, "leaves more than a tenth of the reachable bandwidth "
                       "unused", "comes within a tenth of the best grid"),),
          article="grid"),
    Claim("full_sm_levels_off",
          "From 8 blocks of 256 threads per SM on (every thread slot of an SM filled) the grid size "
          "{levels}: {lo:.1f}-{hi:.1f}% of copy at 8x to 64x SMs, a spread of {spread:.1f} points.",
          values=_grid_values,
          checks=(says("levels", "spread", "<", 5, "stops mattering (less than 5 points apart)",
                       "still matters (5 points or more apart)"),)),
    Claim("one_thread_per_element",
          "One thread per element ({blocks:,} blocks) reaches {full:.0f}% of copy, {than} the best "
          "grid-stride launch ({best:.0f}%): {so}.",
          values=_grid_values,
          checks=(says("than", "full", "<=", "best", "no more than", "more than"),
                  says("so", "full", "<=", "best", "a grid-stride loop costs nothing once the SMs are full",
                       "the grid-stride loop costs something even with the SMs full"))),
    Claim("best_launch_below_copy",
          "Even the best launch stops at {best:.0f}% of the copy ceiling, the fastest copy of the same "
          "run ({ceiling_method}, {ceiling_gbps:.0f} GB/s): {below} the {numba_copy:.0f}% that the fastest "
          "Numba copy kernel of that run reaches ({numba_copy_method}: several loads in flight per thread "
          "before it stores).",
          values=_ceiling_values,
          checks=(says("below", "best", "<", "numba_copy", "below", "at or above"),),
          explains="the ceiling is the driver's memcpy, the fastest of the copies measured in the same run "
                   "(the record's copy_ceiling.method and by_method_gbps); the Numba copy kernels, which keep "
                   "2-4 loads per thread in flight before they store, come closest to it, while this kernel has one 4-byte load "
                   "in flight per thread, too few bytes in flight to cover the memory latency (Little's "
                   "law: bandwidth x latency = bytes in flight). Lab 02's 4-per-thread variant and Lab "
                   "06's occupancy probes measure it."),
]


LAB = protocol.Lab(
    number="00", title="thread indexing and launch configuration",
    kernels=(protocol.Kernel("axpb_kernel", "1-D: ceil(n / block) blocks, one element per thread"),
             protocol.Kernel("add_row_bias_kernel", "2-D: x along the columns, y along the rows, "
                                                    "one element per thread"),
             protocol.Kernel("axpb_grid_stride_kernel", "1-D: a fixed grid (default 4 blocks per "
                                                        "SM), each thread loops in grid-size steps")),
    references=("reference_axpb", "reference_add_row_bias"),
    validate=validate,
    benchmarks=axpb_benchmarks,
    measurements=(protocol.Measurement(
        "grid_size_sweep", measure_grid_sweep,
        "a grid-stride grid of 1-64 blocks per SM against one thread per element, 2^26 float32"),),
    figures=(protocol.Figure("lab00_grid_size", draw_grid_sweep, needs=("grid_size_sweep",)),),
    claims=CLAIMS,
    key_figure=key_figure,
)
