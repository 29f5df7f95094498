"""Lab 07's claims: the discussion's sentences, each checked against the records. A finding reads
the median of the recorded repeats and shows their range; a target is judged on the worst repeat.
recorder_over_floor is about the course's recorder, not about streams: it is the instructors'
(docs/measuring.md, Lab 07), and the notebook does not print it."""

from __future__ import annotations

import numpy as np

from kernellab import scheduler
from kernellab.course.claims import Claim, Missing, need, repeats_of, says, target

from experiments.lab07_constants import (
    CONCURRENCY_RECORD, MAIN_CONNECTIONS, MODEL_AGREES_PCT, NUMBER, ONE_STREAM_OVERLAP_PCT, PIPELINE_STEPS,
    PIPELINE_STEPS_MAIN, PIPELINE_STREAMS, TARGETS)
from experiments.lab07_measure import model_errors, speedups


def _spread(name: str, values) -> dict:
    """{name}: the median of one figure over the repeats, {name}_lo and {name}_hi its range."""
    return {name: float(np.median(values)), f"{name}_lo": min(values), f"{name}_hi": max(values)}


def _sweep(records, connections: int) -> dict:
    """One connection count's stream sweep: 16 and 8 streams over 1 (small kernels, pre-enqueued),
    the worst repeat's, and the model's worst error at 2-16 streams with where it was."""
    name = CONCURRENCY_RECORD[connections]
    repeats = repeats_of(records, name, NUMBER)
    for record in repeats:
        if int(record.get("max_connections", 0)) != connections:
            raise Missing(f"{name} was measured at {record.get('max_connections')} connections, not {connections}")
    errors = [(error, key) for record in repeats for key, error in model_errors(record).items()]
    rows = [speedups(record) for record in repeats]
    worst, where = max(errors)
    return {"s16": min(r[16] for r in rows), "s8": min(r[8] for r in rows), "error": 100 * worst, "where": where,
            "repeats": len(repeats), "target": TARGETS["speedup_16_streams"]}


def _model_values(records):
    at_8, at_32 = _sweep(records, 8), _sweep(records, MAIN_CONNECTIONS)
    worst = max(at_8, at_32, key=lambda sweep: sweep["error"])
    where = (worst["where"].replace("few_sms", "small kernels").replace("fills_gpu", "GPU-filling kernels")
             .replace("/gated", ", pre-enqueued").replace("/plain", ", plain launches"))
    return {"error_8": at_8["error"], "error_32": at_32["error"], "error": worst["error"], "where": where,
            "repeats": at_8["repeats"], "target_error": 100 * TARGETS["model_error"]}


def _queues_values(records):
    at_8, at_32 = ([speedups(rec) for rec in repeats_of(records, CONCURRENCY_RECORD[c], NUMBER)]
                   for c in (8, MAIN_CONNECTIONS))
    return {**_spread("s16_8", [r[16] for r in at_8]), **_spread("s8_8", [r[8] for r in at_8]),
            **_spread("s16_32", [r[16] for r in at_32]), "repeats": len(at_8),
            "past_8": max(r[16] / r[8] for r in at_8)}


def _filling_values(records):
    """16 streams over 1 for kernels that fill every SM (pre-enqueued, 32 queues): the median over
    the repeats, with their range."""
    repeats = repeats_of(records, CONCURRENCY_RECORD[MAIN_CONNECTIONS], NUMBER)
    return {**_spread("fill", [speedups(rec, "fills_gpu")[16] for rec in repeats]), "repeats": len(repeats)}


def _pacing_values(records):
    """Plain launches against pre-enqueued ones (small kernels, 16 streams, 32 queues), with the
    host's time per plain launch inside the recorder and one kernel's time alone."""
    repeats = repeats_of(records, CONCURRENCY_RECORD[MAIN_CONNECTIONS], NUMBER)
    shapes = [rec["shapes"]["few_sms"] for rec in repeats]
    at_16 = {mode: [speedups(rec, "few_sms", mode)[16] for rec in repeats] for mode in ("plain", "gated")}
    launches = [1e3 * float(np.median(shape["model"]["plain"]["host_launch_ms"])) for shape in shapes]
    return {**_spread("plain", at_16["plain"]), **_spread("gated", at_16["gated"]), **_spread("launch_us", launches),
            "kernel_ms": float(np.median([shape["kernel_alone"]["median_ms"] for shape in shapes])),
            "repeats": len(shapes)}


