"""Lab 07's claims: the discussion's sentences, each checked against the records (the worst
recorded repeat where bench repeated the run)."""

from __future__ import annotations

import functools

import numpy as np

from kernellab.course.claims import Claim, Compare, Missing, need, repeats_of, says, target
from kernellab.gpu.timeline import TimelineData

from experiments.lab07_constants import (
    CLEAR_DIFFERENCE_POINTS, CONCURRENCY_RECORD, COPY_ENGINES_RATIO, MAIN_CONNECTIONS, NUMBER, ONE_STREAM_OVERLAP_PCT,
    PIPELINE_STEPS_MAIN, TARGETS)
from experiments.lab07_measure import copy_out_wait, model_errors, recorders_judged


def _sweep(records, connections: int) -> dict:
    """The worst repeat's figures of one connection count: 16 and 8 streams over 1 (small kernels,
    pre-enqueued), and the model's worst error at 2-16 streams with where it was."""
    name = CONCURRENCY_RECORD[connections]
    repeats = repeats_of(records, name, NUMBER)
    for record in repeats:
        if int(record.get("max_connections", 0)) != connections:
            raise Missing(f"{name} was measured at {record.get('max_connections')} connections, not {connections}")
    errors = [(error, key) for record in repeats for key, error in model_errors(record).items()]
    rows = [{r["streams"]: r["speedup"] for r in rec["shapes"]["few_sms"]["modes"]["gated"]} for rec in repeats]
    worst, where = max(errors)
    return {"s16": min(r[16] for r in rows), "s8": min(r[8] for r in rows), "error": 100 * worst,
            "where": where, "repeats": len(repeats), "target": TARGETS["speedup_16_streams"],
            "target_error": 100 * TARGETS["model_error"]}


def _pacing_values(records):
    """Plain launches against pre-enqueued ones (few-SM kernels, 16 streams, 32 queues) in every
    repeat, beside the host's cost of a plain launch inside the recorder (the model's input)."""
    shapes = [rec["shapes"]["few_sms"] for rec in repeats_of(records, CONCURRENCY_RECORD[MAIN_CONNECTIONS], NUMBER)]
    at_16 = {mode: [next(r["speedup"] for r in shape["modes"][mode] if r["streams"] == 16) for shape in shapes]
             for mode in ("plain", "gated")}
    launches = [ms for shape in shapes for ms in shape["model"]["plain"]["host_launch_ms"]]
    return {"launch_lo": min(launches), "launch_hi": max(launches),
            "kernel_ms": max(shape["kernel_alone"]["median_ms"] for shape in shapes), "repeats": len(shapes),
            "plain_lo": min(at_16["plain"]), "plain_hi": max(at_16["plain"]),
            "gated_lo": min(at_16["gated"]), "gated_hi": max(at_16["gated"])}


def _streams_values(records):
    at_8, at_32 = _sweep(records, 8), _sweep(records, MAIN_CONNECTIONS)
    return {"s16_8": at_8["s16"], "s8_8": at_8["s8"], "s16_32": at_32["s16"], "repeats": at_8["repeats"],
            "past_8": at_8["s16"] / at_8["s8"], "raised": at_32["s16"] / at_8["s16"]}


def _pitfall_values(records):
    cases = need(records, "default_stream", "cases")
    values = {"streams": cases["16_streams"]["speedup"],
              "blocking": cases["16_streams_with_default_stream_launches"]["speedup"],
              "nonblocking": cases["16_nonblocking_streams_with_default_stream_launches"]["speedup"]}
    return {**values, "blocking_share": values["blocking"] / values["streams"],
            "nonblocking_over_blocking": values["nonblocking"] / values["blocking"]}


def _barrier_values(records):
    cases = need(records, "events_vs_barriers", "cases")
    values = {name: cases[case]["d_ready_ms"]["median"] for name, case in (
        ("events", "diamond_events_beside_background"), ("barriers", "diamond_synchronized_beside_background"),
        ("events_alone", "diamond_events"), ("barriers_alone", "diamond_synchronized"))}
    return {**values, "ratio": values["barriers"] / values["events"]}


def _pipeline_repeats(records) -> list[dict]:
    repeats = repeats_of(records, "pipeline", NUMBER)
    for record in repeats:
        need(record, "cases", "pinned", "bare")          # older records measured only through the recorder
    return repeats


def _overlap_values(records):
    """The pinned pipeline's hidden share measured both ways, on the worst repeat of each."""
    repeats = _pipeline_repeats(records)
    pinned = [record["cases"]["pinned"] for record in repeats]
    for case in pinned:
        need(case, "bare", "method")      # older records made the share from three medians
        need(case, "beside_copies_fraction")   # older records' share by events was the kernels' time beside a copy
    return {"bare": 100 * min(c["bare"]["hidden_fraction"] for c in pinned),
            "by_events": 100 * min(c["hidden_fraction"] for c in pinned),
            "beside": 100 * min(c["beside_copies_fraction"] for c in pinned),
            "worst": 100 * min(min(c["hidden_fraction"], c["bare"]["hidden_fraction"]) for c in pinned),
            "apart": 100 * max(abs(c["hidden_fraction"] - c["bare"]["hidden_fraction"]) for c in pinned),
            "agree": TARGETS["methods_agree_points"],
            "pageable": 100 * max(r["cases"]["pageable"]["bare"]["hidden_fraction"] for r in repeats),
            "pageable_ms": min(r["cases"]["pageable"]["bare"]["pipeline_ms"]["median_ms"] for r in repeats),
            "pageable_serial": min(r["cases"]["pageable"]["bare"]["copies_ms"]["median_ms"]
                                   + r["cases"]["pageable"]["bare"]["kernels_ms"]["median_ms"] for r in repeats),
            "problems": sum(len(c["problems"]) for c in pinned), "repeats": len(repeats),
            "target": 100 * TARGETS["hidden_fraction"],
            "pipeline": max(c["bare"]["pipeline_ms"]["median_ms"] for c in pinned),
            "copies": max(c["bare"]["copies_ms"]["median_ms"] for c in pinned),
            "kernels": max(c["bare"]["kernels_ms"]["median_ms"] for c in pinned)}


