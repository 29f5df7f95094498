"""Lab 05's claims: the discussion's sentences, each checked against the records and the recorded
Nsight Compute rows; with the fastest fused form, which the declaration's targets and key figure
judge too."""

from __future__ import annotations

import statistics

from kernellab import occupancy as occ
from kernellab.gpu import device
from kernellab.course.claims import (Claim, Compare, Missing, course_solution, need, profile_rows_beside, repeats_of, row,
                                     says, states, target, typical_ms)

from experiments.lab05_constants import HEADLINE_COLS, ROWS, SHAPES, TARGET_PCT_OF_COPY, cached_rereads
from experiments.lab05_measure import shape_name


# --- the fastest fused form: what the targets judge -----------------------------------------------

FUSED_FORMS = ("fused",)      # of the softmax benchmark; every variant of the shapes benchmark is one


def fastest_fused(records: dict, cols: int = HEADLINE_COLS) -> tuple[dict, dict]:
    """(its benchmark result, its row): the fastest one-read-one-write softmax at `cols` columns,
    over the softmax benchmark's fused form and every shape of the shapes benchmark."""
    candidates = [(result, r) for result in (records.get("softmax"), records.get("softmax_shapes")) if result
                  for r in result["rows"] if r["size"] == cols and r.get("median_ms")
                  and not result["variants"][r["variant"]]["baseline"]
                  and (result["benchmark"] == "softmax_shapes" or r["variant"] in FUSED_FORMS)]
    if not candidates:
        raise Missing(f"no timed fused softmax at {cols} columns")
    return min(candidates, key=lambda c: c[1]["median_ms"])


def targets_of(records: dict, cols: int = HEADLINE_COLS) -> dict:
    """The targets on the fastest fused form, against torch.softmax timed in the same benchmark."""
    result, fused = fastest_fused(records, cols)
    out = {"rows": ROWS, "cols": cols, "fused_variant": fused["variant"], "benchmark": result["benchmark"],
           "copy_gbps": result["copy_gbps"], "fused_ms": fused["median_ms"], "fused_gbps": fused["gbps"],
           "fused_pct_of_copy": fused["pct_of_copy"],
           "copy_target_met": fused["pct_of_copy"] >= TARGET_PCT_OF_COPY}
    timed_torch = [r for r in result["rows"] if r["variant"] == "torch_softmax" and r["size"] == cols
                   and r.get("median_ms")]
    if timed_torch:
        torch_ms = timed_torch[0]["median_ms"]
        out.update({"torch_ms": torch_ms, "torch_over_fused": torch_ms / fused["median_ms"],
                    "torch_target_met": fused["median_ms"] <= torch_ms})
    return out


# --- claims: what the discussion says, checked against the records -----------------------------
# (the ledgers a claim compares with are the solutions', so a claim never depends on a student's stub)

SHORT_ROWS = (256, 512, 1024)
EXPLAINED_RATIO = 1.5    # a short-row time within this of a launch plus its bytes: those explain it


def _short_rows_values(records):
    """The shortest rows: the fused softmax's GPU time against an empty launch plus its bytes at copy
    speed, and how much of an SM its one-row blocks can fill."""
    softmax = need(records, "softmax")
    lab = course_solution("05")
    cols = SHORT_ROWS[0]
    fused = row(softmax, "fused", cols)
    floor_us = 1e3 * softmax["launch_floor_ms"]
    bytes_us = fused["bytes"] / (softmax["copy_gbps"] * 1e3)
    block = lab.row_block(cols)
    facts = device.facts()
    resident = min(facts.max_blocks_per_sm * block, facts.max_threads_per_sm)
    model_us = floor_us + bytes_us
    us, torch_us = 1e3 * typical_ms(fused), 1e3 * typical_ms(row(softmax, "torch_softmax", cols))
    return {"lo": cols, "us": us, "floor": floor_us, "bytes_us": bytes_us, "model_us": model_us,
            "ratio": us / model_us, "torch_ratio": torch_us / model_us, "explained": EXPLAINED_RATIO,
            "block": block, "blocks_per_sm": facts.max_blocks_per_sm, "filled": resident / facts.max_threads_per_sm,
            "torch_us": torch_us}