def _pitfall_values(records):
    repeats = [need(r, "cases") for r in repeats_of(records, "default_stream", NUMBER)]
    return {**_spread("streams", [c["16_streams"]["speedup"] for c in repeats]),
            **_spread("blocking", [c["16_streams_with_default_stream_launches"]["speedup"] for c in repeats]),
            **_spread("nonblocking", [c["16_nonblocking_streams_with_default_stream_launches"]["speedup"]
                                      for c in repeats]), "repeats": len(repeats)}


def _barrier_values(records):
    repeats = [need(r, "cases") for r in repeats_of(records, "events_vs_barriers", NUMBER)]
    values = {}
    for name, case in (("events", "diamond_events_beside_background"), ("barriers", "diamond_synchronized_beside_background"),
                       ("events_alone", "diamond_events"), ("barriers_alone", "diamond_synchronized")):
        values.update(_spread(name, [c[case]["d_ready_ms"]["median"] for c in repeats]))
    return {**values, "ratio": values["barriers"] / values["events"], "repeats": len(repeats)}


def _pipeline_repeats(records) -> list[dict]:
    repeats = repeats_of(records, "pipeline", NUMBER)
    for record in repeats:
        need(record, "cases", "pinned", "bare", "method")    # older records made the share from three medians
    return repeats


def _overlap_values(records):
    """The pinned and pageable pipelines' hidden share without the recorder (the median over the repeats,
    their range, the worst, which the target judges), and what resolves the pageable share: its copies'
    widest p10-p90 spread within a repeat against its kernels alone (the median over the repeats)."""
    repeats = _pipeline_repeats(records)
    pinned, pageable = ([100 * r["cases"][case]["bare"]["hidden_fraction"] for r in repeats]
                        for case in ("pinned", "pageable"))
    bare = [r["cases"]["pageable"]["bare"] for r in repeats]
    return {**_spread("pinned", pinned), "target": 100 * TARGETS["hidden_fraction"],
            **_spread("pageable", pageable), "repeats": len(repeats),
            "copies_spread": max(b["copies_ms"]["p90_ms"] - b["copies_ms"]["p10_ms"] for b in bare),
            "kernels_ms": float(np.median([b["kernels_ms"]["median_ms"] for b in bare]))}


def _steps(records, names, **extra) -> dict:
    """Each named tuning step's hidden share (%) and time (ms) without the recorder: the median over
    the repeats (with _lo and _hi)."""
    repeats = _pipeline_repeats(records)
    values = {"repeats": len(repeats), **extra}
    for name in names:
        steps = [need(r, "steps", name) for r in repeats]
        values.update({**_spread(f"hidden_{name}", [100 * step["hidden_fraction"] for step in steps]),
                       **_spread(f"ms_{name}", [step["pipeline_ms"]["median_ms"] for step in steps])})
    return values


def _issue_order_values(records):
    """One stream, depth first and breadth first (the tuning sweep's steps), and the scheduler model's
    times for the two orders with a host that costs nothing, each op costed from the one-stream run
    (everything in turn there: its copies alone / 2 per chunk, its kernels alone / 1 per chunk), the
    medians over the repeats: breadth first on the lab's 4 streams and on one stream per chunk."""
    values = _steps(records, ("one_stream", PIPELINE_STEPS_MAIN, "breadth_first"), floor=ONE_STREAM_OVERLAP_PCT)
    chunks = PIPELINE_STEPS["one_stream"][0]
    steps = [need(r, "steps", "one_stream") for r in _pipeline_repeats(records)]
    copy_ms = float(np.median([s["copies_ms"]["median_ms"] for s in steps])) / (2 * chunks)
    kernel_ms = float(np.median([s["kernels_ms"]["median_ms"] for s in steps])) / chunks
    sm_count = need(records, "pipeline", "provenance", "sm_count")

    def model(order, streams):
        return scheduler.pipeline_ms(order, streams, chunks, copy_ms, kernel_ms, sm_count)
    breadth = model("breadth_first", PIPELINE_STREAMS)
    return {**values, "copy_ms": copy_ms, "kernel_ms": kernel_ms, "chunks": chunks,
            "model_depth": model("depth_first", PIPELINE_STREAMS), "model_breadth": breadth,
            "model_breadth_own": model("breadth_first", chunks), "agree": MODEL_AGREES_PCT,
            "model_gap": 100 * abs(breadth - values["ms_breadth_first"]) / values["ms_breadth_first"]}