def _copy_out_wait(timeline: dict) -> dict:
    """lab07_measure.copy_out_wait of a recorded timeline, the wait also as a share of the kernels' time."""
    data = TimelineData.from_dict(timeline)
    wait = copy_out_wait(data)
    return {**wait, "wait": 100 * wait["wait_ms"] / data.covered_ms("kernel"),
            "paid": 100 * wait["paid_ms"] / data.covered_ms("kernel")}


def _methods_part_values(records):
    """Why the two overlap shares part, per repeat: the kernels' time beside a copy minus the share
    without the recorder, against the part of the copy-out engine's wait for the first kernel that
    the makespan pays, in that repeat's middle run (what `hidden_by_events` takes off)."""
    pinned = [record["cases"]["pinned"] for record in _pipeline_repeats(records)]
    for case in pinned:
        need(case, "beside_copies_fraction")
    rows = [{"gap": 100 * (c["beside_copies_fraction"] - c["bare"]["hidden_fraction"]),
             **_copy_out_wait(c["timeline"])} for c in pinned]
    worst = max(rows, key=lambda row: abs(row["gap"] - row["paid"]))
    return {"residual": abs(worst["gap"] - worst["paid"]),
            "copy_in_ms": worst["copy_in_ms"], "copy_out_ms": worst["copy_out_ms"],
            **{f"{name}s": ", ".join(f"{row[name]:.{digits}f}" for row in rows)
               for name, digits in (("gap", 1), ("wait", 1), ("paid", 1), ("wait_ms", 2), ("idle_after_ms", 2))},
            "chunk_share": 100 / records["pipeline"]["chunks"], "chunks": records["pipeline"]["chunks"],
            "clear_points": CLEAR_DIFFERENCE_POINTS, "repeats": len(rows)}


def _recorder_values(records):
    """What the pipeline's recorder and the default one cost per op on the host over bare, as the
    target judges them (recorders_judged: the worse of the two pairings), worst repeat; and each
    pairing's own worst for the pipeline's recorder."""
    repeats = _pipeline_repeats(records)
    for record in repeats:
        need(record, "recorder", "copy", "targeted")   # older records: one pairing only
    judged = [recorders_judged(r["recorder"]) for r in repeats]
    values = {f"{prefix}{call}": max(j[call][way] for j in judged)
              for prefix, way in (("inferred_", "inferred_starts"), ("", "recorded")) for call in ("launch", "copy")}
    pairings = {pairing: max(j[call][f"inferred_starts_{pairing}"] for j in judged for call in ("launch", "copy"))
                for pairing in ("beside_bare", "among_all")}
    return {**values, **pairings, "inferred_per_op": max(values["inferred_launch"], values["inferred_copy"]),
            "better": min(pairings.values()), "per_op": max(values["launch"], values["copy"]),
            "plain": _plain_launch_us(repeats), "beside_reps": max(j["copy"]["reps"] for j in judged),
            "among_reps": max(r["recorder"]["copy"]["inferred_starts_over_bare_spread_us"]["reps"] for r in repeats),
            "target_us": TARGETS["recorder_us_per_op"], "repeats": len(repeats)}


COMPILED_WAYS = (("inferred", "inferred_starts_over_bare_us", "inferred_starts_python_over_bare_us"),
                 ("recorded", "us_per_op", "recorded_python_over_bare_us"),
                 ("trace", "trace_only_over_bare_us", "trace_only_python_over_bare_us"))


def _compiled_values(records):
    """Each recorder on the compiled hot path and on the Python one, taken in turn in the same reps:
    the worst repeat of each, per launch, per copy and per op (the worse of the two), and what the
    compiled one saves at worst per op."""
    repeats = _pipeline_repeats(records)
    for record in repeats:
        need(record, "recorder", "launch", "inferred_starts_python_over_bare_us")   # older records: one hot path
    values = {}
    for name, compiled, python in COMPILED_WAYS:
        for call in ("launch", "copy"):
            values[f"{name}_{call}"] = max(r["recorder"][call][compiled] for r in repeats)
            values[f"{name}_python_{call}"] = max(r["recorder"][call][python] for r in repeats)
        values[name] = max(values[f"{name}_launch"], values[f"{name}_copy"])
        values[f"{name}_python"] = max(values[f"{name}_python_launch"], values[f"{name}_python_copy"])
        values[f"saved_{name}"] = values[f"{name}_python"] - values[name]
    return {**values, "least_saved": min(values[f"saved_{name}"] for name, _, _ in COMPILED_WAYS),
            "plain": _plain_launch_us(repeats), "repeats": len(repeats)}


def _per_op_values(way: str, records):
    """What one of the lighter instruments costs the host per op over the bare call (worst repeat):
    `way` "trace_only" (`Timeline(timed=())`, no event on the hot path) or "first_op_makespan" (the
    overlap's Makespan on its declared streams, only the first op watched)."""
    repeats = _pipeline_repeats(records)
    for record in repeats:
        need(record, "recorder", "launch", f"{way}_over_bare_us")
    worst = {call: max(r["recorder"][call][f"{way}_over_bare_us"] for r in repeats) for call in ("launch", "copy")}
    return {**worst, "per_op": max(worst.values()), "target_us": TARGETS["recorder_us_per_op"],
            "plain": _plain_launch_us(repeats), "repeats": len(repeats)}


def _lighter_instrument_claim(name: str, instrument: str, headline: str, way: str, explains: str) -> Claim:
    """The claim on what one of the lighter instruments (`_per_op_values`' `way`) costs the host per op."""
    return Claim(name,
                 f"{instrument} costs the host {{launch:+.1f}} us per launch and {{copy:+.1f}} us per copy over "
                 "the bare call (a plain launch: {plain:.1f} us; worst of {repeats} repeat(s)): at worst "
                 "{per_op:+.2f} us per op (target: at most {target_us:.0f} us, {met}).",
                 headline=f"{headline} {{per_op:+.2f}} us per op (target {{target_us:.0f}} us: {{met}})",
                 values=functools.partial(_per_op_values, way),
                 checks=(target("met", "per_op", "<=", "target_us"),), explains=explains)