def _torch_values(records):
    """torch.softmax against the graded fused kernel at every row length (medians of the repeats)."""
    softmax = need(records, "softmax")
    lab = course_solution("05")
    sizes = [n for n in softmax["sizes"] if row(softmax, "fused", n).get("ok", True)]
    fused = {n: typical_ms(row(softmax, "fused", n)) for n in sizes}
    torch = {n: typical_ms(row(softmax, "torch_softmax", n)) for n in sizes}
    torch_pct = {n: row(softmax, "torch_softmax", n)["pct_of_copy"] for n in sizes}
    fused_at = [n for n in sizes if fused[n] < torch[n]]
    low_at = min(torch_pct, key=torch_pct.get)
    big = max(sizes)
    return {"sizes": len(sizes), "lo": min(sizes), "hi": big, "torch_wins": len(sizes) - len(fused_at),
            "fused_wins": len(fused_at), "fused_at": ", ".join(f"{n:,}" for n in fused_at) or "no length",
            "torch_low": torch_pct[low_at], "torch_low_at": low_at,
            "torch_median": statistics.median(torch_pct.values()),
            "big": big, "big_pct": row(softmax, "fused", big)["pct_of_copy"],
            "cols": HEADLINE_COLS, "pct": row(softmax, "fused", HEADLINE_COLS)["pct_of_copy"],
            "big_items": big // lab.row_block(big), "items": HEADLINE_COLS // lab.row_block(HEADLINE_COLS)}


def _headline_values(records):
    softmax = need(records, "softmax")
    lab = course_solution("05")
    cols = HEADLINE_COLS
    times = {form: row(softmax, form, cols)["median_ms"] for form in ("fused", "online", "unfused", "torch_softmax")}
    block = lab.row_block(cols)
    requested = {form: lab.softmax_ledger(ROWS, cols, form, block) for form in ("fused", "online", "unfused")}
    compulsory = cached_rereads(requested["unfused"], ROWS, cols).compulsory_bytes
    fused = row(softmax, "fused", cols)
    return {"cols": cols, "pct": fused["pct_of_copy"], "gbps": fused["gbps"], "target": TARGET_PCT_OF_COPY,
            "fused": times["fused"], "torch": times["torch_softmax"], "vs_torch": times["torch_softmax"] / times["fused"],
            "unfused_ratio": times["unfused"] / times["fused"],
            "unfused_bytes": compulsory / requested["fused"].total_bytes,
            "online_ratio": times["online"] / times["fused"],
            "online_bytes": requested["online"].total_bytes / requested["fused"].total_bytes}


def _shapes_values(records):
    """The ways of holding the row in registers (the staged ones are the next claim's)."""
    rows = {r["shape"]: r for r in need(records, "shape_registers", "rows") if r["shape"].startswith("fused_")}
    if not rows:
        raise Missing("shape_registers has no rows")
    fastest = max(rows.values(), key=lambda r: r["pct_of_copy"])
    table = "; ".join(f"{r['block']} x {r['items']}{' capped' if name.endswith('regs') else ''}: "
                      f"{r['registers']} registers, {r['occupancy']:.0%} occupancy, {r['pct_of_copy']:.0f}% of copy"
                      for name, r in rows.items())
    return {"table": table, "fastest": fastest["shape"], "fastest_occ": fastest["occupancy"],
            "most_occ": max(r["occupancy"] for r in rows.values()),
            "rows_per_sm": max(r["active_blocks"] for r in rows.values()), "best_pct": fastest["pct_of_copy"]}


def _timed_shapes(records, kind: str) -> tuple[list[dict], dict]:
    """The timed shape_registers rows of one way of holding the row ('staged', 'vector'), and the
    fastest of them; Missing for a recording made before that kind existed."""
    rows = [r for r in need(records, "shape_registers", "rows") if r["shape"].startswith(f"{kind}_")
            and r["pct_of_copy"] is not None]
    if not rows:
        raise Missing(f"shape_registers has no timed {kind}_ row (recorded before the {kind} softmax)")
    return rows, max(rows, key=lambda r: r["pct_of_copy"])


def _staged_values(records):
    staged, fastest = _timed_shapes(records, "staged")
    table = "; ".join(f"{r['shape']}: {r['registers']} registers, {r['shared_bytes']} B shared, "
                      f"{r['active_blocks']} rows per SM, {r['pct_of_copy']:.0f}% of copy" for r in staged)
    shapes = _shapes_values(records)
    return {**shapes, "staged_table": table, "staged": fastest["shape"],
            "staged_rows": fastest["active_blocks"], "staged_pct": fastest["pct_of_copy"],
            "staged_gap": abs(fastest["pct_of_copy"] - shapes["best_pct"])}


def _profiled(records, variant: str, benchmark: str = "softmax_shapes") -> dict:
    """The recorded Nsight Compute row of a variant at the headline size (Missing beside a live
    record of another GPU: the claim then reads the reference alone)."""
    found = [r for r in profile_rows_beside(need(records, benchmark), "05") if r["benchmark"] == benchmark
             and r["variant"] == variant and r["size"] == HEADLINE_COLS and r.get("warp_instructions")]
    if not found:
        raise Missing(f"no profile row with warp instructions for {benchmark} {variant}")
    return found[0]


def _instruction_values(records):
    (_, staged), (_, vector) = _timed_shapes(records, "staged"), _timed_shapes(records, "vector")
    values = {"cols": HEADLINE_COLS, "staged": staged["shape"], "vector": vector["shape"]}
    for key, name in (("fused", shape_name(*SHAPES[0])), ("staged", staged["shape"]), ("vector", vector["shape"])):
        found = _profiled(records, name)
        values.update({f"{key}_inst": found["warp_instructions"] / 1e6, f"{key}_sm": found["sm_throughput_pct"],
                       f"{key}_dram": found["dram_throughput_pct"]})
    return {**values, "vector_share": values["vector_inst"] / min(values["fused_inst"], values["staged_inst"]),
            "dram_gain": values["vector_dram"] - values["fused_dram"]}


def _registers_row(records, kernel: str) -> dict:
    for r in need(records, "registers", "rows"):
        if r["kernel"] == kernel:
            return r
    raise Missing(f"registers has no row for {kernel}")


def _as_launched(records, benchmark: str, kernel: str):
    """(registers, occupancy) of a fused kernel as its launcher compiles it, under the launcher's
    register cap: Nsight Compute's register count of the launch the benchmark times, and the
    occupancy the calculator gives it with the block and shared memory of the registers record."""
    regs = _profiled(records, "fused", benchmark)["registers_per_thread"]
    found = _registers_row(records, kernel)
    cc = need(records, "registers", "provenance")["cc"]
    return regs, occ.occupancy(cc, found["block"], regs, found["shared_bytes"])


def _layernorm_values(records):
    """The fused layernorm against torch.layer_norm at the headline length (medians of the repeats),
    and what its registers, as launched, leave of an SM beside the fused softmax's."""
    layernorm = need(records, "layernorm")
    fused, torch = row(layernorm, "fused", HEADLINE_COLS), row(layernorm, "torch_layer_norm", HEADLINE_COLS)
    regs, mine = _as_launched(records, "layernorm", "layernorm_fused_kernel")
    softmax_regs, softmax = _as_launched(records, "softmax", "softmax_fused_kernel")
    return {"cols": HEADLINE_COLS, "fused": typical_ms(fused), "pct": fused["pct_of_copy"],
            "torch": typical_ms(torch), "torch_over": typical_ms(fused) / typical_ms(torch),
            "regs": regs, "block": mine.block_size, "blocks": mine.active_blocks, "occ": mine.occupancy,
            "cap": course_solution("05").register_cap(mine.block_size),
            "softmax_regs": softmax_regs, "softmax_occ": softmax.occupancy,
            "compiled_regs": _registers_row(records, "layernorm_fused_kernel")["registers"]}


def _unfused_values(records):
    """The unfused form against its bytes, beside how busy Nsight Compute found DRAM in each of its
    three kernels and in the fused kernel."""
    unfused = [r for r in profile_rows_beside(need(records, "softmax"), "05") if r["benchmark"] == "softmax"
               and r["variant"] == "unfused"
               and r["size"] == HEADLINE_COLS]
    if not unfused:
        raise Missing("no Nsight Compute rows of the unfused softmax (`kernellab profile 05`)")
    busy = [r["dram_throughput_pct"] for r in unfused]
    return {**_headline_values(records), "unfused_lo": min(busy), "unfused_hi": max(busy),
            "fused_busy": _profiled(records, "fused", "softmax")["dram_throughput_pct"]}


def _online_values(records):
    """The online form's time and requested bytes against the fused form's, beside the DRAM bytes,
    DRAM busy share and warp instructions Nsight Compute recorded for each."""
    fused, online = _profiled(records, "fused", "softmax"), _profiled(records, "online", "softmax")
    dram = {name: (r["dram_bytes_read"] + r["dram_bytes_write"]) / 1e6 for name, r in (("fused", fused), ("online", online))}
    return {**_headline_values(records), "fused_dram_mb": dram["fused"], "online_dram_mb": dram["online"],
            "dram_off": 100 * abs(dram["online"] / dram["fused"] - 1),
            "fused_dram_pct": fused["dram_throughput_pct"], "online_dram_pct": online["dram_throughput_pct"],
            "inst_ratio": online["warp_instructions"] / fused["warp_instructions"]}


def _capped_values(records):
    """The 1024 x 8 kernel with and without a 32-register cap: registers, speed in every repeat
    against each measurement's own spread, and the warp instructions each issued."""
    capped_name, uncapped_name = "fused_1024x8_max32regs", "fused_1024x8"
    slower, spread = [], []
    for shapes in repeats_of(records, "softmax_shapes", "05"):
        capped, uncapped = row(shapes, capped_name, HEADLINE_COLS), row(shapes, uncapped_name, HEADLINE_COLS)
        slower.append(capped["median_ms"] / uncapped["median_ms"] - 1)
        spread += [(r["p90_ms"] - r["p10_ms"]) / r["median_ms"] for r in (capped, uncapped)]
    return {"registers": _shape(records, uncapped_name)["registers"], "over_spread": min(slower) / max(spread),
            "default_cap": course_solution("05").register_cap(_shape(records, uncapped_name)["block"]),
            "capped_regs": _shape(records, capped_name)["registers"], "repeats": len(slower),
            "slower_lo": min(slower), "slower_hi": max(slower), "spread": max(spread),
            "capped": _shape(records, capped_name)["pct_of_copy"],
            "uncapped": _shape(records, uncapped_name)["pct_of_copy"],
            "capped_inst": _profiled(records, capped_name)["warp_instructions"] / 1e6,
            "uncapped_inst": _profiled(records, uncapped_name)["warp_instructions"] / 1e6}


def _vector_values(records):
    rows, fastest = _timed_shapes(records, "vector")
    fused = _shape(records, shape_name(*SHAPES[0]))
    table = "; ".join(f"{r['shape']}: {r['registers']} registers, {r['active_blocks']} rows per SM, "
                      f"{r['pct_of_copy']:.0f}% of copy" for r in rows)
    return {"vector_table": table, "vector": fastest["shape"], "vector_pct": fastest["pct_of_copy"],
            "fused_pct": fused["pct_of_copy"], "vector_over_fused": fused["median_ms"] / fastest["median_ms"]}


def _target_values(records):
    if not any(name.startswith("staged_") for name in need(records, "softmax_shapes", "variants")):
        raise Missing("softmax_shapes has no staged_ variant (recorded before the staged softmax)")
    goals = targets_of(records)
    if "torch_ms" not in goals:
        raise Missing("no torch.softmax timed beside the fastest fused form")
    return {"variant": goals["fused_variant"], "gbps": goals["fused_gbps"], "pct": goals["fused_pct_of_copy"],
            "ms": goals["fused_ms"], "torch_ms": goals["torch_ms"], "vs_torch": goals["torch_over_fused"],
            "target": TARGET_PCT_OF_COPY, "cols": goals["cols"]}


CLAIMS = [
    Claim("short_rows_are_launches",
          "At {lo} columns the fused softmax takes {us:.1f} us of GPU time, {ratio:.1f}x an empty launch "
          "({floor:.1f} us) plus its bytes at copy speed ({bytes_us:.1f} us), a lower bound; "
          "torch.softmax takes {torch_us:.1f} us, {torch_ratio:.1f}x. Within {explained:.1f}x of the bound counts "
          "as explained: {cost}. Each row is a block of {block} threads, and an SM holds at most {blocks_per_sm} "
          "blocks: {filled:.0%} of its thread slots.",
          headline="short rows ({lo} columns): {us:.1f} us, {ratio:.1f}x a launch plus the bytes (torch.softmax "
                   "{torch_ratio:.1f}x): {cost}; blocks of {block} fill {filled:.0%} of an SM",
          values=_short_rows_values,
          checks=(says("cost", "ratio", ">", "explained", "the launch and the bytes do not explain it",
                       "the launch and the bytes explain it"),)),
    Claim("fused_vs_torch",
          "Over {sizes} row lengths ({lo:,}-{hi:,} columns, medians of the repeats), torch.softmax is "
          "faster than the graded fused kernel at {torch_wins} ({verdict}); the fused kernel is faster at "
          "{fused_wins} ({fused_at} columns). torch.softmax's lowest share of copy is {torch_low:.0f}%, at "
          "{torch_low_at:,} columns; its median is {torch_median:.0f}%. At {hi:,} columns the fused kernel "
          "falls to {big_pct:.0f}% of copy, from {pct:.0f}% at {cols:,}: each thread holds {big_items} "
          "values, against {items}.",
          headline="torch.softmax beats the graded fused kernel at {torch_wins} of {sizes} row lengths, the fused "
                   "kernel at {fused_at} columns; torch's lowest share of copy: {torch_low:.0f}% at {torch_low_at:,}",
          values=_torch_values,
          checks=(says("verdict", "torch_wins", ">", "fused_wins", "most of them", "the fewer of them"),),
          explains="a thread's values stay in registers, so twice the values per thread takes more registers; "
                   "Lab 06 shows how registers per thread limit the blocks an SM holds."),
    Claim("fused_short_of_target",
          "It moves {gbps:.0f} GB/s, {pct:.0f}% of the copy ceiling of the same run (target: at least "
          "{target:.0f}%, {met}).",
          headline="the graded fused kernel: {pct:.0f}% of copy (target {target:.0f}%)",
          values=_headline_values, checks=(target("met", "pct", ">=", "target"),),
          explains="per value it issues a 4-byte load and store with 2-D index arithmetic and a full-precision exp "
                   "from libdevice, CUDA's math library, and Nsight Compute, NVIDIA's kernel profiler, found its SM "
                   "busier than its DRAM. The vectorised form issues about a third "
                   "of the instructions and loads 16 bytes at a time: it reaches the target."),
    Claim("unfused_vs_bytes",
          "The unfused form takes {unfused_ratio:.2f}x the fused time at {cols} columns; its compulsory bytes "
          "(each row statistic once per row) predict {unfused_bytes:.2f}x ({than}). Under Nsight Compute its three kernels kept DRAM "
          "{unfused_lo:.0f}-{unfused_hi:.0f}% busy, the fused kernel {fused_busy:.0f}%.",
          headline="unfused softmax: {unfused_ratio:.2f}x the fused time, its compulsory bytes predict {unfused_bytes:.2f}x "
                   "({than})",
          values=_unfused_values,
          checks=(says("than", "unfused_ratio", ">=", "unfused_bytes", "at least as slow as its bytes say",
                       "faster than its bytes say"),),
          explains="the ledger's requested bytes also count every thread's read of its row's max and sum, but a "
                   "warp's 32 reads of one address are a single broadcast, served by L1 after the first warp: they "
                   "cost instructions, not DRAM bytes. Time follows the bytes only where each kernel keeps DRAM as "
                   "busy as the fused one does; the last sentence compares them."),
    Claim("online_second_read",
          "The online form takes {online_ratio:.2f}x the fused time at {cols} columns, against {online_bytes:.2f}x "
          "from its requested bytes (the ledger counts its second read of the row). Under Nsight Compute it "
          "read and wrote {online_dram_mb:.1f} MB of DRAM and the fused kernel {fused_dram_mb:.1f} MB "
          "({dram_off:.2f}% apart): its second read {second_read}. Its DRAM was "
          "{online_dram_pct:.0f}% busy against the fused kernel's {fused_dram_pct:.0f}%, and it issued "
          "{inst_ratio:.2f}x the fused kernel's warp instructions: {extra}.",
          headline="online softmax: {online_ratio:.2f}x the fused time; its second read {second_read}, and it "
                   "issues {inst_ratio:.2f}x the instructions",
          values=_online_values,
          checks=(says("second_read", "dram_off", "<", 2, "comes from cache (the same DRAM bytes, within 2%)",
                       "reaches DRAM (DRAM bytes 2% or more apart)"),
                  says("extra", "dram_off", "<", 2, "the extra time is instructions and latency, not bytes",
                       "part of the extra time is bytes"),
                  states("online_dram_pct", "<", "fused_dram_pct"), Compare("inst_ratio", ">", 1.0)),
          explains="requested bytes (the ledger) and DRAM bytes (Nsight Compute) are different quantities: "
                   "a row of 8192 float32 is 32 KB, and its second read finds it in L1/L2, so the DRAM bytes "
                   "stay those of one read."),
    Claim("layernorm_vs_torch",
          "At {cols:,} columns the fused layernorm takes {fused:.3f} ms, {pct:.0f}% of copy, and "
          "torch.layer_norm {torch:.3f} ms ({faster}: {torch_over:.2f}x). As launched (under a {cap}-register "
          "cap; Nsight Compute's count) the fused kernel uses {regs} registers per thread, so an SM holds {blocks} of its {block}-thread blocks: {occ:.0%} occupancy, "
          "{lower} the fused softmax's {softmax_occ:.0%} at {softmax_regs} registers. The registers figure draws "
          "the kernel compiled without that cap: {compiled_regs} registers.",
          headline="layernorm at {cols:,} columns: torch.layer_norm {torch_over:.2f}x the fused kernel's speed; "
                   "the fused kernel's {regs} registers leave {occ:.0%} occupancy ({lower} the softmax's {softmax_occ:.0%})",
          values=_layernorm_values,
          checks=(says("faster", "torch_over", ">", 1, "torch is the faster", "the fused kernel is the faster"),
                  says("lower", "occ", "<", "softmax_occ", "below", "not below"))),
    Claim("row_shapes",
          "A row of 8192 in registers, split three ways, and the first capped at 32 registers: {table}. "
          "The fastest is {fastest}, at {fastest_occ:.0%} occupancy: {highest} (the most any split reaches: {most_occ:.0%}).",
          headline="a row in registers: the fastest split is {fastest}, at {fastest_occ:.0%} occupancy ({highest})",
          values=_shapes_values,
          checks=(says("highest", "fastest_occ", ">=", "most_occ", "the highest of them", "below the highest"),)),
    Claim("staged_rows_in_flight",
          "In registers, every scalar split (fused_) holds at most {rows_per_sm} rows per SM. Staged in shared memory: "
          "{staged_table}. The fastest, {staged}, holds {staged_rows} rows per SM and moves {staged_pct:.0f}% "
          "of copy, against {best_pct:.0f}% for the best split in registers ({staged_gap:.1f} points apart): "
          "{verdict}.",
          headline="staged in shared memory: {staged_rows} rows per SM against {rows_per_sm}, {staged_pct:.0f}% "
                   "of copy against {best_pct:.0f}%: {verdict}",
          values=_staged_values,
          checks=(states("staged_rows", ">", "rows_per_sm"),
                  says("verdict", "staged_gap", "<", 5, "more rows in flight did not make the row faster, "
                       "within 5 points", "more rows in flight changed the row's speed by 5 points or more")),
          explains="staging was written on the prediction that more rows per SM keep more loads in flight. "
                   "Each thread still makes 4-byte loads and the same instructions per value (the "
                   "instructions_pace_the_row claim)."),
    Claim("softmax_target",
          "The fastest fused softmax, {variant}, takes {ms:.3f} ms at {cols} x {cols}: {gbps:.0f} GB/s, "
          "{pct:.0f}% of the copy ceiling of the same run (target: at least {target:.0f}%, {met}), {vs_torch:.2f}x "
          "torch.softmax's speed ({torch_ms:.3f} ms, timed beside it; {faster}).",
          headline="softmax {cols}^2, the tuned solution-side kernel ({variant}): {pct:.0f}% of copy (target {target:.0f}%), "
                   "{vs_torch:.2f}x torch.softmax at this length",
          values=_target_values,
          checks=(target("met", "pct", ">=", "target"),
                  says("faster", "vs_torch", ">=", 1, "faster than torch at this length", "slower than torch at this length"))),
    Claim("instructions_pace_the_row",
          "Under Nsight Compute at {cols} x {cols} (recorded), the fused kernel issued {fused_inst:.0f} M warp "
          "instructions, its SM {fused_sm:.0f}% busy and its DRAM {fused_dram:.0f}%. The staged {staged}: "
          "{staged_inst:.0f} M, SM {staged_sm:.0f}%, DRAM {staged_dram:.0f}%. The vectorised {vector}: "
          "{vector_inst:.0f} M ({vector_share:.0%} of the fewer of the other two: under half), SM {vector_sm:.0f}%, "
          "DRAM {vector_dram:.0f}% ({dram_gain:+.0f} points over the fused kernel's: more than 20). The vectorised "
          "form issues fewer instructions and moves 16 bytes per load, and together they moved the row closer "
          "to the copy ceiling.",
          headline="the vectorised softmax issues {vector_share:.0%} of the instructions and keeps DRAM {vector_dram:.0f}% "
                   "busy, against {fused_dram:.0f}% for the graded kernel",
          values=_instruction_values,
          checks=(Compare("vector_share", "<", 0.5), Compare("dram_gain", ">", 20),
                  states("fused_sm", ">", "fused_dram")),
          explains="SM throughput is the busiest of the SM's units (issue, FMA pipes, load/store): a busy SM "
                   "at a low FLOP rate, as here, is issue- or load/store-bound, not compute-bound. This "
                   "experiment changes the instructions and the load width at once, so it cannot tell which "
                   "of the two moved the row."),
    Claim("vector_rows",
          "In 16-byte vectors: {vector_table}. The fastest, {vector}, moves {vector_pct:.0f}% of copy, "
          "{vector_over_fused:.2f}x the speed of the graded fused kernel ({fused_pct:.0f}%).",
          headline="in 16-byte vectors: {vector} moves {vector_pct:.0f}% of copy, {vector_over_fused:.2f}x the graded kernel",
          values=_vector_values, checks=(states("vector_pct", ">", "fused_pct"),)),
    Claim("capped_is_another_kernel",
          "The 1024 x 8 kernel capped at 32 registers uses {capped_regs} registers, {regs_same} the same "
          "kernel under the {default_cap}-register cap the lab's launcher gives every 1024-thread launch ({registers}). In each of {repeats} repeats it took {slower_lo:.1%}-{slower_hi:.1%} longer ({capped:.0f}% of copy "
          "against {uncapped:.0f}%), where one measurement's spread (p10 to p90) is at most {spread:.1%}: "
          "{same} ({over_spread:.0f}x). Under Nsight Compute it issued {capped_inst:.0f} M warp instructions against {uncapped_inst:.0f} M "
          "({more}).",
          headline="capped at 32 registers, the 1024 x 8 kernel uses {capped_regs}, {regs_same} under the default {default_cap}-register cap ({registers}): "
                   "{slower_lo:.1%}-{slower_hi:.1%} slower, {capped_inst:.0f} M instructions against "
                   "{uncapped_inst:.0f} M ({more})",
          values=_capped_values,
          checks=(says("regs_same", "capped_regs", ">=", "registers", "as many as", "fewer than"),
                  says("same", "over_spread", ">", 5, "a different kernel, by more than 5x that spread",
                       "not clearly a different kernel: within 5x that spread"),
                  says("more", "capped_inst", ">", "uncapped_inst", "more", "fewer"))),
]


def _shape(records, name):
    for r in need(records, "shape_registers", "rows"):
        if r["shape"] == name:
            return r
    raise Missing(f"shape_registers has no {name} row")
