"""The pictures of the machine, from recorded or worked-out data: work on streams, queues and
engines (Lab 07, and Lab 08's eager against replayed), one SM's resources (Lab 06); the drawing is
`kernellab.show.pictures.machine`'s."""

from __future__ import annotations

from kernellab import occupancy
from kernellab.course import reference
from kernellab.show.pictures import canvas, machine

Picture = canvas.Picture


# --- the machine: streams on engines, one SM's resources ---------------------------------------------

QUEUES = 8       # the driver's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS' default): streams share them
ENGINES = {"h2d": "copy engines: to GPU", "kernel": "SMs", "d2h": "copy engines: to host", "d2d": "SMs"}


def timeline(*timelines, titles: tuple = (), share_time: bool = True) -> Picture:
    """Work over time, one panel per timeline (one above the other, on one time axis unless
    `share_time` is False, so their gaps compare): the host's submissions, each stream and the
    hardware queue it feeds, then the copy engines and the SMs that ran the work. Takes a
    recorded or measured timeline (`TimelineData`, or its dict, as in data/reference/h200/lab07.json)
    or a simulator trace (`Timeline().trace`: the simulator runs one op at a time and has no clock,
    so each op takes one step, placed as early as the CUDA ordering rules allow). The caption
    says what the drawn panels show."""
    if not timelines:
        raise ValueError("timeline needs at least one timeline (TimelineData, its dict, or a Trace)")
    panels = [_panel(item, titles[i] if i < len(titles) else None) for i, item in enumerate(timelines)]
    units = {panel.pop("unit") for panel in panels}
    if len(units) > 1:
        raise ValueError("a timed timeline and an untimed trace cannot share a time axis: draw them apart")
    end = max(p["end"] for p in panels)
    for panel in panels:
        panel["least_width"] = end / 400          # the shortest span still shows as a sliver
    data = {"panels": panels, "unit": units.pop(), "share_time": bool(share_time)}
    sources = list(dict.fromkeys(p.pop("source") for p in panels))
    caption = _steps_caption(panels) if data["unit"] == "steps" else _timed_caption(panels)
    return canvas.picture(machine.draw_timeline, data, "Work on streams, queues and engines", caption, "; ".join(sources))


def _steps_caption(panels: list) -> str:
    """A simulator trace's caption: it ran its ops one at a time; how many steps the rules allow."""
    counted = [(len(p["spans"]), int(p["end"])) for p in panels]
    if len(counted) == 1:
        ops, steps = counted[0]
        if ops == steps:
            return (f"The simulator ran these {ops} ops one at a time, and the CUDA ordering rules make "
                    f"each wait for the one before.")
        return (f"The simulator ran these {ops} ops one at a time; the CUDA ordering rules would let them "
                f"run in {steps} steps.")
    parts = ", then ".join(f"{ops} ops in {steps} step{'s' * (steps != 1)}" for ops, steps in counted)
    return f"The simulator ran every op one at a time; the CUDA ordering rules would allow {parts}."


def _timed_caption(panels: list) -> str:
    """A timed timeline's caption, from what its panels draw: the host's ticks where there are any,
    how much of the copies' time runs beside a kernel where there are copies, else how long the
    SMs sit idle between their first kernel and their last."""
    clauses = []
    if any(span["submit"] is not None for p in panels for span in p["spans"]):
        clauses.append("black ticks: the host's submissions")
    if any(span["kind"] in ("h2d", "d2h") for p in panels for span in p["spans"]):
        hidden = [_share_beside(p["spans"]) for p in panels]
        clauses.append(f"copies run beside a kernel for {_per_panel(hidden)} of their time")
    idle = [_sm_idle(p["spans"]) for p in panels]
    if len(clauses) < 2 and any(share is not None for share in idle):
        clauses.append(f"the SMs idle {_per_panel(idle)} of the time from first kernel to last")
    if not clauses:
        return "One bar per op, on its stream's queue and on the engine that ran it."
    sentence = "; ".join(clauses) + "."
    return sentence[0].upper() + sentence[1:]


def _union(intervals: list) -> list:
    """Sorted, merged (start, end) intervals."""
    merged: list = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def _sm_idle(spans: list) -> float | None:
    """The share of the time from the first kernel's start to the last one's end when no kernel
    runs (None without kernels)."""
    busy = _union([(s["start"], s["end"]) for s in spans if ENGINES.get(s["kind"], "SMs") == "SMs"])
    if not busy:
        return None
    whole = busy[-1][1] - busy[0][0]
    return 1.0 - sum(end - start for start, end in busy) / whole if whole else 0.0