def _plain_launch_us(repeats) -> float:
    """The bare launch's host time, the median over the repeats: how fast the host was, which every
    per-op cost scales with (23-46 us across the H200's lent hosts)."""
    return float(np.median([r["recorder"]["launch"]["bare_us"]["median"] for r in repeats]))


def _slowdown_values(records):
    """The pinned pipeline inside the recorder against bare, both timed the same way (worst repeat)."""
    repeats = _pipeline_repeats(records)
    for record in repeats:
        need(record, "cases", "pinned", "recorder_slowdowns")   # older records timed the two apart
    worst = max(repeats, key=lambda r: r["cases"]["pinned"]["recorder_slowdown"])["cases"]["pinned"]
    need(worst, "bare_window_ms")
    return {"recorded": worst["pipeline_ms"]["median"], "bare": worst["bare_window_ms"]["median"],
            "slowdown": 100 * worst["recorder_slowdown"], "target_slowdown": 100 * TARGETS["recorder_slowdown"],
            "slowdown_p10": 100 * worst["recorder_slowdowns"]["p10"], "slowdown_p90": 100 * worst["recorder_slowdowns"]["p90"],
            "repeats": len(repeats)}


def _slowdown_parts_values(records):
    """The pinned pipeline inside each part of the recorder, and inside the overlap's Makespan, against
    bare, taken in turn (the worst repeat of each)."""
    repeats = _pipeline_repeats(records)
    parts = [need(r, "cases", "pinned", "part_slowdowns") for r in repeats]
    for record in repeats:
        need(record, "makespan_watches")    # older records' Makespan watched every op
    for part in parts:
        need(part, "two_events_per_op")   # older records' recorder had two events per op itself
    worst = {part: 100 * max(p[part]["median"] for p in parts) for part in parts[0]}
    starts = [need(r, "cases", "pinned", "start_sources") for r in repeats]
    recorded = 100 * max(r["cases"]["pinned"]["recorder_slowdown"] for r in repeats)
    return {**worst, "recorded": recorded, "second_event": worst["two_events_per_op"] - recorded,
            "clear_points": CLEAR_DIFFERENCE_POINTS,
            **{k: sum(s[k] for s in starts) for k in ("own_event", "inferred", "uncertain")},
            "uncertain_max_us": max(s["uncertain_max_us"] for s in starts),
            "repeats": len(repeats), "target_slowdown": 100 * TARGETS["recorder_slowdown"]}


def _opened_streams_values(records):
    """The pinned pipeline in its recorder, its streams opened, and in the same recorder with them not
    opened (the part first_ops_own_event), each against bare (the worst repeat of each)."""
    repeats = _pipeline_repeats(records)
    parts = [need(r, "cases", "pinned", "part_slowdowns", "first_ops_own_event") for r in repeats]
    recorded = 100 * max(r["cases"]["pinned"]["recorder_slowdown"] for r in repeats)
    not_opened = 100 * max(p["median"] for p in parts)
    return {"recorded": recorded, "first_ops_own_event": not_opened, "first_event": not_opened - recorded,
            "clear_points": CLEAR_DIFFERENCE_POINTS, "repeats": len(repeats)}


def _recorder_parts_values(records):
    """The recorder's parts measured apart, per launch and per copy (worst repeat): the call between
    two of its events with no hook, with one event after it (what the pipeline's recorder records
    per op), and through a hook that only passes it on; what the default recorder (two events per
    op) and the pipeline's (one) add to their parts; and what noting an op alone adds to the hook
    (the trace-only recorder over the do-nothing hook)."""
    repeats = _pipeline_repeats(records)
    for record in repeats:
        need(record, "recorder", "launch", "event_after_only_over_bare_us")   # older records: the pair only
    values = {}
    for call in ("launch", "copy"):
        worst = {way: max(r["recorder"][call][key] for r in repeats) for way, key in (
            ("events", "events_only_over_bare_us"), ("event", "event_after_only_over_bare_us"),
            ("hooks", "hooks_only_over_bare_us"), ("whole", "us_per_op"),
            ("inferred", "inferred_starts_over_bare_us"), ("trace_only", "trace_only_over_bare_us"))}
        parts, one_event = worst["events"] + worst["hooks"], worst["event"] + worst["hooks"]
        note = worst["trace_only"] - worst["hooks"]
        values.update({f"{name}_{call}": value for name, value in (
            ("events", worst["events"]), ("event", worst["event"]), ("hooks", worst["hooks"]),
            ("parts", parts), ("rest", worst["whole"] - parts), ("one_event", one_event),
            ("inferred_rest", worst["inferred"] - one_event), ("note", note), ("noted", one_event + note))})
    return {**values, **{name: max(values[f"{name}_launch"], values[f"{name}_copy"])
                         for name in ("parts", "one_event", "noted")},
            "repeats": len(repeats), "target_us": TARGETS["recorder_us_per_op"]}


def _compiled_floor_values(records):
    """The floor of a recorder that times each op with one event, compiled, per launch and per copy
    (worst repeat): one event after the call recorded from C, and the compiled hook whose halves do
    nothing; and what the pipeline's recorder costs beside the two."""
    repeats = _pipeline_repeats(records)
    for record in repeats:
        need(record, "recorder", "launch", "event_after_compiled_over_bare_us")   # older records: no floor
    values = {}
    for call in ("launch", "copy"):
        worst = {way: max(r["recorder"][call][f"{key}_over_bare_us"] for r in repeats) for way, key in (
            ("event", "event_after_compiled"), ("hooks", "hooks_only_compiled"), ("inferred", "inferred_starts"))}
        floor = worst["event"] + worst["hooks"]
        values.update({f"event_{call}": worst["event"], f"hooks_{call}": worst["hooks"],
                       f"floor_{call}": floor, f"rest_{call}": worst["inferred"] - floor})
    return {**values, "floor": max(values["floor_launch"], values["floor_copy"]),
            "plain": _plain_launch_us(repeats), "repeats": len(repeats), "target_us": TARGETS["recorder_us_per_op"]}