def _chunks_values(records):
    """The chunk counts' steps, and the copies alone in 64 chunks over the same copies in 8."""
    ratios = [r["steps"]["chunks_64"]["copies_ms"]["median_ms"] / r["steps"]["chunks_8"]["copies_ms"]["median_ms"]
              for r in _pipeline_repeats(records)]
    return {**_steps(records, ("chunks_4", "chunks_8", "chunks_16", "chunks_64")), **_spread("copies_64", ratios)}


# --- the course's recorder -------------------------------------------------------------------

PYTHON_RECORDER = "inferred_starts_python_over_bare_us"


def recorder_over_bare_us(cost: dict) -> float:
    """The recorder's host time per op over the bare call. A record made while a compiled recorder
    existed (before 2026-12-07; its `hot_path` says which ran) holds the Python recorder, the only
    one now, apart (PYTHON_RECORDER), and the compiled one's in `inferred_starts_over_bare_us`."""
    return cost[PYTHON_RECORDER] if PYTHON_RECORDER in cost else need(cost, "inferred_starts_over_bare_us")


def _recorder_values(records):
    """The pipeline's recorder (the Python one, `recorder_over_bare_us`), and its floor (one event
    recorded after the call), per op over the bare call, the worst repeat's; the recorder over the
    floor, which the target judges; and the pinned pipeline inside the recorder that ran against
    bare (median over the reps, worst repeat)."""
    repeats = _pipeline_repeats(records)
    values = {}
    for call in ("launch", "copy"):
        costs = [need(r, "recorder", call) for r in repeats]
        values[f"recorder_{call}"] = max(recorder_over_bare_us(c) for c in costs)
        values[f"floor_{call}"] = max(need(c, "event_after_only_over_bare_us") for c in costs)
        values[f"over_{call}"] = max(recorder_over_bare_us(c) - c["event_after_only_over_bare_us"] for c in costs)
        values[f"bare_{call}"] = float(np.median([c["bare_us"]["median"] for c in costs]))
    made_with_compiled = any(PYTHON_RECORDER in r["recorder"][call] for r in repeats for call in ("launch", "copy"))
    slowdowns = [100 * r["cases"]["pinned"]["recorder_slowdown"] for r in repeats]
    return {**values, "over": max(values["over_launch"], values["over_copy"]), "target_us": TARGETS["recorder_over_floor_us"],
            "slowdown": max(slowdowns), "repeats": len(repeats),
            "inside": "the compiled recorder it then ran, since removed" if made_with_compiled else "it"}


