"""Lab 09's roofline points: every lab's main kernels (`MAIN_KERNELS`, declared as data) placed
from their records, with the ceilings of the run that made each, the bytes each is rated on and
what awaits a GPU run; and reading a profile row (`diagnose`).

`lab09_roofline` declares the roofline (its docstring says where each figure comes from).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.gpu import timing, traffic
from kernellab.show import plots

from experiments.lab09_constants import NUMBER


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
    Otherwise what it stored (copy bandwidth, launch floor), and from the other records beside it
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
        source = "copy bandwidth from Lab 06's record"
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
    for entry in own_rows(own or {}, records_of):      # a live run's DRAM bytes only from its own GPU's profile
        dram = (reference.variant_dram_bytes(NUMBER, entry["benchmark"], entry["variant"], entry["size"])
                if not entry["live"] or entry["provenance"].get("gpu") == reference.profiled_on(NUMBER) else None)
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
            rows.append({"kernel": f"{lab_number} {variant}", "lab": lab_number, "size": r["size"],
                         "bytes": r["bytes"],
                         "ms": r["median_ms"], "launch_floor_ms": record["launch_floor_ms"],
                         "host_paced": bool(record.get("host_paced")),
                         "copy_gbps": record["copy_gbps"]})
    return rows


def points_table(points: list[dict]) -> str:
    lines = [f"{'kernel':<30} {'FLOP/B':>8} {'TFLOP/s':>8} {'roof':>8} {'% roof':>7} {'under':>8}  bytes"]
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


def diagnose(row: dict, profiled_on: str | None = None) -> list[str]:
    """What the four metrics of a profile row say about why the kernel is slow, one line each; the
    first names the GPU that Nsight Compute profiled, where `profiled_on` gives it."""
    dram, sm = row["dram_throughput_pct"], row["sm_throughput_pct"]
    sectors, occupancy = row["l1_sectors_per_request"], row["achieved_occupancy_pct"]
    width = load_width(row)
    ideal = traffic.ideal_sectors(width)
    where = f" (Nsight Compute on the {profiled_on})" if profiled_on else ""
    lines = [f"{row['kernel']}{where}: DRAM {dram:.0f}% of peak, SM {sm:.0f}%, achieved occupancy "
             f"{occupancy:.0f}%, {sectors:.1f} sectors per load request (ideal {ideal:g} for "
             f"{width}-byte loads), {row['registers_per_thread']} registers"]
    if dram >= BUSY_PCT:
        lines.append(f"DRAM-busy: DRAM is at {dram:.0f}% of its peak. Fewer bytes (fusion) help; below the "
                     f"copy ceiling a better access pattern may still help")
    if sm >= BUSY_PCT:
        lines.append(f"SM-busy: the busiest of the SM's units (instruction issue, the FMA pipes, load/store) "
                     f"is at {sm:.0f}% of its peak; fewer or cheaper instructions help. At a low FLOP rate "
                     f"that unit is issue or load/store, not arithmetic")
    if dram < IDLE_PCT and sm < IDLE_PCT:
        lines.append(f"latency-bound: neither unit is busy; too little work in flight "
                     f"(occupancy {occupancy:.0f}%) or too short a kernel (the launch floor)")
    if sectors > UNCOALESCED * ideal:
        lines.append(f"uncoalesced: {sectors:.1f} sectors per request where {ideal:g} carry 32 "
                     f"lanes of {width} bytes; neighbouring lanes should touch neighbouring bytes")
    return lines