def _steps_of(records, names) -> tuple[list, dict, dict]:
    """The pipeline repeats, and each named step's hidden share (%, the worst repeat's) and pipeline
    time (ms, the slowest repeat's), all without the recorder."""
    repeats = _pipeline_repeats(records)
    for record in repeats:
        for name in names:
            need(record, "steps", name)
    hidden = {name: 100 * min(r["steps"][name]["hidden_fraction"] for r in repeats) for name in names}
    ms = {name: max(r["steps"][name]["pipeline_ms"]["median_ms"] for r in repeats) for name in names}
    return repeats, hidden, ms


def _step_keys(hidden: dict, ms: dict) -> dict:
    return {**{f"hidden_{name}": v for name, v in hidden.items()}, **{f"ms_{name}": v for name, v in ms.items()}}


CHUNK_STEPS = ("chunks_4", "chunks_8", "chunks_12", "chunks_16", "chunks_64")


def _steps_values(records):
    """Each chunk count's hidden share without the recorder, on the worst repeat."""
    repeats, hidden, ms = _steps_of(records, CHUNK_STEPS)
    main = 100 * min(r["cases"]["pinned"]["bare"]["hidden_fraction"] for r in repeats)
    same = PIPELINE_STEPS_MAIN
    return {**_step_keys(hidden, ms), "repeats": len(repeats), "main": main, "apart": abs(main - hidden[same]),
            "agree": TARGETS["methods_agree_points"]}


def _issue_values(records):
    """One stream against four, and breadth-first issue against the lab's depth-first, 8 chunks each."""
    repeats, hidden, ms = _steps_of(records, ("one_stream", PIPELINE_STEPS_MAIN, "breadth_first"))
    return {**_step_keys(hidden, ms), "repeats": len(repeats), "agree": TARGETS["methods_agree_points"],
            "order_apart": abs(hidden["breadth_first"] - hidden[PIPELINE_STEPS_MAIN]),
            "floor": ONE_STREAM_OVERLAP_PCT}


def _copy_engines_values(records):
    """Every copy on one stream against the lab's pipeline (8 chunks, 4 streams): the pipelines'
    times (the slowest repeat's), and the copies alone on one stream over the same copies on four
    (the smallest ratio over the repeats, each from one repeat's medians)."""
    repeats, hidden, ms = _steps_of(records, (PIPELINE_STEPS_MAIN, "one_copy_stream"))
    ratios = [r["steps"]["one_copy_stream"]["copies_ms"]["median_ms"]
              / r["steps"][PIPELINE_STEPS_MAIN]["copies_ms"]["median_ms"] for r in repeats]
    return {**_step_keys(hidden, ms), "repeats": len(repeats), "ratio": min(ratios),
            "threshold": COPY_ENGINES_RATIO,
            "copies_one": max(r["steps"]["one_copy_stream"]["copies_ms"]["median_ms"] for r in repeats),
            "copies_four": max(r["steps"][PIPELINE_STEPS_MAIN]["copies_ms"]["median_ms"] for r in repeats)}


def _pipeline_model_values(records):
    pinned = need(records, "pipeline", "cases", "pinned")
    need(pinned, "bare")
    predicted = TimelineData.from_dict(pinned["predicted"]).makespan_ms
    measured = pinned["bare"]["pipeline_ms"]["median_ms"]
    spans = need(pinned, "timeline", "spans")
    gap = float(np.median(np.diff(sorted(s["submit_ms"] for s in spans))))
    return {"predicted": predicted, "measured": measured, "error": 100 * (predicted - measured) / measured,
            "error_size": 100 * abs(predicted - measured) / measured, "target_error": 100 * TARGETS["model_error"],
            "gap": gap}


