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
from kernellab.course.claims import Claim, Missing, need, profile_rows_beside, repeats_of, says, states
from kernellab.gpu import checks, device, timing, traffic
from kernellab.show import plots

from experiments.lab03_constants import BLOCK as LAB03_BLOCK
from experiments.lab03_measure import task_sizes

NUMBER = "00"
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
    fig, (ax,) = plots.new_figure(f"out = a*x + b, n = 2^{int(np.log2(record['n']))} float32 in blocks of "
                                  f"{record['block']}: grid size vs bandwidth", record)
    ax.plot([r["blocks"] / sm for r in stride], [r["gbps"] for r in stride], "o-",
            label="grid-stride, k blocks per SM")
    ax.axhline(full["gbps"], color="C1", ls="--",
               label=f"one thread per element ({full['blocks']} blocks)")
    ax.axhline(record["copy_ceiling"]["gbps"], color="k", ls=":", label="copy ceiling (same run)")
    ax.axvspan(2, 4, color="C2", alpha=0.15, label="article: grid = 2-4x SMs")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("blocks per SM (k)")
    ax.set_ylabel("GB/s (read + write)")
    ax.legend(fontsize="small")
    return plots.save(fig, "lab00_grid_size", figures_dir)


def key_figure(lab, records: dict) -> str:
    values = _grid_values(records)
    return (f"grid-stride best at {values['best_k']}x SMs ({values['best']:.0f}% of copy); "
            f"4x SMs gives {values['at4']:.0f}%, full grid {values['full']:.0f}%")


# --- claims: what the discussion says, checked against the records -----------------------------

def _median(values) -> float:
    return float(np.median(list(values)))