CLAIMS = [
    Claim("sixteen_streams_at_32",
          "With 32 hardware queues, 16 streams of small pre-enqueued kernels finish {s16:.1f}x faster than "
          "one stream, and 8 streams {s8:.1f}x (worst of {repeats} repeats; target: at least {target:.0f}x, {met}).",
          headline="16 small kernels on 16 streams: {s16:.1f}x faster than on 1 (target {target:.0f}x: {met})",
          values=lambda r: _sweep(r, MAIN_CONNECTIONS), checks=(target("met", "s16", ">=", "target"),),
          explains="all 128 blocks fit at once, so a shortfall means some streams started late: their timeline shows which"),
    Claim("filling_kernels_gain_nothing",
          "Kernels that fill every SM gain {fill:.2f}x on 16 streams over one ({fill_lo:.2f}-{fill_hi:.2f}x over "
          "{repeats} repeats, pre-enqueued, 32 queues): {verdict}.",
          headline="GPU-filling kernels on 16 streams: {fill:.2f}x over one",
          values=_filling_values,
          checks=(says("verdict", "fill_hi", "<", 1.1, "with no room left on the GPU, streams gain nothing",
                       "streams still gain"),)),
    Claim("streams_4_8",
          "At the driver's default of 8 hardware queues, 16 streams of small pre-enqueued kernels gain {s16_8:.1f}x ({s16_8_lo:.1f}-{s16_8_hi:.1f}x "
          "over {repeats} repeats) and 8 streams {s8_8:.1f}x; 16 streams gain at most {past_8:.2f}x over 8: {beyond}. "
          "At 32 queues 16 streams gain {s16_32:.1f}x.",
          headline="pre-enqueued, at the default 8 queues: 16 streams gain {s16_8:.1f}x, 8 streams {s8_8:.1f}x",
          values=_queues_values,
          checks=(says("beyond", "past_8", "<", 1.1, "streams past the 8th gain nothing (stream 9 shares a queue "
                       "with stream 1 and waits behind it)", "streams past the 8th still gain"),),
          article="streams"),
    Claim("model_predicts",
          "Told the number of hardware queues, the scheduler model predicts every speed-up at 2-16 streams "
          "within {error:.0f}% ({error_32:.0f}% at 32 queues, {error_8:.0f}% at 8; worst: {where}; target: within "
          "{target_error:.0f}%, {met}).",
          headline="the model predicts every speed-up within {error:.0f}% (target {target_error:.0f}%: {met})",
          values=_model_values, checks=(target("met", "error", "<=", "target_error"),),
          explains="the model takes the host's time between launches as constant, while real launches vary; "
                   "and its blocks all last exactly as long"),
    Claim("plain_launches_pace",
          "Launched one by one from Python (one launch every {launch_us:.0f} us, the timeline's events included), 16 streams of "
          "{kernel_ms:.1f} ms kernels gain {plain:.1f}x ({plain_lo:.1f}-{plain_hi:.1f}x); pre-enqueued behind "
          "one event, {gated:.1f}x ({gated_lo:.1f}-{gated_hi:.1f}x): {verdict}.",
          headline="launched from Python, 16 streams gain {plain:.1f}x; pre-enqueued, {gated:.1f}x",
          values=_pacing_values,
          checks=(says("verdict", "plain_hi", "<", "gated_lo", "the host's launches hold the streams back",
                       "the host keeps up"),)),
    Claim("default_stream_serializes",
          "A launch with no stream after each kernel takes 16 streams from {streams:.1f}x to {blocking:.2f}x "
          "over one stream: {lost}. On non-blocking streams the same launches leave {nonblocking:.1f}x "
          "(medians of {repeats} repeats).",
          headline="one stream-less launch per kernel: 16 streams gain {blocking:.2f}x, against {streams:.1f}x without "
                   "it in the same runs",
          values=_pitfall_values,
          checks=(says("lost", "blocking", "<", 1.5, "the legacy default stream waits for every blocking stream, "
                       "and they for it", "some of the gain is kept"),)),
    Claim("events_not_barriers",
          "Beside an unrelated long kernel, D's result is ready {events:.2f} ms after the start when ordered by "
          "events and {barriers:.2f} ms when ordered by cuda.synchronize, {ratio:.1f}x later: {verdict} "
          "(alone: {events_alone:.2f} and {barriers_alone:.2f} ms).",
          headline="ordered by cuda.synchronize, D is ready {ratio:.1f}x later than ordered by events",
          values=_barrier_values,
          checks=(says("verdict", "ratio", ">", 2, "the barrier waits for the unrelated kernel too",
                       "the barrier cost little here"),)),
    Claim("overlap_hides",
          "From pinned memory the pipeline hides {pinned:.0f}% of its kernels' time behind its copies "
          "({pinned_lo:.0f}-{pinned_hi:.0f}% over {repeats} repeats; target: at least {target:.0f}% in each, {met}). "
          "From pageable memory it hides {pageable_verdict} (a share of {pageable:.0f}%, {pageable_lo:.0f} to "
          "{pageable_hi:.0f}%, {resolution}: its copies alone spread over up to {copies_spread:.1f} ms within a "
          "repeat, p10 to p90, against {kernels_ms:.1f} ms for all its kernels).",
          headline="from pinned memory the pipeline hides {pinned:.0f}% of its kernels (target {target:.0f}%: "
                   "{met}); from pageable memory, {pageable_verdict}",
          values=_overlap_values,
          checks=(target("met", "pinned_lo", ">=", "target"),
                  says("pageable_verdict", "pageable_hi", "<=", 0, "nothing: it is no faster than its copies and "
                       "kernels one after the other", "some"),
                  says("resolution", "copies_spread", ">", "kernels_ms", "within the noise of one rep",
                       "outside the noise of one rep")),
          explains="a pinned copy returns at once, so the host queues the next chunk while this one computes; "
                   "a pageable copy makes the host wait while the driver stages it"),
    Claim("pipeline_chunks",
          "On 4 streams the pipeline takes {ms_chunks_4:.2f} ms in 4 chunks (hiding {hidden_chunks_4:.0f}%), "
          "{ms_chunks_8:.2f} ms in 8 ({hidden_chunks_8:.0f}%), {ms_chunks_16:.2f} ms in 16 ({hidden_chunks_16:.0f}%, {hidden_chunks_16_lo:.0f}-{hidden_chunks_16_hi:.0f}%) "
          "and {ms_chunks_64:.2f} ms in 64 (medians of {repeats} repeats): from 4 to 8 chunks it {more}, and from "
          "8 to 64 it {less}. Its copies alone take {copies_64:.1f}x as long in 64 chunks as in 8: {host}.",
          headline="8 chunks take {ms_chunks_8:.2f} ms, 4 chunks {ms_chunks_4:.2f} ms, 64 chunks {ms_chunks_64:.2f} ms",
          values=_chunks_values,
          checks=(says("more", "ms_chunks_8", "<", "ms_chunks_4", "gets faster", "gets no faster"),
                  says("less", "ms_chunks_64", ">", "ms_chunks_8", "gets slower", "gets no slower"),
                  says("host", "copies_64", ">", 1.5, "the host, submitting one copy at a time, sets their pace",
                       "the copies keep their pace")),
          explains="the first copy in and the last copy out overlap nothing, about 1/C of the copies each; more "
                   "chunks mean more submissions, and the host makes one at a time"),
    Claim("pipeline_issue_order",
          "On one stream the lab's 8 chunks hide {hidden_one_stream:.0f}%: {serial} (at most {floor:.0f}% is noise). On 4 streams, issued chunk "
          "after chunk (depth first) in the tuning sweep's runs, they hide {hidden_chunks_8:.0f}% ({hidden_chunks_8_lo:.0f}-"
          "{hidden_chunks_8_hi:.0f}%, {ms_chunks_8:.2f} ms); issued breadth "
          "first, {hidden_breadth_first:.0f}% ({ms_breadth_first:.2f} ms): {order} (medians of {repeats} repeats). "
          "The scheduler model, with a host that costs nothing and the one-stream run's costs (a copy "
          "{copy_ms:.2f} ms, a kernel {kernel_ms:.2f} ms), puts breadth first at {model_breadth:.2f} ms, "
          "{model_gap:.0f}% from the measured (within {agree:.0f}% counts as agreeing). {cause}. Depth first it "
          "gives {model_depth:.2f} ms, and breadth first on {chunks} streams, one chunk each, {model_breadth_own:.2f} ms.",
          headline="breadth first hides {hidden_breadth_first:.0f}%, depth first {hidden_chunks_8:.0f}% "
                   "({hidden_chunks_8_lo:.0f}-{hidden_chunks_8_hi:.0f}%); model, free host: {model_breadth:.1f} ms, "
                   "measured {ms_breadth_first:.1f}",
          values=_issue_order_values,
          checks=(says("serial", "hidden_one_stream", "<=", "floor", "nothing overlaps", "something overlaps"),
                  says("order", "hidden_breadth_first", "<", "hidden_chunks_8", "the issue order matters",
                       "the issue order makes no difference"),
                  says("cause", "model_gap", "<=", "agree", "Each stream runs its two chunks in order, so its first "
                       "kernel waits for its second copy in, and its first copy out for its second kernel, however "
                       "fast the host submits", "The streams' order alone does not explain the measured time"))),
    Claim("recorder_over_floor",
          "The pipeline's recorder costs the host {recorder_launch:+.2f} us per launch and {recorder_copy:+.2f} "
          "us per copy over the bare call (a bare launch: {bare_launch:.0f} us, a copy {bare_copy:.0f} us); one "
          "event recorded after the call, its floor, {floor_launch:+.2f} and {floor_copy:+.2f} us. Over the "
          "floor: at worst {over:+.2f} us per op (target: at most {target_us:.0f} us, {met}). The pinned pipeline "
          "runs {slowdown:+.1f}% slower inside {inside} (worst of {repeats} repeats).",
          headline="the recorder costs {over:+.2f} us per op over one event (target {target_us:.0f} us: {met})",
          values=_recorder_values, checks=(target("met", "over", "<=", "target_us"),), for_instructors=True,
          explains="the recorder notes each op and hands it to its event, in Python frames the floor does not have"),
]
