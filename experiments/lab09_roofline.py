"""Lab 09 experiments: where the time goes.

1. Coalescing. Each access pattern of the lab (strided, coalesced, naive and tiled transpose) is
   run with the simulator's sector model (`sector_meter`): for every warp-wide request, the
   32-byte sectors its 32 lanes touch. On a GPU the same figure is Nsight Compute's
   l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / ..._requests_..., in the profile rows that
   `kernellab profile 09` records; where none are recorded, this module says so.
2. The roofline of every lab's main kernels (`MAIN_KERNELS`, declared here as data) on one H200
   plot: intensity from DRAM bytes (profile rows), attained FLOP/s from the timings of the
   records (benchmark rows, or a timeline's kernel alone), the roof from the ceilings of the same
   record. Where no profile rows are recorded the point uses the requested bytes (the ledger) and
   the label says so: never a DRAM figure that was not measured. A second panel shows the small
   sizes, where the launch floor, not the roof, bounds a kernel.
3. The verdict on the seed article's closing advice (compute-bound work gains from aggressive
   fusion, memory-bound work needs careful occupancy), as claims (`CLAIMS`) read from the same
   points.

Lab 09's own scale_rows points join the plot from its `scale_rows` record: live on a GPU (the
tour and bench time it, marked "live"), recorded in the simulator (marked "recorded"); the other
labs' points come from their recorded data (a claim reads them live where this process measured
them), and the figure says so. Profile rows are read through `kernellab.course.reference` (`profile_rows`,
`variant_dram_bytes`), the ceilings from each record's "ceilings" (`timing.ceilings` of its run).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import string
import textwrap
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
from matplotlib import colormaps

from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.course.claims import (Claim, Missing, course_solution, need, repeats_of, says, states,
                                     target)
from kernellab.gpu import checks, device, timing, traffic
from kernellab.gpu.traffic import Ledger
from kernellab.show import plots

NUMBER = "09"
SIM_SHAPE = (35, 45)             # rows, cols: neither a multiple of 32, not square
GPU_SHAPE = (8192, 8192)         # 256 MiB per matrix: 4x the 60 MB L2 (the simulator's shape is the awkward one)
SIM_SIZES = [SIM_SHAPE[0]]       # the benchmarks' sweep axis is rows (cols follow the shape)
GPU_SIZES = [GPU_SHAPE[0]]
SCALE_ROWS_VARIANTS = ("scale_rows_strided", "scale_rows", "scale_rows_wide")
TRANSPOSE_VARIANTS = ("transpose_naive", "transpose", "transpose_wide")
TUNED_TARGET_PCT = 85.0          # the tuned kernels: at least this % of their mix's ceiling (issue 27)


# --- 1. the sector model (simulator) -------------------------------------------------------------

@dataclasses.dataclass
class Sectors:
    """Warp-wide requests to one array and the 32-byte sectors they touched."""

    name: str
    load_requests: int = 0
    load_sectors: int = 0
    store_requests: int = 0
    store_sectors: int = 0

    @property
    def per_load(self) -> float:
        return self.load_sectors / self.load_requests if self.load_requests else 0.0

    @property
    def per_store(self) -> float:
        return self.store_sectors / self.store_requests if self.store_requests else 0.0


@contextlib.contextmanager
def sector_meter(**named_arrays):
    """Count, per named array, the warp-wide requests and the 32-byte sectors they touch: the
    traffic meter's warp model (`kernellab.gpu.traffic`, which groups lanes by instruction site
    and occurrence), summed over each array's load sites and store sites. This is what Nsight
    Compute's sectors-per-request measures on a GPU; the simulator has no caches, so DRAM bytes
    are not modelled."""
    if not device.is_simulator():
        raise RuntimeError("the sector model runs in Numba's simulator; on a GPU read the profile "
                           "rows (`kernellab profile 09`: l1tex sectors per request)")
    counts = {name: Sectors(name) for name in named_arrays}
    with traffic.meter(trace=("global",), **named_arrays) as count:
        yield counts
    for site in count.coalescing:
        if site.array in counts:
            entry, kind = counts[site.array], site.site.kind
            setattr(entry, f"{kind}_requests", getattr(entry, f"{kind}_requests") + site.requests)
            setattr(entry, f"{kind}_sectors", getattr(entry, f"{kind}_sectors") + site.sectors)


# --- the lab's access patterns as benchmarks ------------------------------------------------------

def _shape(rows: int) -> tuple[int, int]:
    return (rows, SIM_SHAPE[1] if device.is_simulator() else GPU_SHAPE[1])


def scale_rows_ledger(rows: int) -> Ledger:
    """Per element: 1 read of x, 1 of scale, 1 write of out (the same for every pattern); scale's
    reads touch one element per row, re-read from cache (so the ceiling is the copy's mix)."""
    n = rows * _shape(rows)[1]
    return Ledger("scale_rows").add("scale_rows", "x", reads=n) \
        .add("scale_rows", "scale", reads=n, distinct=rows).add("scale_rows", "out", writes=n)


def scale_rows_wide_ledger(lab):
    """The tuned scale_rows: x and out as the others, scale read once per thread (its threads per
    row: whole blocks of WIDE * WIDE_BLOCK columns), still one element per row."""
    def ledger(rows: int) -> Ledger:
        cols = _shape(rows)[1]
        per_block = lab.WIDE * lab.WIDE_BLOCK
        threads = rows * -(-cols // per_block) * lab.WIDE_BLOCK
        return Ledger("scale_rows").add("scale_rows", "x", reads=rows * cols) \
            .add("scale_rows", "scale", reads=threads, distinct=rows).add("scale_rows", "out", writes=rows * cols)
    return ledger


def transpose_ledger(rows: int) -> Ledger:
    n = rows * _shape(rows)[1]
    return Ledger("transpose").add("transpose", "x", reads=n).add("transpose", "out", writes=n)


def access_pattern_benchmarks(lab, torch=None) -> list[harness.Benchmark]:
    """The lab's two pairs: strided against coalesced scaling, naive against tiled transpose,
    each checked against the lab's float64 reference (no torch baseline: the lesson is the
    access pattern, not a library)."""
    sizes = dict(sizes=GPU_SIZES, sim_sizes=SIM_SIZES)

    def matrix(rng, rows):
        return {"x": checks.nonzero(rng, _shape(rows))}

    def scaled(rng, rows):
        return {**matrix(rng, rows), "scale": checks.nonzero(rng, rows)}

    def variant(name, call, ledger):
        run, why = lab.VARIANTS[name]
        return harness.Variant(name, lambda d, out, run=run: call(run, d, out), why, ledger=ledger)

    scale = harness.Benchmark(
        name="scale_rows", axis="rows", **sizes, make_inputs=scaled,
        reference=lambda h: lab.scale_rows_reference(h["x"], h["scale"]),
        variants=[variant(name, lambda run, d, out: run(d["x"], d["scale"], out=out),
                          scale_rows_wide_ledger(lab) if name == "scale_rows_wide" else scale_rows_ledger)
                  for name in SCALE_ROWS_VARIANTS],
        flops=lambda rows: float(rows * _shape(rows)[1]))        # one multiply per element
    transpose = harness.Benchmark(
        name="transpose", axis="rows", **sizes, make_inputs=matrix,
        reference=lambda h: lab.transpose_reference(h["x"]),
        variants=[variant(name, lambda run, d, out: run(d["x"], out=out), transpose_ledger)
                  for name in TRANSPOSE_VARIANTS])
    return [scale, transpose]


def access_patterns(lab, seed: int = 0) -> list[dict]:
    """Each pattern of lab.VARIANTS at SIM_SHAPE into a poisoned output, validated against the
    lab's float64 reference; in the simulator with its sectors per request for the loads of its
    input and the stores of its output (None on a GPU, where the profile rows measure them)."""
    cuda = device.cuda()
    rng = np.random.default_rng(seed)
    x = checks.nonzero(rng, SIM_SHAPE)
    scale = checks.nonzero(rng, SIM_SHAPE[0])
    d_x, d_flat, d_scale = cuda.to_device(x), cuda.to_device(x.ravel()), cuda.to_device(scale)
    # pattern: (its input, how to call it, the expected output)
    calls = {
        "scale_rows_strided": (d_x, lambda out: lab.scale_rows_strided(d_x, d_scale, out=out),
                               lab.scale_rows_reference(x, scale)),
        "scale_rows": (d_x, lambda out: lab.scale_rows(d_x, d_scale, out=out), lab.scale_rows_reference(x, scale)),
        "copy4_consecutive": (d_flat, lambda out: lab.copy4_consecutive(d_flat, out=out),
                              lab.copy_reference(x.ravel())),
        "transpose_naive": (d_x, lambda out: lab.transpose_naive(d_x, out=out), lab.transpose_reference(x)),
        "transpose": (d_x, lambda out: lab.transpose(d_x, out=out), lab.transpose_reference(x)),
        "scale_rows_wide": (d_x, lambda out: lab.scale_rows_wide(d_x, d_scale, out=out),
                            lab.scale_rows_reference(x, scale)),
        "transpose_wide": (d_x, lambda out: lab.transpose_wide(d_x, out=out), lab.transpose_reference(x)),
    }
    counted = device.is_simulator()
    rows = []
    for name, (_launcher, why) in lab.VARIANTS.items():
        source, call, expected = calls[name]
        out = checks.poisoned(expected.shape)
        with sector_meter(x=source, out=out) if counted else contextlib.nullcontext() as sectors:
            call(out)
        checks.assert_matches(out, expected, rtol=1e-6, what=f"lab 09 {name}")
        rows.append({"pattern": name, "why": why,
                     "x_sectors_per_load": sectors["x"].per_load if counted else None,
                     "out_sectors_per_store": sectors["out"].per_store if counted else None,
                     "x_load_requests": sectors["x"].load_requests if counted else None})
    return rows


@functools.lru_cache(maxsize=4)
def _patterns(lab, seed: int) -> tuple[dict, ...]:
    """access_patterns once per lab module and seed: validate and the tour's key line share it."""
    return tuple(access_patterns(lab, seed))


def pattern_table(rows) -> str:
    lines = [f"{'pattern':<20} {'load requests':>13} {'sectors/load':>13} {'sectors/store':>14}  why"]
    lines += [f"{r['pattern']:<20} {r['x_load_requests']:>13} {r['x_sectors_per_load']:>13.2f} "
              f"{r['out_sectors_per_store']:>14.2f}  {r['why']}" for r in rows]
    return "\n".join(lines)


# --- 2. the roofline of every lab -----------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class MainKernel:
    """A lab's main kernel as the roofline places it: which record, variant and size, and its FLOPs."""

    label: str
    lab: str
    record: str                       # the record name in data/reference/h200/labNN.json
    variant: str
    size: int | None                  # the sweep value (None: the record has one size)
    flops: Callable[[int], float] | None   # FLOPs per call at `size` (None: the record's GFLOP/s x time)
    counted: str                      # how the FLOPs were counted
    compulsory_bytes: Callable[[int], int] | None = None   # where the record has no ledger
    fallback: MainKernel | None = None   # placed instead while `record` awaits its GPU run


ELEMENTWISE = 1 << 26
AXPB_SWEEP = MainKernel("00 axpb", "00", "grid_size_sweep", "one_thread_per_element", ELEMENTWISE,
                        lambda n: 2.0 * n, "a*x + b: 2 per element")
FMA_SWEEP = MainKernel("06 FMA probe", "06", "occupancy_vs_speed", "compute_bound_ilp4", None, None,
                       "from the record's GFLOP/s and time")
AXPY_SWEEP = MainKernel("06 axpy probe", "06", "occupancy_vs_speed", "memory_bound_ilp4", None, None,
                        "from the record's GFLOP/s and time")
BUSY_ALONE = MainKernel("07 busy kernel", "07", "concurrency", "fills_gpu", None, None,
                        "a*v + b per iteration: 2 x iters per thread (the record's kernel alone)")


def busy_iters() -> int:
    """Lab 07's busy benchmark's iterations per element, read from its declaration."""
    return protocol.experiment("07").BENCH_ITERS


MAIN_KERNELS = (
    MainKernel("00 axpb", "00", "axpb", "one_thread_per_element", ELEMENTWISE, lambda n: 2.0 * n,
               "a*x + b: 2 per element", fallback=AXPB_SWEEP),
    MainKernel("01 scale", "01", "scale_one_kernel", "scale", ELEMENTWISE, lambda n: 1.0 * n, "a*x: 1 per element"),
    MainKernel("02 chain unfused", "02", "chain", "unfused", ELEMENTWISE, lambda n: 5.0 * n,
               "x*w, +b, relu, dropout scale, +r: 5 per element"),
    MainKernel("02 chain fused", "02", "chain", "fused", ELEMENTWISE, lambda n: 5.0 * n, "as unfused"),
    MainKernel("04 GEMM tiled", "04", "matmul", "tiled", 4096, lambda n: 2.0 * n**3, "2 n^3", lambda n: 3 * n * n * 4),
    MainKernel("04 GEMM register-tiled", "04", "matmul", "register_tiled", 4096, lambda n: 2.0 * n**3, "2 n^3",
               lambda n: 3 * n * n * 4),
    MainKernel("04 GEMM step: no bounds checks", "04", "matmul", "interior", 4096, lambda n: 2.0 * n**3, "2 n^3",
               lambda n: 3 * n * n * 4),
    MainKernel("04 GEMM step: 16-byte loads", "04", "matmul", "vector", 4096, lambda n: 2.0 * n**3, "2 n^3",
               lambda n: 3 * n * n * 4),
    MainKernel("04 GEMM step: unrolled k loop", "04", "matmul", "unrolled", 4096, lambda n: 2.0 * n**3, "2 n^3",
               lambda n: 3 * n * n * 4),
    MainKernel("04 GEMM step: warp tiles", "04", "matmul", "warp_tiled", 4096, lambda n: 2.0 * n**3, "2 n^3",
               lambda n: 3 * n * n * 4),
    MainKernel("04 GEMM bk16", "04", "matmul", "bk16", 4096, lambda n: 2.0 * n**3, "2 n^3",
               lambda n: 3 * n * n * 4),
    MainKernel("04 GEMM step: double-buffered bk16", "04", "matmul", "bk16_double_buffered", 4096,
               lambda n: 2.0 * n**3, "2 n^3", lambda n: 3 * n * n * 4),
    MainKernel("05 softmax fused", "05", "softmax", "fused", 8192, lambda cols: 5.0 * 8192 * cols,
               "max, subtract, exp, sum, divide: 5 per element of 8192 rows"),
    MainKernel("05 softmax vectorised", "05", "softmax_shapes", "vector_512x16", 8192,
               lambda cols: 5.0 * 8192 * cols, "as fused (solution side: 16-byte accesses, exp2)"),
    MainKernel("05 layernorm fused", "05", "layernorm", "fused", 8192, lambda cols: 8.0 * 8192 * cols,
               "sum, square-sum (2), subtract, multiply, scale, shift: 8 per element"),
    MainKernel("06 FMA probe", "06", "compute_probe", "compute_bound_ilp4", 1 << 24, None,
               "the benchmark's own count (GFLOP/s x time)", fallback=FMA_SWEEP),
    MainKernel("06 axpy probe", "06", "memory_probe", "memory_bound_ilp4", ELEMENTWISE, None,
               "the benchmark's own count (GFLOP/s x time)", fallback=AXPY_SWEEP),
    MainKernel("07 busy kernel", "07", "busy", "busy", ELEMENTWISE, lambda n: 2.0 * busy_iters() * n,
               "a*v + b per iteration: 2 x its iterations per element", fallback=BUSY_ALONE),
    MainKernel("08 chain eager", "08", "chain", "eager", 1 << 25, lambda n: 2.0 * 4 * n,
               "a*x + b per element and step, 4 steps"),
)
# Labs with no kernel on the FLOP roofline, and why (they appear on the small-size panel).
OFF_THE_ROOF = {
    "03": "four small tasks in one launch: launch-bound by design (small-size panel)",
}
SMALL_SIZES = (("01", "scale_one_kernel", "scale"), ("03", "tasks", "horizontal"),
               ("03", "tasks", "separate"))


def recorded(lab_number: str) -> dict:
    """A lab's recorded records (empty when none): what the roofline reads outside a claim."""
    return (reference.load(lab_number) or {}).get("records") or {}


def ceilings_of(record: dict, records_of: Callable[[str], dict] = recorded) -> dict:
    """The ceilings of the run that made `record`: its own "ceilings" when the bench stored them.
    Otherwise what it stored (copy bandwidth, launch floor), and from the records of its session
    what it lacks: Lab 06's copy where it stored none, Lab 01's launch floor, the FP32 peak of
    Lab 06's record (computed from the clock attribute, not measured); "source" says which."""
    if record.get("ceilings", {}).get("fp32_fma_tflops"):
        return with_memory_roof({**record["ceilings"],
                                 "source": f"measured in the same run ({plots.source_label(record)})"})
    lab06 = records_of("06")["occupancy_vs_speed"]
    source = "copy bandwidth from the same run"
    copy = record.get("copy_gbps") or record.get("copy_ceiling", {}).get("gbps")
    if copy is None:
        copy = lab06["copy_ceiling"]["gbps"]
        source = "copy bandwidth from Lab 06's record of the same session"
    floor = record.get("launch_floor_ms")
    if floor is None:
        floor = records_of("01")["scale_one_kernel"]["launch_floor_ms"]
        source += ", launch floor from Lab 01's record"
    return with_memory_roof({"copy_gbps": copy, "launch_floor_ms": floor,
                             "fp32_fma_tflops": lab06["fp32_peak_gflops"] / 1e3,
                             "source": f"{source}; FP32 peak = SMs x lanes x 2 x clock (Lab 06 "
                                       f"record): no measured FMA ceiling recorded yet"})


def with_memory_roof(ceilings: dict) -> dict:
    """`ceilings` with the roofline's memory roof: the best bandwidth any measured read:write mix
    reached in that run (`timing.memory_roof`: a read-heavy mix on HBM, whichever measured best), as "memory_roof_gbps"
    and "memory_roof" (which); a run that measured only the copy has the copy as its roof, and
    says so. A roof below a mix's own ceiling would put a read-heavy kernel above the roof."""
    if ceilings.get("streams"):
        gbps, mix = timing.memory_roof(ceilings)
        return {**ceilings, "memory_roof_gbps": gbps,
                "memory_roof": f"{mix.replace('_', '-')} stream, the best measured mix"}
    return {**ceilings, "memory_roof_gbps": ceilings["copy_gbps"],
            "memory_roof": "copy (that run measured no other read:write mix)"}


def roof_inputs(ceilings: dict) -> dict:
    """The ceilings as Lab 09's functions take them: their bandwidth is the key `copy_gbps` (the
    lab's contract), here given the memory roof."""
    return {**ceilings, "copy_gbps": ceilings["memory_roof_gbps"]}


def _measured(kernel: MainKernel, record: dict) -> dict:
    """seconds, flops, requested bytes and size of a main kernel from its record's row."""
    if kernel.record == "grid_size_sweep":
        row = next(r for r in record["rows"] if r["variant"] == kernel.variant)
        return {"seconds": row["median_ms"] * 1e-3, "size": record["n"], "flops": kernel.flops(record["n"]),
                "requested_bytes": record["bytes_moved"]}
    if kernel.record == "occupancy_vs_speed":
        row = max((r for r in record["rows"] if r["probe"] == kernel.variant), key=lambda r: r["gflops"])
        seconds = row["median_ms"] * 1e-3
        return {"seconds": seconds, "size": None, "flops": row["gflops"] * 1e9 * seconds,
                "requested_bytes": round(row["gbps"] * 1e9 * seconds),
                "bytes_kind": "requested (the record's GB/s x time)",
                "note": f"best of its occupancy sweep ({row['blocks_per_sm']} blocks/SM)"}
    if kernel.record == "concurrency":
        shape = record["shapes"][kernel.variant]
        threads = shape["blocks"] * record["block"]
        return {"seconds": shape["kernel_alone"]["median_ms"] * 1e-3, "size": None,
                "flops": 2.0 * record["iters"] * threads, "requested_bytes": 8 * threads,
                "bytes_kind": "requested (1 read + 1 write of float32 per thread; no ledger)",
                "note": f"{shape['blocks']} blocks of {record['block']}, {record['iters']} iterations"}
    row = harness.row(record, kernel.variant, kernel.size)
    seconds = row["median_ms"] * 1e-3
    flops = row["gflops"] * 1e9 * seconds if kernel.flops is None else kernel.flops(kernel.size)
    if "bytes" in row:
        return {"seconds": seconds, "size": kernel.size, "flops": flops, "requested_bytes": row["bytes"]}
    return {"seconds": seconds, "size": kernel.size, "flops": flops,
            "requested_bytes": kernel.compulsory_bytes(kernel.size),
            "bytes_kind": "compulsory (A, B read, C written once; no ledger)"}


DRAM_BYTES = "DRAM (Nsight Compute)"
REQUESTED_BYTES = "requested (ledger)"
COMPULSORY_BYTES = "compulsory (ledger: re-reads a cache serves left out)"


def placed(kernel: MainKernel, records_of: Callable[[str], dict] = recorded) -> tuple[MainKernel, dict] | None:
    """The kernel (or its fallback, while its own record awaits a GPU run) and its record, or
    None when neither is recorded."""
    for candidate in (kernel, kernel.fallback):
        if candidate is not None and candidate.record in records_of(candidate.lab):
            return candidate, records_of(candidate.lab)[candidate.record]
    return None


def awaiting(records_of: Callable[[str], dict] = recorded) -> list[str]:
    """One line per main kernel whose own record is not recorded yet (what it shows meanwhile)."""
    lines = []
    for kernel in MAIN_KERNELS:
        if kernel.record not in records_of(kernel.lab):
            found = placed(kernel, records_of)
            meanwhile = (f"placed from {found[0].record} meanwhile" if found else "not placed")
            lines.append(f"{kernel.label}: awaits lab {kernel.lab}'s {kernel.record!r} record "
                         f"(a GPU bench, then `kernellab profile {kernel.lab}`); {meanwhile}")
    return lines


def roofline_points(lab, own: dict | None = None, records_of: Callable[[str], dict] = recorded) -> list[dict]:
    """One point per main kernel (the records of `records_of`, recorded by default), plus lab
    09's own scale_rows variants from its records `own` (live or recorded) when they hold one.

    Each point's bytes are the DRAM bytes (read + write) of the variant's profile rows at its
    size where `kernellab profile` recorded them (`reference.variant_dram_bytes`), else the bytes
    its record requested, and `bytes_kind` says which. `lab` gives roofline_point and bound."""
    points = []
    for kernel in MAIN_KERNELS:
        found = placed(kernel, records_of)
        if found is None:
            continue
        chosen, record = found
        measured = _measured(chosen, record)
        dram = reference.variant_dram_bytes(chosen.lab, chosen.record, chosen.variant, measured["size"])
        points.append(_point(lab, chosen.label, chosen.lab, measured, dram, ceilings_of(record, records_of),
                             record, chosen.counted))
    for entry in own_rows(own or {}, records_of):
        dram = reference.variant_dram_bytes(NUMBER, entry["benchmark"], entry["variant"], entry["size"])
        name = f"09 {entry['variant']} ({'live' if entry['live'] else 'recorded'})"
        points.append(_point(lab, name, NUMBER, entry, dram, entry["ceilings"], entry,
                             "one multiply per element"))
    return points


def own_rows(records: dict, records_of: Callable[[str], dict] = recorded) -> list[dict]:
    """Lab 09's scale_rows points from its `scale_rows` record (none until one is recorded), as
    entries roofline_points takes: FLOPs are the row's GFLOP/s x time, the benchmark's own count
    at the size that was timed; the ceilings are the record's (`timing.ceilings` of its run)."""
    result = records.get("scale_rows")
    if result is None:
        return []
    ceilings = ceilings_of(result, records_of)
    return [{"benchmark": result["benchmark"], "variant": r["variant"], "seconds": r["median_ms"] * 1e-3,
             "size": r["size"], "flops": r["gflops"] * 1e9 * r["median_ms"] * 1e-3,
             "requested_bytes": r["bytes"], "compulsory_bytes": r.get("compulsory_bytes"),
             "ceilings": ceilings, "provenance": result["provenance"],
             "live": result.get("live", False)}
            for r in result["rows"] if r["ok"] and "median_ms" in r]


def _point(lab, name, lab_number, measured, dram_bytes, ceilings, record, counted) -> dict:
    """A roofline point on DRAM bytes where a profile measured them, else on the ledger's
    compulsory bytes where it declares re-reads (a point on requested bytes that L2 serves would
    sit above its roof), else on its requested bytes."""
    compulsory = measured.get("compulsory_bytes")
    bytes_used = (dram_bytes if dram_bytes is not None else compulsory if compulsory is not None
                  else measured["requested_bytes"])
    point = lab.roofline_point(measured["flops"], bytes_used, measured["seconds"], roof_inputs(ceilings))
    return {"name": name, "lab": lab_number, **point._asdict(), "bytes": bytes_used,
            "bytes_kind": DRAM_BYTES if dram_bytes is not None else COMPULSORY_BYTES if compulsory is not None
            else measured.get("bytes_kind", REQUESTED_BYTES),
            "requested_bytes": measured["requested_bytes"], "seconds": measured["seconds"],
            "flops": measured["flops"], "bound": lab.bound(measured["flops"], bytes_used, roof_inputs(ceilings)),
            "ceilings": ceilings, "source": plots.source_label(record), "flops_counted": counted,
            "note": measured.get("note", "")}


def small_size_rows() -> list[dict]:
    """Time against size for the small-size panel, with each record's launch floor and copy."""
    rows = []
    for lab_number, name, variant in SMALL_SIZES:
        record = recorded(lab_number)[name]
        for r in harness.rows_for(record, variant):
            rows.append({"kernel": f"{lab_number} {variant}", "size": r["size"], "bytes": r["bytes"],
                         "ms": r["median_ms"], "launch_floor_ms": record["launch_floor_ms"],
                         "copy_gbps": record["copy_gbps"]})
    return rows


def points_table(points: list[dict]) -> str:
    lines = [f"{'kernel':<30} {'FLOP/B':>8} {'TFLOP/s':>8} {'roof':>8} {'% roof':>7} {'bound':>8}  bytes"]
    for p in points:
        lines.append(f"{p['name']:<30} {p['intensity']:>8.3g} {p['attained'] / 1e12:>8.3g} "
                     f"{p['roof'] / 1e12:>8.3g} {p['pct_of_roof']:>6.0f}% {p['bound']:>8}  {p['bytes_kind']}")
    return "\n".join(lines)


def missing_profiles(points: list[dict]) -> list[str]:
    """The labs with a point on the roofline whose bytes are not DRAM bytes (no profile row)."""
    return sorted({p["lab"] for p in points if p["bytes_kind"] != DRAM_BYTES})


def dram_count(points: list[dict]) -> str:
    """The tour's key figure on bytes: how many points use DRAM bytes, which labs have none."""
    missing = missing_profiles(points)
    return (f"{sum(p['bytes_kind'] == DRAM_BYTES for p in points)} of {len(points)} points on DRAM bytes"
            + (f" (no profile rows: labs {', '.join(missing)})" if missing else ""))


def bytes_line(points: list[dict]) -> str:
    """The plain line under the roofline: which labs' points use DRAM bytes and which do not."""
    missing = missing_profiles(points)
    if not missing:
        return f"bytes: {DRAM_BYTES} for every point"
    kinds = sorted({p["bytes_kind"].split(" (")[0] for p in points if p["bytes_kind"] != DRAM_BYTES})
    return (f"no profile rows for labs {', '.join(missing)}: their points use {' or '.join(kinds)} bytes, "
            f"not DRAM bytes (`kernellab profile LAB` on a GPU records them)")


def measures_both(ceilings: dict) -> bool:
    """Whether a run measured both roofs with the current instruments: its FMA ceiling is the best
    of the FMA forms (`fma.method`; runs before 2026-12-01 12:30 timed only the two-chain form,
    which the int32 form beats by 1.9x on the H200) and its memory roof a measured stream."""
    return bool((ceilings.get("fma") or {}).get("method")) and "memory_roof_gbps" in ceilings


def measured_roofs(points: list[dict]) -> list[tuple[float, float]]:
    """(memory roof GB/s, FP32 FMA TFLOP/s) of each distinct run that measured both (rounded to
    what a figure can show); every run's, if none did."""
    chosen = [p for p in points if measures_both(p["ceilings"])] or points
    return sorted({(round(p["ceilings"]["memory_roof_gbps"]), round(p["ceilings"]["fp32_fma_tflops"], 1))
                   for p in chosen})


def roofs_label(points: list[dict], roofs: list[tuple[float, float]]) -> str:
    bandwidths, peaks = [r[0] for r in roofs], [r[1] for r in roofs]
    span = lambda values, fmt: (f"{min(values):{fmt}}" if min(values) == max(values)   # noqa: E731
                                else f"{min(values):{fmt}}-{max(values):{fmt}}")
    return (f"the roofs of the {len(roofs)} runs that measured both: memory {span(bandwidths, '.0f')} GB/s "
            f"(the best measured read:write stream), FP32 FMA {span(peaks, '.1f')} TFLOP/s; each % uses "
            f"its own run's")


def superseded_line(points: list[dict]) -> str:
    """The points whose run did not measure both roofs, and what each is rated against instead."""
    older = [p for p in points if not measures_both(p["ceilings"])]
    parts = []
    for bound in ("memory", "compute"):
        named = [p for p in older if p["bound"] == bound]
        if not named:
            continue
        peaks = "/".join(sorted({f"{p['ceilings']['fp32_fma_tflops']:.1f}" for p in named}))
        parts.append(f"{', '.join(p['name'] for p in named)}: rated on their run's memory roof (its "
                     f"FP32 figure, {peaks} TFLOP/s, was not measured by today's FMA forms)" if bound == "memory"
                     else f"{', '.join(p['name'] for p in named)}: rated against {peaks} TFLOP/s, "
                          f"an FP32 figure its run did not measure")
    return "; ".join(parts) or "every point's run measured both roofs"


def point_ids(points: list[dict]) -> list[str]:
    """Each point's label on the roofline: its lab's number, with a letter where the lab has
    several points ("02a", "02b")."""
    per_lab = Counter(p["lab"] for p in points)
    seen: Counter = Counter()
    ids = []
    for p in points:
        ids.append(p["lab"] + (string.ascii_lowercase[seen[p["lab"]]] if per_lab[p["lab"]] > 1 else ""))
        seen[p["lab"]] += 1
    return ids


def plot_roofline(points: list[dict], small: list[dict], figures_dir: Path) -> Path:
    """Left: every main kernel under the roof, labelled by its lab; middle: the table of what each
    label is and its % of roof, with the roofs and bytes it was rated on; right: small sizes."""
    reference_record = recorded("02")["chain"]
    live = [p["source"] for p in points if p["source"].startswith("measured live")]
    title = "The roofline of the course's main kernels" + (
        f" (lab 09 points {live[0]}; the others recorded)" if live else "")
    fig, (ax, ax_table, ax_small) = plots.new_figure(title, reference_record, ncols=3, width=7.0, height=8.0,
                                                     width_ratios=(1.25, 0.85, 0.9))
    fig.get_layout_engine().set(wspace=0.03)
    roofs = measured_roofs(points)
    widest = np.log10(max(p["intensity"] for p in points))
    xs = np.logspace(-2, max(4.0, np.ceil(widest + 0.3)), 200)
    for bandwidth, peak in roofs:
        ax.plot(xs, np.minimum(peak * 1e12, xs * bandwidth * 1e9) / 1e12, "k-", lw=0.9, alpha=0.6)
    labs = sorted({p["lab"] for p in points})
    colour = {lab_number: colormaps["tab10"](i % 10) for i, lab_number in enumerate(labs)}
    for p in points:
        ax.plot(p["intensity"], p["attained"] / 1e12, "o" if p["bytes_kind"] == DRAM_BYTES else "s",
                color=colour[p["lab"]])
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(f"FLOP per byte\n(circles: {DRAM_BYTES} bytes; squares: ledger bytes, compulsory where it declares re-reads)")
    ax.set_ylabel("TFLOP/s attained")
    ax.set_title("each point labelled by its lab: the table names it")

    ids = point_ids(points)
    table = ax_table.table(cellText=[[i, p["name"].split(" ", 1)[1], f"{p['pct_of_roof']:.0f}%"]
                                     for i, p in zip(ids, points)],
                           colLabels=["", "kernel", "of roof"], loc="upper center", edges="horizontal",
                           cellLoc="left", colLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(plots.font_points("small"))
    table.auto_set_column_width([0, 1, 2])
    table.scale(1, 1.35)
    for row, p in enumerate(points, start=1):
        table[row, 0].get_text().set_color(colour[p["lab"]])
        table[row, 0].get_text().set_fontweight("bold")
    ax_table.axis("off")
    fig.draw_without_rendering()                    # the table's height, to write the notes under it
    under = table.get_window_extent().transformed(ax_table.transAxes.inverted()).y0 - 0.04
    ax_table.text(0, under, "\n\n".join(textwrap.fill(line, 58) for line in
                                        (f"the roof line: {roofs_label(points, roofs)}", superseded_line(points))),
                  transform=ax_table.transAxes, va="top", fontsize="x-small")

    for kernel in sorted({r["kernel"] for r in small}):
        rows = [r for r in small if r["kernel"] == kernel]
        ax_small.plot([r["bytes"] for r in rows], [r["ms"] * 1e3 for r in rows], "o-", label=kernel)
    floor = small[0]["launch_floor_ms"] * 1e3
    moved = np.logspace(3, 9, 50)
    ax_small.axhline(floor, color="k", ls=":", label=f"launch floor {floor:.1f} us (same run)")
    ax_small.plot(moved, moved / (small[0]["copy_gbps"] * 1e9) * 1e6, "k--", lw=0.8,
                  label="bytes at copy bandwidth")
    ax_small.set_xscale("log")
    ax_small.set_yscale("log")
    ax_small.set_xlabel("requested bytes per call")
    ax_small.set_ylabel("us per call")
    ax_small.set_title("small sizes: the launch floor bounds")
    ax_small.legend(loc="lower right")
    plots.label_points(ax, [(p["intensity"], p["attained"] / 1e12) for p in points], ids,
                       fontsize="x-small", fontweight="bold")
    return plots.save(fig, "lab09_roofline", figures_dir)


# --- reading a profile ---------------------------------------------------------------------------

BUSY_PCT = 60         # a unit above this share of its peak is what the kernel is waiting on
IDLE_PCT = 40         # ...and with both units below this, it waits on latency instead
UNCOALESCED = 2.0     # sectors per request above twice the ideal for the load width
FLOAT32 = 4           # bytes per lane of a scalar float32 load, what the course's kernels issue...
VECTOR_LOADS = {"softmax_vector_kernel": 16}   # ...but these, whose loads are 16-byte ld.global.v4.f32


def load_width(row: dict) -> int:
    """Bytes each lane of the row's kernel loads per instruction: the ideal sectors per request
    follow from it (`traffic.ideal_sectors`: 4, 8, 16 for 4-, 8-, 16-byte loads)."""
    return VECTOR_LOADS.get(row["kernel"], FLOAT32)


def diagnose(row: dict) -> list[str]:
    """What the four metrics of a profile row say about why the kernel is slow, one line each."""
    dram, sm = row["dram_throughput_pct"], row["sm_throughput_pct"]
    sectors, occupancy = row["l1_sectors_per_request"], row["achieved_occupancy_pct"]
    width = load_width(row)
    ideal = traffic.ideal_sectors(width)
    lines = [f"{row['kernel']}: DRAM {dram:.0f}% of peak, SM {sm:.0f}%, achieved occupancy "
             f"{occupancy:.0f}%, {sectors:.1f} sectors per load request (ideal {ideal:g} for "
             f"{width}-byte loads), {row['registers_per_thread']} registers"]
    if dram >= BUSY_PCT:
        lines.append("memory-bound: DRAM is the busy unit; only fewer bytes (fusion) make it faster")
    if sm >= BUSY_PCT:
        lines.append("SM-bound: the busiest of the SM's units (instruction issue, the FMA pipes, "
                     "load/store) is near its peak; fewer or cheaper instructions help. At a low "
                     "FLOP rate that unit is issue or load/store, not arithmetic: compute-bound "
                     "only if the FLOP rate is near the FP32 roof")
    if dram < IDLE_PCT and sm < IDLE_PCT:
        lines.append(f"latency-bound: neither unit is busy; too little work in flight "
                     f"(occupancy {occupancy:.0f}%) or too short a kernel (the launch floor)")
    if sectors > UNCOALESCED * ideal:
        lines.append(f"uncoalesced: {sectors:.1f} sectors per request where {ideal:g} carry 32 "
                     f"lanes of {width} bytes; neighbouring lanes should touch neighbouring bytes")
    return lines


# --- 3. the article's closing advice ---------------------------------------------------------------

# (label, lab, record, unfused variant, fused variant, size, the main kernel whose bound it has)
FUSION_PAIRS = (
    ("02 chain", "02", "chain", "unfused", "fused", ELEMENTWISE, "02 chain unfused"),
    ("04 epilogue, tiled", "04", "epilogue", "tiled_unfused", "tiled_fused", 4096, "04 GEMM tiled"),
    ("04 epilogue, register-tiled", "04", "epilogue", "register_tiled_unfused", "register_tiled_fused",
     4096, "04 GEMM register-tiled"),
    ("04 epilogue, double-buffered", "04", "epilogue", "double_buffered_unfused",
     "double_buffered_fused", 4096, "04 GEMM register-tiled"),
    ("04 epilogue, bk16", "04", "epilogue", "bk16_unfused", "bk16_fused", 4096, "04 GEMM bk16"),
)
OCCUPANCY_PROBES = {"memory": "memory_bound", "compute": "compute_bound"}   # Lab 06's sweep
MATTERS = 1.2   # a gain below this is within what a different launch shape or run moves


def fusion_gains(points: list[dict], records_of: Callable[[str], dict] = recorded) -> list[dict]:
    """unfused time / fused time for each pair, with the bound of the pair's main kernel."""
    bounds = {p["name"]: p["bound"] for p in points}
    out = []
    for label, lab_number, name, unfused, fused, size, main in FUSION_PAIRS:
        record = records_of(lab_number)[name]
        gain = harness.row(record, unfused, size)["median_ms"] / harness.row(record, fused, size)["median_ms"]
        out.append({"pair": label, "gain": gain, "bound": bounds[main]})
    return out


def occupancy_gains(records_of: Callable[[str], dict] = recorded) -> dict:
    """Lab 06: slowest / fastest over its occupancy sweep, per kind of probe."""
    rows = records_of("06")["occupancy_vs_speed"]["rows"]
    gains = {}
    for kind, probe in OCCUPANCY_PROBES.items():
        times = [r["median_ms"] for r in rows if r["probe"] == probe]
        gains[kind] = max(times) / min(times)
    return gains


def claim_points(records: dict) -> tuple[list[dict], Callable[[str], dict]]:
    """The roofline points a claim reads, from its records: every lab's as records["labNN"]
    (live where this process measured them, `claims.sources`), lab 09's own at the top."""
    def records_of(lab_number):
        return need(records, f"lab{lab_number}")

    return roofline_points(course_solution(NUMBER), own=records, records_of=records_of), records_of


def roofline_values(records: dict) -> dict:
    points, _ = claim_points(records)
    return {"kernels": "; ".join(f"{p['name']} {p['intensity']:.3g} FLOP/B ({p['bytes_kind'].split(' (')[0]} "
                                 f"bytes), {p['bound']}-bound, {p['pct_of_roof']:.0f}%" for p in points),
            "count": len(points), "highest": max(p["pct_of_roof"] for p in points),
            "highest_name": max(points, key=lambda p: p["pct_of_roof"])["name"]}


def fusion_values(records: dict) -> dict:
    points, records_of = claim_points(records)
    gains = fusion_gains(points, records_of)
    best = {bound: max((g["gain"] for g in gains if g["bound"] == bound), default=None)
            for bound in ("memory", "compute")}
    if None in best.values():
        raise Missing("no fusion pair of each bound on the roofline")
    return {**best, "pairs": ", ".join(f"{g['pair']} {g['gain']:.2f}x ({g['bound']})" for g in gains),
            "matters": MATTERS}


def occupancy_values(records: dict) -> dict:
    """Lab 06's sweep: how far occupancy moved each probe, and the warps per SM the memory-bound
    probe needs with one and with four loads in flight per thread (Lab 06's own claim)."""
    def records_of(lab_number):
        return need(records, f"lab{lab_number}")

    warps = protocol.experiment("06").memory_probe_warps(records_of("06"))
    return {**occupancy_gains(records_of), "one": warps["one"], "four": warps["four"]}


def _largest_rows(result: dict) -> dict:
    """The largest size's row of each variant of one benchmark's result."""
    largest = max(result["sizes"])
    return {r["variant"]: r for r in result["rows"] if r["size"] == largest}


def tuned_values(records: dict) -> dict:
    """Each scale_rows and transpose variant's % of its mix's ceiling at the largest size, the
    worst repeat's (repeats_of keeps each repeat's record)."""
    values = {}
    for benchmark, names in (("scale_rows", SCALE_ROWS_VARIANTS), ("transpose", TRANSPOSE_VARIANTS)):
        repeats = [_largest_rows(r) for r in repeats_of(records, benchmark, NUMBER)]
        for name in names:
            if any(name not in rows for rows in repeats):
                raise Missing(f"{name} is not in lab 09's {benchmark} record yet")
            values[name] = min(rows[name]["pct_of_ceiling"] for rows in repeats)
    return {**values, "target": TUNED_TARGET_PCT, "repeats": len(repeats),
            "shape": "x".join(map(str, GPU_SHAPE))}


def targets(lab, records: dict) -> dict:
    """The tuned kernels against their mix's ceiling at the largest size, this run."""
    found = {}
    for benchmark, name in (("scale_rows", "scale_rows_wide"), ("transpose", "transpose_wide")):
        row = _largest_rows(records[benchmark])[name]
        found[f"{name}_pct_of_ceiling"] = {
            "value": row["pct_of_ceiling"], "target": TUNED_TARGET_PCT,
            "met": row["pct_of_ceiling"] >= TUNED_TARGET_PCT,
            "method": f"compulsory bytes / median time over the ceiling of the row's read/write mix, "
                      f"measured in the same run ({row['ceiling_mix']}), at {row['size']} rows"}
    return found


CLAIMS = [
    Claim("tuned_at_the_ceiling",
          "At {shape} (worst of {repeats} repeat(s)), of their mix's ceiling: scale_rows strided "
          "{scale_rows_strided:.0f}%, coalesced {scale_rows:.0f}%, tuned {scale_rows_wide:.0f}% "
          "({scale_met}); transpose naive {transpose_naive:.0f}%, padded tile {transpose:.0f}%, tuned "
          "{transpose_wide:.0f}% ({transpose_met}; target for the tuned ones: {target:.0f}%). Coalescing "
          "is {coalescing} of the way.",
          values=tuned_values,
          checks=(target("scale_met", "scale_rows_wide", ">=", "target"),
                  target("transpose_met", "transpose_wide", ">=", "target"),
                  says("coalescing", "scale_rows", ">=", "target", "all", "only part")),
          explains="a coalesced kernel with one element per thread keeps one load in flight per thread "
                   "(the compiler keeps x's loads behind out's stores, as they might overlap) and pays "
                   "for signed indices and a division per element; the tuned kernels load 4 or 16 "
                   "elements before storing any and index unsigned (see the lab's given tuned kernels)"),
    Claim("roofline_bounds",
          "the {count} main kernels on the roofline, each with its intensity, bound and % of its "
          "roof: {kernels}. {none_above} (the nearest: {highest_name}, {highest:.0f}%)",
          values=roofline_values,
          checks=(says("none_above", "highest", "<=", 100, "None is above its roof", "One is ABOVE its roof, an "
                       "instrument error"),)),
    Claim("fusion_on_compute_bound",
          "fusion's best gain is {compute:.2f}x on compute-bound kernels against {memory:.2f}x on "
          "memory-bound ones ({pairs}): aggressive fusion {memory_verdict} on memory-bound work here "
          "(a gain of {matters:.1f}x or more counts), {compute_verdict} on compute-bound work",
          headline="fusion: {memory:.2f}x on memory-bound work, at most {compute:.2f}x on compute-bound",
          values=fusion_values,
          checks=(says("memory_verdict", "memory", ">=", "matters", "paid", "did not pay"),
                  says("compute_verdict", "compute", "<", "memory", "less", "more")),
          article="fusion",
          explains="a compute-bound kernel's roof is flat: fusing its epilogue saves bytes it was not "
                   "waiting on; a memory-bound chain's fused form moves fewer bytes for the same FLOPs"),
    Claim("occupancy_on_memory_bound",
          "across Lab 06's occupancy sweep (the same probe at each occupancy), the memory-bound probe's "
          "time moved {memory:.1f}x and the compute-bound one's {compute:.1f}x: occupancy moved the "
          "memory-bound probe {more}. What it needs is bytes in flight (resident warps x independent loads per "
          "thread x width): with four loads per thread it reached 90% of its best at {four} warps per SM, "
          "with one at {one}",
          values=occupancy_values,
          checks=(says("more", "memory", ">", "compute", "more", "less"),
                  states("four", "<", "one")),
          article="occupancy",
          explains="occupancy is one way to put bytes in flight, independent loads per thread another "
                   "(Little's law: bandwidth x latency = bytes in flight); the article's 'memory-bound "
                   "models need finer occupancy control' holds for kernels with one load in flight per "
                   "thread, not as a rule"),
]


# --- the declaration ------------------------------------------------------------------------------

def validate(lab, seed: int = 0) -> list[str]:
    """Every access pattern against its float64 reference; in the simulator its sectors per
    request too, printed (the benchmarks validate themselves, `protocol.validate`)."""
    patterns = _patterns(lab, seed)
    if device.is_simulator():
        print(pattern_table(patterns))
    return [f"{p['pattern']} (float64 reference)" for p in patterns]


def draw_roofline(lab, records: dict, figures_dir: Path) -> Path:
    """The roofline figure from lab 09's records (live or recorded) and every lab's recorded
    ones, with its table, the bytes line and what awaits data printed beside it."""
    points = roofline_points(lab, own=records)
    print(points_table(points))
    print(bytes_line(points))
    for line in awaiting():
        print(line)
    return plot_roofline(points, small_size_rows(), figures_dir)


def key_figure(lab, records: dict) -> str:
    points = roofline_points(lab, own=records)
    best_memory = max((p for p in points if p["bound"] == "memory"), key=lambda p: p["pct_of_roof"])
    patterns = {p["pattern"]: p for p in _patterns(lab, 0)} if device.is_simulator() else {}
    coalescing = (f"sectors/load strided {patterns['scale_rows_strided']['x_sectors_per_load']:.0f} vs "
                  f"coalesced {patterns['scale_rows']['x_sectors_per_load']:.1f}; " if patterns else "")
    return (f"{coalescing}{len(points)} kernels on the roofline, best memory-bound "
            f"{best_memory['name']} {best_memory['pct_of_roof']:.0f}% of roof; {dram_count(points)}")


LAB = protocol.Lab(
    number=NUMBER, title="where the time goes: coalescing, the roofline, reading a profile",
    kernels=(
        protocol.Kernel("scale_rows_strided_kernel", "1-D: blocks of 128, one element per thread, "
                        "neighbouring threads on neighbouring rows", block_size=128),
        protocol.Kernel("scale_rows_kernel", "1-D: blocks of 128, one element per thread, "
                        "neighbouring threads on neighbouring columns", block_size=128),
        protocol.Kernel("copy4_consecutive_kernel", "1-D: blocks of 128, 4 consecutive elements per "
                        "thread", block_size=128),
        protocol.Kernel("transpose_naive_kernel", "2-D: blocks of (32, 8), one element per thread",
                        block_size=256),
        protocol.Kernel("transpose_kernel", "2-D: one (32, 8) block per 32 x 32 tile of x, 4 rows of "
                        "the tile per thread", block_size=256),
        protocol.Kernel("scale_rows_wide_kernel", "2-D grid (column segments, rows), blocks of 256, 4 "
                        "columns per thread a block apart", block_size=256),
        protocol.Kernel("transpose_wide_kernel", "2-D: one (64, 4) block per 64 x 64 tile of x, 16 "
                        "elements per thread", block_size=256),
    ),
    references=("scale_rows_reference", "copy_reference", "transpose_reference"),
    validate=validate,
    benchmarks=access_pattern_benchmarks,
    figures=(protocol.Figure("lab09_roofline", draw_roofline),),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