CLAIMS = [
    Claim("sixteen_streams_at_32",
          "With 32 hardware queues (CUDA_DEVICE_MAX_CONNECTIONS=32), 16 streams of small pre-enqueued "
          "kernels run {s16:.1f}x faster than one stream, {s8:.1f}x on 8 streams (the worst of {repeats} "
          "recorded repeat(s); target: 16 streams at least {target:.0f}x, {met}).",
          headline="16 small kernels on 16 streams: {s16:.1f}x (worst of {repeats} repeats, 32 queues; target {target:.0f}x: {met})",
          values=lambda r: _sweep(r, MAIN_CONNECTIONS), checks=(target("met", "s16", ">=", "target"),)),
    Claim("streams_4_8",
          "At the driver's default of 8 hardware queues, 16 streams gain {s16_8:.1f}x over one and 8 "
          "streams {s8_8:.1f}x ({past_8:.2f}x for the second 8: {beyond}). With 32 queues the same 16 streams gain {s16_32:.1f}x, "
          "{raised:.1f}x what they gain at 8 (the worst of {repeats} recorded repeat(s)): {verdict}.",
          headline="{s16_8:.1f}x at the default 8 queues",
          values=_streams_values,
          checks=(says("beyond", "past_8", "<", 1.25, "under 1.25x: streams beyond the 8th share a queue with an "
                       "earlier one and wait for it", "1.25x or more: streams beyond the 8th still gain"),
                  says("verdict", "raised", ">", 1.5, "more than 1.5x: the article's 4-8 streams is the default queue count, not "
                       "a property of the work: past 8, streams pay only with CUDA_DEVICE_MAX_CONNECTIONS "
                       "raised", "1.5x or less: raising the queue count did not pay past 8 streams")),
          article="streams"),
    Claim("model_at_32_connections",
          "The scheduler model, told the 32 hardware queues, predicts every speed-up at 2-16 streams "
          "within {error:.1f}% (worst: {where}, over {repeats} recorded repeat(s); target: within "
          "{target_error:.0f}%, {met}).",
          values=lambda r: _sweep(r, MAIN_CONNECTIONS), checks=(target("met", "error", "<=", "target_error"),),
          explains="the residual is largest for plain launches, where the host's time between launches is an "
                   "input measured in that configuration and taken as constant, while real launches vary "
                   "(the timeline's own events add to them); for GPU-filling kernels a measured speed-up a "
                   "little above the model's 1x is the next kernel's blocks taking SMs as the previous "
                   "kernel's blocks finish one by one, where the model's blocks all last exactly block_ms"),
    Claim("model_at_8_connections",
          "The scheduler model, told the 8 hardware queues, predicts every speed-up at 2-16 streams "
          "within {error:.1f}% (worst: {where}, over {repeats} recorded repeat(s); target: within "
          "{target_error:.0f}%, {met}).",
          values=lambda r: _sweep(r, 8), checks=(target("met", "error", "<=", "target_error"),),
          explains="without the queue count the model predicted for 8 queues what 32 queues give, about "
                   "twice what was measured: stream k shares queue k % 8 with stream k + 8, and an item waits for the one "
                   "before it in its queue, whichever stream that came from. What remains is what the "
                   "model leaves out at 32 queues: the host's varying launch pacing and blocks that all "
                   "last exactly block_ms"),
    Claim("plain_launches_pace",
          "Inside the recorder a plain launch costs the host {launch_lo:.2f}-{launch_hi:.2f} ms, against "
          "{kernel_ms:.2f} ms for one kernel alone: 16 streams of plain launches reach {plain_lo:.1f}-"
          "{plain_hi:.1f}x over {repeats} repeats, pre-enqueued behind one event {gated_lo:.1f}-{gated_hi:.1f}x: "
          "{verdict}.",
          values=_pacing_values,
          checks=(says("verdict", "plain_hi", "<", "gated_lo", "even with kernels this long, the host's launch "
                       "cost holds the plain launches back", "plain launches keep up with pre-enqueued ones"),)),
    Claim("default_stream_serializes",
          "A stream-less launch after each kernel takes 16 streams from {streams:.1f}x to {blocking:.2f}x "
          "over one stream ({blocking_share:.0%} of the gain kept: {lost}). On non-blocking streams the same "
          "launches leave {nonblocking:.1f}x ({nonblocking_over_blocking:.1f}x the blocking streams': {kept}).",
          values=_pitfall_values,
          checks=(says("lost", "blocking_share", "<", 0.5, "under half, as the legacy default stream waits for every "
                       "blocking stream, and they for it", "half or more of the gain kept"),
                  says("kept", "nonblocking_over_blocking", ">", 2, "more than twice",
                       "no more than twice"))),
    Claim("events_not_barriers",
          "Ordered by events, D's result is ready {events:.2f} ms after the start beside an unrelated long "
          "kernel ({events_alone:.2f} ms alone); ordered by cuda.synchronize, {barriers:.2f} ms "
          "({barriers_alone:.2f} ms alone), {ratio:.1f}x later: {verdict}.",
          values=_barrier_values,
          checks=(says("verdict", "ratio", ">", 2, "more than 2x: the barrier waits for the unrelated kernel too",
                       "2x or less: the barrier cost little here"),)),
    Claim("overlap_hides",
          "From pinned memory the pipeline hides {bare:.0f}% of the smaller of its copies and its kernels "
          "measured without the recorder (the median of each rep's share, from its own three makespans "
          "taken in turn; medians: the pipeline {pipeline:.2f} ms, its copies alone {copies:.2f} ms, "
          "its kernels alone {kernels:.2f} ms) and {by_events:.0f}% by the recorder's own events (the kernels' "
          "time beside a copy, {beside:.0f}%, less the copy-out engine's wait for the first kernel, which "
          "the makespan pays), the worst of {repeats} repeat(s) each; the two are at most {apart:.0f} points apart (target: within "
          "{agree:.0f}, {agree_met}), with {problems} shares outside [0, 1]. Pinned, the worse of the two is "
          "{worst:.0f}% (target: at least {target:.0f}%, {met}). From pageable memory the pipeline takes "
          "{pageable_ms:.1f} ms against {pageable_serial:.1f} ms for its copies and kernels one after the "
          "other (a share of {pageable:.0f}%): {pageable_verdict}.",
          headline="pinned copy/compute overlap {worst:.0f}% (target {target:.0f}%: {met}), its two "
                   "measures {apart:.0f} points apart (target {agree:.0f}: {agree_met})",
          values=_overlap_values,
          checks=(target("met", "worst", ">=", "target"),
                  target("agree_met", "apart", "<=", "agree"), Compare("problems", "<=", 0),
                  says("pageable_verdict", "pageable_ms", ">", "pageable_serial",
                       "slower than no overlap at all", "no slower than running them one after the other")),
          explains="a pinned copy returns at once, so the host queues the next chunk's copy while this "
                   "chunk's kernel runs; a pageable copy makes the host wait for it (the driver stages it "
                   "through its own pinned buffer), so the next chunk's work is queued too late to overlap"),
    Claim("overlap_methods_part",
          "Why the share by events is taken less the copy-out's wait: the kernels' time beside a copy "
          "counts a kernel's time as hidden while any copy runs beside it, the makespans only the time the "
          "pipeline saved. In each repeat's middle "
          "recorded run the first copy out starts {wait_mss} ms after the first copy in ends, waiting for "
          "the first kernel: {waits}% of the kernels' time (one chunk of {chunks} is {chunk_share:.1f}%), and "
          "the copies out idle {idle_after_mss} ms after it, time into which that wait could have been "
          "absorbed: the makespan pays {paids}%. A "
          "copy out takes {copy_out_ms:.2f} ms against {copy_in_ms:.2f} ms for the first copy in: {bound}. The "
          "kernels' time beside a copy and the share without the recorder part by {gaps} points over "
          "{repeats} repeat(s): at worst {residual:.2f} points from the wait it pays, {verdict} (under {clear_points:.0f} points).",
          values=_methods_part_values,
          checks=(says("verdict", "residual", "<", "clear_points",
                       "so the copy-out's wait for the first kernel accounts for the gap",
                       "so that wait does not account for the gap"),
                  says("bound", "copy_out_ms", ">", "copy_in_ms",
                       "the copies out, the slower, bound the pipeline, so their wait lengthens it "
                       "whatever copy runs beside that kernel",
                       "the copies out are no slower, so their wait need not lengthen the pipeline")),
          explains="a stream runs its copy in, kernel and copy out in order, so no copy out can start "
                   "before the first kernel ends, while copies alone start theirs as soon as the first copy "
                   "in is done; with C equal chunks, about 1/C of the kernels' time can be counted hidden "
                   "by the events and not saved in the makespan. Where the gap differs from that wait, what "
                   "else parts the two is not established (data/reference/h200/logs, session 10)"),
    Claim("recorder_costs",
          "Inside the pipeline's recorder (`Timeline(infer_starts=True)`: one event per op where it can), a "
          "launch costs the host {inferred_launch:+.1f} us and a copy {inferred_copy:+.1f} us over the bare call "
          "(a plain launch: {plain:.1f} us; worst of {repeats} repeat(s)), each the worse of two pairings of "
          "the same repeats: taken in turn with the bare call alone ({beside_reps} reps), at worst "
          "{beside_bare:+.2f} us per op, and among all the ways ({among_reps} reps), {among_all:+.2f} us. Judged on the "
          "worse, {inferred_per_op:+.2f} us per op (target: at most {target_us:.0f} us, {met}); the better "
          "pairing reads {better:+.2f} us, {better_met}. With a pair of events per op (the default "
          "`Timeline()`), a launch costs {launch:+.1f} us and a copy {copy:+.1f} us: at worst {per_op:+.2f} us "
          "per op, {two_events}.",
          headline="pipeline's recorder {inferred_per_op:+.2f} us per op, the worse of two pairings (target "
                   "{target_us:.0f} us: {met}; the better {better:+.2f})",
          values=_recorder_values,
          checks=(target("met", "inferred_per_op", "<=", "target_us"),
                  says("better_met", "better", "<=", "target_us", "within the target", "over the target too"),
                  says("two_events", "per_op", ">", "target_us",
                       "over the target: where the full set of events would disturb, the pipeline records one "
                       "per op", "within the target as well")),
          explains="the recorder notes each op and records CUDA events on its stream, reused from a pool and "
                   "recorded through the driver's cuEventRecord: the default brackets each launch and copy "
                   "with two, the pipeline's records one after each and infers its start from the op before on "
                   "its stream. The parts measured apart are the floor on this host (claims recorder_parts and "
                   "compiled_floor): timing an op needs its records, and watching it needs the hook. Among "
                   "all the ways a run's median moved ~1 us from repeat to repeat on the H200's host, so the "
                   "recorders are also taken in turn with the bare call alone, in two halves before and after "
                   "the other pairing (the reference record took them all after it). On the lent hosts the two "
                   "pairings of one repeat have differed by up to 2.5 us per copy, among all mostly the "
                   "higher, and not from the garbage collector, the order of the pairings or any one group "
                   "of the other ways (sessions 20-22, data/reference/h200/logs). Opening a recorder (its "
                   "hooks set on numba-cuda's classes) and closing it slow the calls right after, a bare "
                   "call's too: on an H100 the first copy of a sample took ~130 us after a closed recorder "
                   "against ~86 after a bare one, level from the 20th call on (session 22). So each sample "
                   "makes 20 calls before its clock starts, and their excess is recorded apart as the "
                   "opening's cost (the reference record predates this); that did not close the gap. What "
                   "parts the pairings is not established: each is taken as one more run of the same cost, "
                   "so the target holds only where both say so. A pipeline whose host submits faster than the GPU "
                   "works hides that cost, so the makespan can stay within its target while the per-op "
                   "cost does not; one whose host falls behind is slowed by all of it. CUPTI's activity "
                   "trace, which times each op on the GPU's side with no event on its stream, cost more "
                   "on this host: +13.7 us per launch and +13.9 us per copy, and it slowed the pipeline "
                   "+21-23% (session 10, call A, data/reference/h200/logs)"),
    _lighter_instrument_claim(
        "recorder_trace_only", "The recorder with no event on the hot path (`Timeline(timed=())`: every op "
        "in the trace, none timed)", "trace-only recorder", "trace_only",
        explains="what is left is the hook and one tuple per op: the op's label and row are worked out "
                 "when the trace is read, and no launch configuration, stream or array is kept alive "
                 "(keeping them made each garbage-collector pass longer as the trace grew)"),
    _lighter_instrument_claim(
        "makespan_costs", "The Makespan the recorder-free overlap is measured with (its streams declared: "
        "only the block's first op is watched, with an event before it, and one event per stream at the "
        "end)", "overlap's Makespan", "first_op_makespan",
        explains="once the first op is submitted its watch closes and numba-cuda's own calls are put "
                 "back, so every op after it runs as bare; what is left is the first op's watch and event, "
                 "shared by the block's ops. Watching every op through the recorder's hook, to note its "
                 "stream, cost +4.4 us per launch and +6.4 us per copy (session 12, call F)"),
    Claim("compiled_hot_path",
          "On its compiled hot path (kernellab/gpu/_hotpath.c) the pipeline's recorder costs the host "
          "{inferred_launch:+.2f} us per launch and {inferred_copy:+.2f} us per copy over bare (at worst "
          "{inferred:+.2f}); on the Python hot path, in the same reps, {inferred_python_launch:+.2f} and "
          "{inferred_python_copy:+.2f} us (at worst {inferred_python:+.2f}; worst of {repeats} repeat(s); a "
          "plain launch: {plain:.1f} us). At worst per op, the default recorder costs {recorded:+.2f} us "
          "compiled against {recorded_python:+.2f} in Python, and the trace-only one {trace:+.2f} against "
          "{trace_python:+.2f}: compiled saves {saved_inferred:.2f}, {saved_recorded:.2f} and "
          "{saved_trace:.2f} us per op at worst (the least: {least_saved:.2f}), so {cheaper}.",
          headline="the compiled hot path saves at least {least_saved:.2f} us per op over the Python one",
          values=_compiled_values,
          checks=(says("cheaper", "least_saved", ">", 0, "the compiled hot path is the cheaper one for all three",
                       "the compiled hot path is not the cheaper one for all three"),),
          explains="the compiled hooks and halves do what the Python ones do, on the same containers, with "
                   "no Python frame of their own and the driver's cuEventRecord called directly; what is "
                   "left is the driver's record itself (1.4-2 us alone, more right after a launch or a "
                   "copy on the lent hosts), the objects each op's note makes, and the host's speed, which "
                   "varied 1.5-2x between the lent machines (a plain launch 24-53 us in session 17)"),
    Claim("recorder_slowdown",
          "Timed the same way, between two events on the default stream around the call, and taken in "
          "turn, the pinned pipeline takes {recorded:.2f} ms inside the recorder against {bare:.2f} ms bare "
          "(medians); each rep's recorded / bare gives {slowdown:+.1f}% (the median over the reps, "
          "p10-p90 {slowdown_p10:+.1f}% to {slowdown_p90:+.1f}%; worst of {repeats} repeat(s); target: "
          "within {target_slowdown:.0f}%, {met}).",
          values=_slowdown_values,
          checks=(target("met", "slowdown", "<=", "target_slowdown"),),
          explains="the recorder's own makespan starts at its first span, when the first copy began, "
                   "after the host had already submitted it; against a bare time that includes that "
                   "submission it would flatter the recorder, so both are timed from the host's side"),
    Claim("recorder_slowdown_parts",
          "Taken in turn with the same bare run, the trace alone (no event) slows the pinned pipeline "
          "{trace_only:+.1f}%, timing its kernels only {kernels_timed:+.1f}% and timing its copies only "
          "{copies_timed:+.1f}% (medians over the reps, worst of {repeats} repeat(s)): {which}. The "
          "pipeline's recorder, with one event per op where it can ({own_event:.0f} starts by their own "
          "event, {inferred:.0f} at the end of the op before, {uncertain:.0f} uncertain by at most "
          "{uncertain_max_us:.0f} us, over all the runs), slows it {recorded:+.1f}%; with two events per "
          "op, {two_events_per_op:+.1f}%, {second_event:+.1f} points more: {starts_verdict} (under "
          "{clear_points:.0f} points the reps do not tell two slowdowns apart). The Makespan the overlap is "
          "measured with (only its first op watched) slows it {makespan:+.1f}%, {makespan_within} "
          "the {target_slowdown:.0f}% an instrument may add.",
          values=_slowdown_parts_values,
          checks=(says("which", "copies_timed", ">", "kernels_timed",
                       "timing the copies costs the pipeline more than timing its kernels",
                       "timing the copies costs the pipeline no more than timing its kernels"),
                  says("starts_verdict", "second_event", ">", "clear_points",
                       "a clear cost of the second event", "no clear difference"),
                  says("makespan_within", "makespan", "<=", "target_slowdown", "within", "beyond")),
          explains="it is not the host's time: in session 8's diagnostics (data/reference/h200/logs) the "
                   "host spinning 15 us before each copy, with no event, cost the pipeline nothing. It is a "
                   "timing event recorded on a stream that is idle while other streams' copies are in "
                   "flight (session 9, call A: 5 processes, 3 rounds of 20 reps): one before each stream's "
                   "first op slowed the pipeline by over 10% (up to +17%) in 89 of 300 reps and by under 5% in 180; the "
                   "same events recorded before the work began, untimed ones in their place, and one after "
                   "every op (+1.3-1.9%) did not. In the slow reps' timelines that stream's first copy in "
                   "starts only when another stream's first copy out ends, as if the event had been queued "
                   "behind it; why the driver does so is not established"),
    Claim("recorder_opened_streams",
          "The pipeline's recorder opens each of its streams with an event before the work, so that no "
          "start event is recorded while the work runs; so recorded, the pinned pipeline is {recorded:+.1f}% "
          "slower than bare, and with the streams not opened (each stream's first op then gets a start event "
          "of its own, recorded while other streams' copies run) {first_ops_own_event:+.1f}%, {first_event:+.1f} "
          "points more: {first_verdict} (medians over the reps, worst of {repeats} repeat(s); under "
          "{clear_points:.0f} points the reps do not tell two slowdowns apart).",
          values=_opened_streams_values,
          checks=(says("first_verdict", "first_event", ">", "clear_points",
                       "a clear cost of those start events", "no clear difference"),),
          explains="a timing event on a stream that is idle while other streams' copies are in flight held "
                   "that stream's copy in back in some reps on the H200 (session 9, call A); an event "
                   "recorded on each stream before the work did not, and each first op's start is then "
                   "inferred from it, uncertain by up to when the host submitted that op"),
    Claim("recorder_parts",
          "Measured apart in the same reps (worst of {repeats} repeat(s)), two of the recorder's events "
          "around the call, recorded from Python with no hook (`events_around`), cost {events_launch:+.1f} us per launch and {events_copy:+.1f} us "
          "per copy over bare, and a hook that only passes the call on {hooks_launch:+.1f} and "
          "{hooks_copy:+.1f} us. Those two parts alone ({parts_launch:+.1f} and {parts_copy:+.1f} us, at "
          "worst {parts:+.1f}) {floor} the {target_us:.0f} us target, and the default recorder costs "
          "{rest_launch:+.1f} and {rest_copy:+.1f} us beside them. One event after the call "
          "costs {event_launch:+.1f} and {event_copy:+.1f} us: with the hook, {one_event_launch:+.1f} and "
          "{one_event_copy:+.1f} us (at worst {one_event:+.1f}), {one_floor} the target. Noting the op "
          "as the trace-only recorder does adds {note_launch:+.1f} and {note_copy:+.1f} us to the hook; "
          "with it the parts come to {noted_launch:+.1f} and {noted_copy:+.1f} us (at worst {noted:+.1f}): "
          "{noted_verdict}. The pipeline's recorder costs {inferred_rest_launch:+.1f} and "
          "{inferred_rest_copy:+.1f} us beside its event and hook.",
          values=_recorder_parts_values,
          checks=(says("floor", "parts", "<=", "target_us", "fit within", "already exceed"),
                  says("one_floor", "one_event", "<=", "target_us", "within", "already over"),
                  says("noted_verdict", "noted", "<=", "target_us", "within the target",
                       "over it, so a recorder that times each op with an event recorded from Python, as "
                       "these parts are, and notes it, does not meet the target on this host")),
          explains="timing an op needs its event records (the driver's cuEventRecord, 1.4-2 us each on "
                   "the H200's hosts when nothing runs between them, more right after a copy: sessions 7 "
                   "and 16, data/reference/h200/logs) and watching it needs the hook; what is left is "
                   "the recorder's own work on every op, after the driver's own work for the op (compiled, "
                   "claim compiled_hot_path, it can cost less than these parts recorded from Python); where "
                   "an event, the hook and the note alone come to more than the target, only fewer events "
                   "(the trace alone, or the Makespan's one per stream) meet it for sure"),
    Claim("compiled_floor",
          "Compiled, what a recorder that times each op with an event cannot do without costs, worst of "
          "{repeats} repeat(s) (a plain launch: {plain:.1f} us): one event after the call, the same every "
          "time, recorded through the compiled module (no ctypes), {event_launch:+.2f} us per launch and {event_copy:+.2f} us per "
          "copy over bare, and the compiled hook with halves that do nothing {hooks_launch:+.2f} and "
          "{hooks_copy:+.2f} us. Together, {floor_launch:+.2f} and {floor_copy:+.2f} us (at worst "
          "{floor:+.2f}), they {floor_verdict} the {target_us:.0f} us target; the pipeline's recorder "
          "costs {rest_launch:+.2f} and {rest_copy:+.2f} us beside them.",
          headline="an event and the hook alone, compiled: {floor:+.2f} us per op",
          values=_compiled_floor_values,
          checks=(says("floor_verdict", "floor", "<=", "target_us", "fit within", "already exceed"),),
          explains="any recorder that times each op with an event through the hooks pays at least these "
                   "two on every op: the driver's cuEventRecord, and the hook that hands the op to it. "
                   "What the pipeline's recorder adds beside them is its own note of the op. Where the "
                   "two alone exceed the target, a recorder with an event per op cannot meet it on that "
                   "host, and only fewer events do (the trace-only recorder, the Makespan)"),
    Claim("pipeline_steps",
          "Without the recorder, 4 chunks hide {hidden_chunks_4:.0f}% ({ms_chunks_4:.2f} ms), 8 chunks "
          "{hidden_chunks_8:.0f}% ({ms_chunks_8:.2f} ms), 12 chunks {hidden_chunks_12:.0f}% ({ms_chunks_12:.2f} ms), 16 chunks {hidden_chunks_16:.0f}% "
          "({ms_chunks_16:.2f} ms) and 64 chunks {hidden_chunks_64:.0f}% ({ms_chunks_64:.2f} ms), worst "
          "of {repeats} repeat(s): from 4 chunks to 8 the pipeline {more}, and from 8 to 16 it {less}. The lab's 8-chunk "
          "pipeline, measured the same way earlier in the run, hid {main:.0f}%: one configuration's two "
          "measurements are {apart:.0f} points apart, {noise} the {agree:.0f} points the overlap target "
          "allows between methods.",
          values=_steps_values,
          checks=(says("more", "hidden_chunks_8", ">", "hidden_chunks_4",
                       "hides more (shorter ends leave less unhidden)", "does not hide more"),
                  says("less", "hidden_chunks_16", "<", "hidden_chunks_8",
                       "hides less (the host falls behind)", "does not hide less"),
                  says("noise", "apart", "<=", "agree", "within", "more than")),
          explains="with C chunks, the first chunk's copy in and the last chunk's copy out overlap with "
                   "nothing: about 1/C of the copies at each end; more chunks cost more submissions, which "
                   "the host must keep ahead of the GPU"),
    Claim("pipeline_issue_order",
          "On one stream the lab's 8 chunks hide {hidden_one_stream:.0f}% ({ms_one_stream:.2f} ms): {serial} "
          "(at most {floor:.0f}% counts as none); on 4 streams {hidden_chunks_8:.0f}% ({ms_chunks_8:.2f} ms). "
          "Issued breadth first (every copy in, then every kernel, then every copy out) they hide "
          "{hidden_breadth_first:.0f}% ({ms_breadth_first:.2f} ms), {order_apart:.0f} points from depth first: "
          "the issue order {order} (at most {agree:.0f} points, what the two overlap methods may differ by; "
          "worst of {repeats} repeat(s), without the recorder).",
          values=_issue_values,
          checks=(says("serial", "hidden_one_stream", "<=", "floor", "nothing overlaps", "something overlaps"),
                  says("order", "order_apart", "<=", "agree", "makes no difference", "makes a difference")),
          explains="a stream runs its ops in order, so one stream overlaps nothing. On the GPU no op "
                   "waits behind another stream's op (a copy engine for each direction, a hardware queue per "
                   "stream), but the host submits one op at a time: breadth first, the first chunk's copy out "
                   "is submitted only after every copy in and every kernel, so on a host that takes a good "
                   "part of a copy's time per submission the copies out start late and no longer overlap the "
                   "copies in"),
    Claim("pipeline_copy_engines",
          "With every copy on one stream and the kernels on the other three, ordered by events, the lab's "
          "8 chunks take {ms_one_copy_stream:.2f} ms against {ms_chunks_8:.2f} ms with each stream copying "
          "its own chunks (hiding {hidden_one_copy_stream:.0f}% of the kernels behind its own copies). Their "
          "copies alone take {copies_one:.2f} ms on one stream and {copies_four:.2f} ms on four, "
          "{ratio:.2f}x at least over {repeats} repeat(s): {engines} (above {threshold:.2f}x; without the "
          "recorder).",
          values=_copy_engines_values,
          checks=(says("engines", "ratio", ">", "threshold",
                       "on four streams the copies in and out ran at once, each direction on its own copy "
                       "engine, and on one stream they take turns",
                       "no second copy engine is seen: on four streams the copies in and out did not run "
                       "at once"),),
          explains="a stream runs its work in order, so the copies on one stream never overlap each other, "
                   "whichever direction they go; on different streams a copy in and a copy out can run at "
                   "the same time, on the GPU's two copy directions' engines, and the pipeline's copies take "
                   "about as long as the slower direction's alone"),
    Claim("pipeline_model",
          "Costed with this run's copy and kernel times and the host's submit gap seen in the recorder "
          "({gap:.3f} ms per operation), the model puts the pinned pipeline at {predicted:.2f} ms against "
          "{measured:.2f} ms measured without the recorder ({error:+.0f}%: {error_size:.0f}% off, target "
          "within {target_error:.0f}%, {met}).",
          values=_pipeline_model_values, checks=(target("met", "error_size", "<=", "target_error"),),
          explains="the model queues each chunk's copy, kernel and copy on its stream as the trace "
                   "submitted them, and lets copies in each direction share one copy engine; where it is "
                   "off, the pipeline's real copies are not the bandwidth-bound blocks it assumes (e.g. "
                   "both directions sharing the host link)"),
]