def grid_stride_pct(records: dict) -> dict[int, list[float]]:
    """{blocks per SM: its % of the copy ceiling in each repeat} of the grid-stride launches."""
    found: dict[int, list[float]] = {}
    for sweep in repeats_of(records, "grid_size_sweep", NUMBER):
        sm = sweep["provenance"]["sm_count"]
        for r in sweep["rows"]:
            if r["variant"].startswith("grid_stride"):
                found.setdefault(r["blocks"] // sm, []).append(r["pct_of_copy"])
    return found


def one_thread_per_element(records: dict) -> list[dict]:
    """The one-thread-per-element row of each repeat."""
    rows = [r for sweep in repeats_of(records, "grid_size_sweep", NUMBER) for r in sweep["rows"]
            if r["variant"] == "one_thread_per_element"]
    if not rows:
        raise Missing("grid_size_sweep has no one_thread_per_element row")
    return rows


def _grid_values(records):
    """Medians over the repeats, and the range of the 4x-SMs figure the prediction asks for."""
    pct = grid_stride_pct(records)
    median = {k: _median(v) for k, v in pct.items()}
    best_k = max(median, key=median.get)
    full = {k: v for k, v in median.items() if k >= 8}
    full_rows = one_thread_per_element(records)
    return {"at2": median[2], "at4": median[4], "at4_lo": min(pct[4]), "at4_hi": max(pct[4]),
            "repeats": len(pct[4]), "best_k": best_k, "best": median[best_k],
            "lo": min(full.values()), "hi": max(full.values()), "spread": max(full.values()) - min(full.values()),
            "full": _median(r["pct_of_copy"] for r in full_rows), "blocks": full_rows[0]["blocks"],
            "at4_of_best": 100 * median[4] / median[best_k]}


def _profiled(lab: str, benchmark: str, variant: str, kernel: str) -> dict:
    """The largest size's Nsight Compute row of `kernel` in `variant`, or Missing."""
    rows = [r for r in reference.profile_rows(lab) if (r["benchmark"], r["variant"], r["kernel"]) ==
            (benchmark, variant, kernel)]
    if not rows:
        raise Missing(f"no Nsight Compute row of lab {lab} {benchmark}/{variant}/{kernel}")
    return max(rows, key=lambda r: r["size"])


def _lab03_pct(records: dict, variant: str) -> float:
    """Lab 03's `variant` at its largest size, % of copy, the median of its repeats (GPU time only)."""
    pct = []
    for result in repeats_of(need(records, "lab03"), "tasks_gpu", "03"):
        largest = max(result["sizes"])
        pct += [r["pct_of_copy"] for r in result["rows"] if r["variant"] == variant and r["size"] == largest]
    if not pct:
        raise Missing(f"lab03 tasks_gpu has no {variant} row")
    return _median(pct)


LOAD_BYTES = 4       # one float32 per thread
WIDE_LOADS = 4       # Lab 03's horizontal_4_per_thread: elements per thread (a load each; the add: two)


def lab03_blocks(n: int, per_thread: int) -> int:
    """Blocks of Lab 03's merged launch at n, each of its threads on `per_thread` elements."""
    return sum(-(-size // (per_thread * LAB03_BLOCK)) for size in task_sizes(n))


def bytes_in_flight(records):
    """Little's law on two kernels of one shape (one 4-byte load, one store per thread) that
    Nsight Compute profiled: this lab's in blocks of 256, Lab 03's scale_kernel in blocks of 128.
    A thread's bytes in flight: its one load, waiting. Read rate: DRAM bytes read / GPU time.
    The profiles are recorded ones, so the sweep must come from their GPU: a live sweep on another
    GPU is Missing here, and the claims read the reference's sweep instead."""
    sweep = need(records, "grid_size_sweep")
    gpu = sweep["provenance"]["gpu"]
    profile_rows_beside(sweep, "00")
    facts = next((f for f in device.REFERENCE_DEVICES.values() if f.name == gpu), None)
    if facts is None:
        raise Missing(f"no published limits of the {gpu} in kernellab.gpu.device")
    slots = sweep["provenance"]["sm_count"] * facts.max_threads_per_sm
    wide, narrow = (_profiled("00", "axpb", "one_thread_per_element", "axpb_kernel"),
                    _profiled("03", "tasks", "separate", "scale_kernel"))

    def in_flight(row):           # (MB in flight, TB/s read, us per load)
        mb = row["achieved_occupancy_pct"] / 100 * slots * LOAD_BYTES / 1e6
        tbps = row["dram_bytes_read"] / row["gpu_time_ns"] / 1e3
        return mb, tbps, mb / tbps
    mb256, read256, lat256 = in_flight(wide)
    mb128, read128, lat128 = in_flight(narrow)
    ceilings = [s["copy_ceiling"] for s in repeats_of(records, "grid_size_sweep", NUMBER)]
    ceiling = _median(c["gbps"] for c in ceilings) / 1e3                  # TB/s read plus written
    ceiling_read = ceiling / 2                                            # a copy reads half its bytes
    latency = max(lat256, lat128)
    lab03_n = max(max(r["sizes"]) for r in repeats_of(need(records, "lab03"), "tasks_gpu", "03"))
    return {"occ256": wide["achieved_occupancy_pct"], "occ128": narrow["achieved_occupancy_pct"],
            "mb256": mb256, "mb128": mb128, "read256": read256, "read128": read128,
            "lat256": lat256, "lat128": lat128, "lat_ratio": max(lat256, lat128) / min(lat256, lat128),
            "latency": latency, "ceiling": ceiling, "ceiling_read": ceiling_read, "needed": ceiling_read * latency,
            "slots": slots, "max4": slots * LOAD_BYTES / 1e6,
            "pct128": _lab03_pct(records, "horizontal"), "pct256": _lab03_pct(records, "horizontal_block256"),
            "pct4": _lab03_pct(records, "horizontal_4_per_thread"), "lab03_n": lab03_n,
            "blocks1": lab03_blocks(lab03_n, 1), "blocks4": lab03_blocks(lab03_n, WIDE_LOADS),
            "wide_loads": WIDE_LOADS, "add_loads": 2 * WIDE_LOADS,   # the add reads two arrays
            "gpu": gpu}


CLAIMS = [
    Claim("grid_2_4x_sms",
          "A grid-stride grid of 2x and 4x the SM count, in blocks of 256, reaches {at2:.0f}% and {at4:.0f}% of the copy "
          "ceiling (medians of {repeats} repeats; 4x: {at4_lo:.1f}-{at4_hi:.1f}%), the best grid ({best_k}x "
          "SMs) {best:.0f}%. At 4x SMs in blocks of 256 this memory-bound kernel gets {at4_of_best:.0f}% of the best grid's "
          "speed: the article's advice {verdict}.",
          headline="the article's grid of 2-4x SMs, in blocks of 256: {at2:.0f}% and {at4:.0f}% of copy, the best grid "
                   "({best_k}x SMs) {best:.0f}%: the advice {verdict}",
          values=_grid_values,
          checks=(says("verdict", "at4_of_best", "<", 90, "leaves bandwidth unused in blocks of 256",
                       "comes within a tenth of the best grid in blocks of 256"),),
          article="grid"),
    Claim("full_sm_levels_off",
          "From 8 blocks of 256 threads per SM on (2,048 threads, at least as many as an SM holds: every thread "
          "slot filled), the grid size "
          "{levels}: {lo:.1f}-{hi:.1f}% of copy from 8x to 64x SMs, {spread:.1f} points apart.",
          headline="from 8 blocks of 256 per SM on (at least as many threads as an SM holds), the grid size {levels}",
          values=_grid_values,
          checks=(says("levels", "spread", "<", 5, "stops mattering", "still matters"),)),
    Claim("one_thread_per_element",
          "One thread per element ({blocks:,} blocks of 256) reaches {full:.0f}% of copy, {than} the "
          "{best:.0f}% of the best grid-stride launch ({best_k} blocks of 256 per SM looping over the same data): "
          "{so}.",
          headline="one thread per element: {full:.0f}% of copy, {than} the best grid-stride launch ({best:.0f}%)",
          values=_grid_values,
          checks=(says("than", "full", "<", "best", "below", "at or above"),
                  says("so", "full", "<", "best", "with the SMs full, fewer, long-lived blocks are faster",
                       "a grid-stride loop gains nothing once the SMs are full"))),
    Claim("more_resident_threads",
          "Nsight Compute found {occ256:.0f}% of the thread slots occupied for this kernel in blocks of 256, "
          "and {occ128:.0f}% for a kernel of the same shape (one 4-byte load and one store per thread: Lab 03's "
          "scale) in blocks of 128: about {mb256:.2f} against {mb128:.2f} MB of loads in flight (estimated "
          "from the occupancy), reading "
          "{read256:.2f} against {read128:.2f} TB/s. Little's law gives each load {lat256:.2f} and "
          "{lat128:.2f} us ({lat_ratio:.2f}x apart): {same}.",
          headline="more thread slots kept filled, more bytes in flight: Lab 03's scale in blocks of 128, about "
                   "{mb128:.2f} MB in flight (estimated from occupancy), read {read128:.2f} TB/s; this lab's axpb in "
                   "blocks of 256, {mb256:.2f} MB, {read256:.2f} TB/s",
          values=bytes_in_flight,
          checks=(states("occ256", ">", "occ128"),
                  says("same", "lat_ratio", "<", 1.5, "one memory latency, fed more or fewer bytes",
                       "not one latency: something besides the bytes in flight differs")),
          explains="bytes in flight = bandwidth x latency (Little's law), with each resident thread's one "
                   "4-byte load counted as waiting all the time. Both block sizes let an SM fill every thread "
                   "slot; the measured (achieved) occupancy is lower, the more so with the twice as many "
                   "blocks of 128"),
    Claim("block_256_over_128",
          "Lab 03's merged kernel runs four tasks (scale, add, relu, square) in one launch, one element per "
          "thread (add loads two values, the others one), on {lab03_n:,} elements in the largest task (the others "
          "1/2, 1/4 and 1/8 of it): {pct128:.0f}% of copy "
          "in blocks of 128 and {pct256:.0f}% in blocks of 256, half as many blocks (medians of the repeats, GPU "
          "time alone): {gain}.",
          headline="Lab 03's merged kernel, one element per thread, in blocks of 128: {pct128:.0f}% of copy; in "
                   "blocks of 256: {pct256:.0f}% ({gain})",
          values=bytes_in_flight,
          checks=(says("gain", "pct256", ">", "pct128", "fewer, larger blocks are faster",
                       "fewer, larger blocks are no faster"),)),
    Claim("wider_loads",
          "At the {latency:.2f} us a load took above, reading at the copy ceiling's read rate ({ceiling_read:.2f} TB/s, "
          "half its {ceiling:.2f} TB/s) needs "
          "about {needed:.2f} MB in flight, {short} one 4-byte load in each of the GPU's {slots:,} thread slots "
          "holds ({max4:.2f} MB). In one launch of blocks of 128 (Lab 03), {wide_loads} elements per thread "
          "({wide_loads} loads before the first store; the add's threads, {add_loads}), in a quarter of the blocks ({blocks4:,} against {blocks1:,}), reach {pct4:.0f}% of "
          "copy, against {pct128:.0f}% with one element per thread. The record changes both at once, so it "
          "cannot say which of the two gives the gain. The {needed:.2f} MB is an estimate, not a bound: the "
          "latency counts every resident thread as always waiting on its load, which overstates it; it was read at "
          "lower rates than the copy ceiling's, where memory answers sooner, which understates it.",
          headline="reading at the copy ceiling's read rate needs about {needed:.2f} MB in flight (an estimate), {short} 4-byte loads in "
                   "every thread slot hold ({max4:.2f} MB); {wide_loads} elements per thread in a quarter of the "
                   "blocks: {pct4:.0f}% of copy against {pct128:.0f}%",
          values=bytes_in_flight,
          checks=(says("short", "max4", "<", "needed", "more than", "no more than"),
                  states("pct4", ">", "pct128"))),
]


def takeaway() -> str:
    """The notebook's last cell: the key figure and four lines, from the records the claims read."""
    from kernellab.course import claims
    grid = _grid_values(claims.sources(NUMBER))
    flight, _ = claims.figures_of(NUMBER, ["more_resident_threads"])   # the reference's, off its GPU
    return "\n".join([
        f"What to take away (key figure: a grid of 4 blocks per SM reaches {grid['at4']:.0f}% of the copy "
        f"ceiling, the best grid ({grid['best_k']}x SMs) {grid['best']:.0f}%)",
        "- A thread finds its element from its block's index and its own; a guard idles the threads past the end.",
        "- A warp's 32 threads should touch neighbouring addresses: then the access is coalesced.",
        f"- A memory-bound kernel needs bytes in flight: about {flight['needed']:.2f} MB (an estimate) to read at "
        f"the {flight['gpu']}'s copy ceiling.",
        f"- Fill the thread slots, or load more per thread: {flight['wide_loads']} elements per thread in a quarter "
        f"of the blocks reached {flight['pct4']:.0f}% of copy (Lab 03, on the {flight['gpu']}).",
    ])


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