def _share_beside(spans: list) -> float | None:
    """The share of the copies' time during which some kernel runs (None without copies)."""
    kernels = _union([(s["start"], s["end"]) for s in spans if ENGINES.get(s["kind"], "SMs") == "SMs"])
    copies = [(s["start"], s["end"]) for s in spans if s["kind"] in ("h2d", "d2h")]
    total = sum(end - start for start, end in copies)
    if not total:
        return None
    beside = sum(max(0.0, min(end, k_end) - max(start, k_start))
                 for start, end in copies for k_start, k_end in kernels)
    return beside / total


def _per_panel(shares: list) -> str:
    """"63%" for one panel; "63% (top) and 0% (bottom)" for two; "(panel 3)" from three."""
    shown = [f"{share:.0%}" if share is not None else "none" for share in shares]
    if len(shown) == 1:
        return shown[0]
    places = ("top", "bottom") if len(shown) == 2 else tuple(f"panel {i + 1}" for i in range(len(shown)))
    named = [f"{share} ({place})" for share, place in zip(shown, places)]
    return ", ".join(named[:-1]) + " and " + named[-1]


def _panel(item, title: str | None) -> dict:
    if hasattr(item, "dependencies"):              # a Trace: the order the rules allow, no clock
        ops = item.timed()
        deps = item.dependencies()
        step: dict = {}
        spans = []
        for op in ops:
            before = [step[other.index] for other in ops if other.index in step and deps[op.index] >> other.index & 1]
            step[op.index] = max(before, default=0) + 1
            spans.append({"row": op.row, "kind": op.kind, "label": op.label, "start": step[op.index] - 1,
                          "end": step[op.index], "submit": None})
        rows, source, unit = item.rows(), canvas.TRACED + " (no clock: one step per op)", "steps"
        title = title or "each op as early as the CUDA ordering rules let it start"
    else:
        record = item.as_dict() if hasattr(item, "as_dict") else item
        start = min(s["start_ms"] for s in record["spans"])
        spans = [{"row": s["row"], "kind": s["kind"], "label": s["label"], "start": s["start_ms"] - start,
                  "end": s["end_ms"] - start,
                  "submit": None if s.get("submit_ms") is None else max(0.0, s["submit_ms"] - start)}
                 for s in record["spans"]]
        rows, source, unit = list(record["rows"]), record.get("source", "recorded"), "ms"
        title = title or record.get("title")
    queues = {row: f"{row} -> queue {i % QUEUES + 1}" for i, row in enumerate(rows)}
    engines = list(dict.fromkeys(ENGINES.get(k, "SMs") for k in ("h2d", "kernel", "d2h")
                                 if any(span["kind"] == k for span in spans)))
    for span in spans:
        span["places"] = [(queues[span["row"]], 0, 1)]
    for engine in engines:                     # spans at once on one engine share its row
        on = sorted((s for s in spans if ENGINES.get(s["kind"], "SMs") == engine), key=lambda s: s["start"])
        levels: list = []
        for span in on:
            level = next((i for i, free in enumerate(levels) if free <= span["start"]), len(levels))
            levels[level:level + 1] = [span["end"]]
            span["level"] = level
        for span in on:
            span["places"].append((engine, span.pop("level"), max(1, len(levels))))
    host = ["host"] if any(span["submit"] is not None for span in spans) else []
    lanes = [*host, *queues.values(), *engines]
    end = max(s["end"] for s in spans)
    return {"title": f"{title or source}: {end:.3g} {unit.removesuffix('s') if end == 1 else unit}", "source": source, "unit": unit, "lanes": lanes, "spans": spans,
            "dividers": [len(host), len(host) + len(queues)][not host:], "end": end,
            "queues": {row: int(q.rsplit(" ", 1)[1]) for row, q in queues.items()}}


def replay_timelines(n: int | None = None, record: dict | None = None, shown: int = 8) -> tuple[dict, dict]:
    """Lab 08's eager and replayed chains as two timelines (dicts `timeline` takes), built from the
    recorded medians of data/reference/h200/lab08.json (idle_gaps): `shown` kernels of the row for
    `n` elements (default: the shortest kernel still wider than a tenth of the eager pace), each
    kernel_ms long, one every eager_ms / kernels (eager) or graph_ms / kernels (replayed)."""
    record = record or (reference.load("08") or {}).get("records", {}).get("idle_gaps")
    if not record:
        raise ValueError("no recorded idle_gaps in data/reference/h200/lab08.json")
    kernels, rows = record["kernels"], record["rows"]
    if n is None:
        row = next((r for r in rows if r["kernel_ms"] >= 0.1 * r["eager_ms"] / kernels), rows[-1])
    else:
        row = next((r for r in rows if r["n"] == n), None)
        if row is None:
            raise ValueError(f"no recorded row for n={n}: the rows have n = {', '.join(str(r['n']) for r in rows)}")
    gpu = record.get("provenance", {}).get("gpu", "a GPU")

    def chain(total_ms: float, label: str, one_submit: bool) -> dict:
        pace = total_ms / kernels
        spans = [{"label": f"kernel {i}", "row": "stream", "kind": "kernel", "start_ms": i * pace,
                  "end_ms": i * pace + row["kernel_ms"], "submit_ms": 0.0 if one_submit and i == 0 else
                  (None if one_submit else i * pace)} for i in range(shown)]
        return {"source": f"recorded on {gpu}: the first repeat of data/reference/h200/lab08.json (each time "
                          "the median of its samples)",
                "rows": ["stream"], "spans": spans, "title": label}
    return (chain(row["eager_ms"], f"eager: {shown} of {kernels} launches, n = {row['n']}", False),
            chain(row["graph_ms"], f"replayed graph: the same {shown} kernels", True))


def sm_fill(result, cc=None, block_size: int | None = None, registers_per_thread: int | None = None,
            static_shared: int = 0, dynamic_shared: int = 0) -> Picture:
    """One SM's warp slots, registers, shared memory and block slots, filled by the resident blocks
    of an occupancy result, the limiter outlined. `result`: kernellab.occupancy's Occupancy, or a
    lab's own (active_blocks, limiters) with the launch it was asked about (cc, block_size, ...)."""
    own = hasattr(result, "registers_per_block")
    cc = result.cc if own else cc
    if cc is None or (not own and (block_size is None or registers_per_thread is None)):
        raise ValueError("sm_fill needs kernellab.occupancy's result, or the lab's result with cc, "
                         "block_size and registers_per_thread")
    arch = occupancy.architecture(cc)
    block_size = result.block_size if own else block_size
    warps = occupancy.warps_per_block(arch, block_size)
    registers = result.registers_per_block if own else occupancy.registers_per_warp(arch, registers_per_thread) * warps
    shared = result.shared_per_block if own else occupancy.shared_allocation(arch, static_shared + dynamic_shared)
    shared_total = result.carveout_bytes if own and result.carveout_bytes else arch.shared_per_sm
    blocks = result.active_blocks
    resources = [("warp slots", "warps", warps, arch.max_warps_per_sm, "warps"),
                 ("registers", "registers", registers, arch.registers_per_sm, "registers"),
                 ("shared memory", "shared_memory", shared, shared_total, "bytes"),
                 ("block slots", "blocks", 1, arch.max_blocks_per_sm, "blocks")]
    data = {"cc": tuple(arch.cc), "block_size": block_size, "active_blocks": blocks,
            "limiters": tuple(result.limiters), "occupancy": blocks * warps / arch.max_warps_per_sm,
            "resources": [{"name": name, "limit": limit, "per_block": per_block, "total": total,
                           "used": blocks * per_block, "limiter": limit in result.limiters,
                           "label": f"{blocks * per_block:,} / {total:,} {unit}"}
                          for name, limit, per_block, total, unit in resources]}
    data["headline"] = (f"{blocks} blocks of {block_size} threads: {blocks * warps} of "
                        f"{arch.max_warps_per_sm} warps ({data['occupancy']:.0%})")
    names = " and ".join(r["name"] for r in data["resources"] if r["limiter"]) or "nothing"
    caption = f"The {names} run out first: one more block would not fit, whatever room the others have."
    return canvas.picture(machine.draw_sm_fill, data, f"One SM of {arch.label}", caption,
                    "worked out by kernellab.occupancy (the driver's rules); nothing measured" if own else
                    "the lab's occupancy result; each block's share by the driver's rules; nothing measured")
