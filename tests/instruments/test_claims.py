"""Every sentence a lab's discussion prints is true on the recorded reference data
(data/reference/h200/), and every comparison it makes can fail.

A claim whose records are not there yet (a benchmark added after the recording) is skipped with
what it awaits. One whose stated comparison fails on the data is a false sentence, and a failure:
change the claim to what the data say, and write why beside it. A missed target is not a
failure: the sentence says MISSED.

The perturbation test moves every number each comparison reads across its threshold, one at a
time, and asserts that the verdict flips and the printed line changes: a check that cannot
change, or one that reads a number its sentence does not print, fails it.
"""

import json
import re

import pytest

from kernellab.course import claims, reference, target


def all_claims():
    return [(lab, claim) for lab in target.labs() for claim in claims.claims_of(lab)]


def claim_id(value):
    return getattr(value, "name", value)


@pytest.mark.parametrize("lab, claim", all_claims(), ids=claim_id)
def test_claim_is_true_on_the_reference_data(lab, claim):
    assert not reference.LIVE, "a live record would replace the reference"
    verdict = claims.evaluate(claim, claims.sources(lab))
    if verdict.true is None:
        pytest.skip(f"lab {lab} {claim.name} awaits data: {verdict.missing}")
    assert verdict.true, f"lab {lab}: the data contradict this sentence:\n{verdict.line()}"
    assert "{" not in verdict.text, f"lab {lab} {claim.name}: a placeholder was left unfilled: {verdict.text}"


def across(value, boundary, op: str, holds: bool):
    """`value` moved to the other side of `boundary` for comparison `op`: mirrored across it, at
    least 5% of the boundary away (an integer stays an integer)."""
    distance = max(abs(value - boundary), 0.05 * abs(boundary), 1e-6)
    up = (op in ("<", "<=")) == holds          # holds below the boundary: cross upwards
    moved = boundary + distance if up else boundary - distance
    if isinstance(value, int) and not isinstance(value, bool):
        moved = int(moved) + (1 if up else -1)
    return moved


def perturbations(claim, values):
    """(comparison, the name moved, the values with that one number across the threshold)."""
    for check in claim.checks:
        holds = check.outcome(values)
        for name in check.operands():
            other = check.right if name == check.left else check.left
            boundary = values[other] if isinstance(other, str) else other
            op = check.op if name == check.left else {"<": ">", "<=": ">=", ">": "<", ">=": "<="}[check.op]
            yield check, name, {**values, name: across(values[name], boundary, op, holds)}


def flip_failures(claim, values) -> list[str]:
    """What the perturbation finds wrong with a claim on `values`: a comparison that a number
    moved across its threshold does not flip, words that read the same either way, a sentence
    (or, for a stated comparison, its list of contradictions) that does not change, or no number
    to move at all."""
    text, failed = claims.render(claim, values)
    found, moved_any = [], False
    for check, name, moved in perturbations(claim, values):
        moved_any = True
        if check.outcome(moved) == check.outcome(values):
            found.append(f"{name} moved from {values[name]} to {moved[name]}: {check.described(values)} did not flip")
            continue
        new_text, new_failed = claims.render(claim, moved)
        if check.words and check.words[0].format(**values) == check.words[1].format(**values):
            found.append(f"{check.slot}: its two verdicts read the same")
        elif check.words and new_text == text:
            found.append(f"moving {name} across {check.op} left the sentence unchanged")
        elif not check.words and new_failed == failed:
            found.append(f"moving {name} did not change what the data contradict")
    if not moved_any:
        found.append("no comparison reads a number, so nothing could ever change its verdict")
    return found


@pytest.mark.parametrize("lab, claim", all_claims(), ids=claim_id)
def test_every_number_a_claim_checks_can_flip_its_verdict(lab, claim):
    """Each number a comparison reads, moved across its threshold, flips that comparison and
    changes the printed sentence (a stated one: the claim becomes contradicted)."""
    try:
        values = claim.values(claims.sources(lab))
    except claims.Missing as missing:
        pytest.skip(f"lab {lab} {claim.name} awaits data: {missing}")
    assert not flip_failures(claim, values), f"lab {lab} {claim.name}: {flip_failures(claim, values)}"


def test_the_perturbation_finds_checks_that_cannot_change():
    values = {"a": 2.0, "b": 1.0}
    stuck = claims.Claim("stuck", "{a} {b} {w}", values=dict, checks=(claims.says("w", "a", ">", "a", "up", "down"),))
    same = claims.Claim("same", "{a} {b} {w}", values=dict, checks=(claims.says("w", "a", ">", "b", "so", "so"),))
    sound = claims.Claim("sound", "{a} {b} {w}", values=dict,
                         checks=(claims.says("w", "a", ">", "b", "up", "down"), claims.states("b", "<", "a")))
    assert any("did not flip" in f for f in flip_failures(stuck, values))
    assert any("read the same" in f for f in flip_failures(same, values))
    assert flip_failures(sound, values) == []


def test_a_claim_that_compares_what_it_does_not_print_is_refused():
    values = lambda r: {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="does not print"):
        claims.Claim("x", "{a}", values=values, checks=(claims.states("a", "<", "b"),))
    with pytest.raises(ValueError, match="no comparison"):
        claims.Claim("x", "{a}", values=values, checks=())
    with pytest.raises(ValueError, match="unknown operator"):
        claims.Claim("x", "{a} {b}", values=values, checks=(claims.states("a", "==", "b"),))


def test_a_missed_target_is_a_true_sentence_and_a_false_statement_is_contradicted():
    claim = claims.Claim("t", "{x:.0f}% (target {goal:.0f}%: {verdict}), below {cap:.0f}",
                         values=lambda r: claims.need(r, "run"),
                         checks=(claims.target("verdict", "x", ">=", "goal"), claims.states("x", "<", "cap")))
    met = claims.evaluate(claim, {"run": {"x": 90, "goal": 80, "cap": 100}})
    missed = claims.evaluate(claim, {"run": {"x": 50, "goal": 80, "cap": 100}})
    false = claims.evaluate(claim, {"run": {"x": 120, "goal": 80, "cap": 100}})
    assert (met.true, met.text) == (True, "90% (target 80%: [holds]), below 100")
    assert (missed.true, missed.text) == (True, "50% (target 80%: [MISSED]), below 100")
    assert false.true is False and false.line().startswith("[CONTRADICTED by the data: x = 120 < cap = 100]")


def test_the_labs_own_article_claims_have_verdicts():
    """Labs 00-06 give the article's grid, registers and shared-memory claims their verdicts."""
    covered = {claim.article for lab, claim in all_claims() if claim.article}
    assert {"grid", "registers", "shared"} <= covered, f"article claims with a verdict: {sorted(covered)}"


SPEED = claims.Claim("speed", "{ms:.1f} ms, {than} {limit} ms",
                     values=lambda r: {"ms": claims.need(r, "run", "ms"), "limit": 2},
                     checks=(claims.says("than", "ms", "<", "limit", "under", "over"),))


def test_a_claim_is_filled_and_checked_from_its_records():
    record = {"ms": 1.25, "provenance": {"gpu": "NVIDIA H200", "date": "2026-11-29T18:00:00+00:00"}}
    verdict = claims.evaluate(SPEED, {"run": record})
    assert (verdict.true, verdict.text) == (True, "1.2 ms, under 2 ms")
    assert verdict.source == "NVIDIA H200 reference, recorded 2026-11-29"
    assert claims.evaluate(SPEED, {"run": {**record, "ms": 3.0}}).text == "3.0 ms, over 2 ms"
    assert claims.evaluate(SPEED, {"run": {**record, "live": True}}).source == "live"


def test_missing_records_await_data_and_other_errors_are_bugs():
    verdict = claims.evaluate(SPEED, {"other": {}})
    assert verdict.true is None and "run.ms" in verdict.missing and "awaiting" in verdict.line()
    broken = claims.Claim("broken", "{x}", values=lambda r: {"x": r["run"]["typo"]},
                          checks=(claims.says("x", "x", ">", 0, "", ""),))
    with pytest.raises(KeyError):
        claims.evaluate(broken, {"run": {}})


def test_row_of_a_result_without_timing_is_missing():
    result = {"benchmark": "b", "axis": "n", "rows": [{"variant": "v", "size": 1, "ok": True}]}
    with pytest.raises(claims.Missing, match="no timing"):
        claims.row(result, "v", 1)
    with pytest.raises(claims.Missing, match="no w row"):
        claims.row(result, "w", 1)


def test_an_unknown_article_claim_is_refused():
    with pytest.raises(ValueError, match="unknown article claim"):
        claims.Claim("x", "{x}", values=dict, checks=(claims.says("x", "x", ">", 0, "", ""),), article="warp size")


def test_a_prediction_is_compared_when_written_and_asked_for_when_not():
    lines = []
    claim = claims.claims_of("00")[0]
    measured = claims.evaluate(claim, claims.sources("00"))
    assert measured.true, measured.line()
    key = next(iter(claim.values(claims.sources("00"))))
    value = claim.values(claims.sources("00"))[key]
    assert claims.compare_prediction(None, "00", claim.name, key, "it", out=lines.append) is None
    assert "write your prediction" in lines[-1]
    assert claims.compare_prediction(value / 2, "00", claim.name, key, "it", out=lines.append) == pytest.approx(2.0)
    assert "2.00x your number" in lines[-1]
    with pytest.raises(ValueError, match="declares no claim"):
        claims.compare_prediction(1, "00", "no_such_claim", key, "it")


def test_a_report_prints_a_headline_per_claim_and_the_detail_on_demand():
    lines, detailed = [], []
    verdicts = claims.report("01", out=lines.append)
    assert len(lines) == len(verdicts) + 1 and "detail=True" in lines[-1]      # the source, once
    assert all(line.split("]")[0] + "]" in ("[holds]", "[MISSED]", "[measured]") for line in lines[:-1])
    named = [v.claim.name for v in verdicts if v.claim.headline]
    claims.report("01", named[:1], detail=True, out=detailed.append)
    assert detailed[0].startswith(f"{named[0]}: ") and "compared: " in detailed[0] and "reference" in detailed[0]
    folded = []
    claims.report("01", out=folded.append, collapsed="For instructors")     # outside a notebook: as printed
    assert folded == lines
    assert claims.first_clause("a (b: c; d), e: f; g") == "a (b: c; d), e"
    assert claims.first_clause("one clause.") == "one clause"


def test_a_claim_the_live_run_did_not_measure_falls_back_to_the_reference(monkeypatch):
    size = claims.Claim("size", "n = {n}, {sign}", values=lambda r: {"n": claims.need(r, "grid_size_sweep", "n")},
                        checks=(claims.says("sign", "n", ">", 0, "positive", "not positive"),))
    monkeypatch.setattr(reference, "LIVE", {"00": {"grid_size_sweep": {"live": True}}})
    verdict, records = claims.judge(size, "00")
    assert verdict.true and "reference" in verdict.source and not records["grid_size_sweep"].get("live")
    monkeypatch.setattr(reference, "LIVE", {"00": {"grid_size_sweep": {"live": True, "n": 7}}})
    verdict, _ = claims.judge(size, "00")
    assert (verdict.text, verdict.source) == ("n = 7, positive", "live")


def test_lab00s_bytes_in_flight_reads_one_gpu_when_the_live_sweep_ran_on_another(monkeypatch):
    """Notebook 00 live on an H100 (2026-12-07) failed in its take-away: the live sweep's GPU has no
    recorded Nsight Compute rows. The law then reads the reference's sweep and names its GPU."""
    from experiments import lab00_indexing as lab00
    recorded = reference.load("00")["records"]["grid_size_sweep"]
    elsewhere = {**recorded, "live": True, "provenance": {**recorded["provenance"], "gpu": "NVIDIA H100 80GB HBM3"}}
    with pytest.raises(claims.Missing, match="recorded on the NVIDIA H200, the live run on the NVIDIA H100"):
        lab00.bytes_in_flight({**claims.sources("00", live=False), "grid_size_sweep": elsewhere})
    monkeypatch.setattr(reference, "LIVE", {"00": {"grid_size_sweep": elsewhere}})
    assert "at the NVIDIA H200's copy ceiling" in lab00.takeaway()


@pytest.mark.parametrize("lab, name, claim", [("02", "chain", "one_per_thread_is_enough"),
                                               ("02", "chain", "grid_stride_not_a_launch_saving"),
                                               ("03", "tasks", "merged_call_cost"),
                                               ("04", "epilogue", "epilogue_saving"),
                                               ("05", "softmax", "online_second_read"),
                                               ("05", "softmax_shapes", "instructions_pace_the_row")])
def test_no_claim_sets_a_live_figure_beside_another_gpus_profile(monkeypatch, lab, name, claim):
    """Reviews 13 and 14: live on an H100, Lab 04 divided the H200's Nsight Compute time by the H100's
    copy ceiling, and Lab 05 set the H100's time ratio beside the H200's instruction ratio. Such a
    claim now reads the reference alone."""
    recorded = reference.load(lab)["records"][name]
    elsewhere = {**recorded, "live": True, "provenance": {**recorded["provenance"], "gpu": "NVIDIA H100 80GB HBM3"}}
    monkeypatch.setattr(reference, "LIVE", {lab: {name: elsewhere}})
    chosen = next(c for c in claims.claims_of(lab) if c.name == claim)
    verdict, records = claims.judge(chosen, lab)
    assert verdict.true is not None and "live" not in verdict.source.split("; ")
    assert not records[name].get("live")


def test_a_collapsed_headline_names_its_recording_in_a_live_run(monkeypatch):
    """Live on an H100 (2026-12-07), notebooks printed H200-recorded headlines beside live ones
    with nothing to tell them apart; in the simulator every line is recorded and none is labelled."""
    import dataclasses
    verdict = claims.report("00", ["more_resident_threads"], out=lambda line: None)[0]
    assert claims.headline(verdict) == verdict.short()
    monkeypatch.setattr(reference, "LIVE", {"00": {"grid_size_sweep": {"live": True}}})
    assert claims.headline(verdict) == verdict.short() + " (H200 reference)"
    assert claims.headline(dataclasses.replace(verdict, source="live")) == verdict.short()
    mixed = dataclasses.replace(verdict, source="live; " + verdict.source)
    assert claims.headline(mixed).endswith("(H200 reference; partly live)")
    monkeypatch.setattr(reference, "LIVE", {"09": {"scale_rows": {"live": True}}})   # a live run, elsewhere
    line = claims.take_away("00", ["{more_resident_threads[mb128]:.2f} MB"]).splitlines()[1]
    assert line.endswith("MB (H200 reference)"), line     # review 16: a take-away line names its recording too


def test_a_take_away_line_prints_its_claims_values_and_the_words_their_comparisons_chose():
    line = "{events_not_barriers[ratio]:.1f}x later: {events_not_barriers[verdict]}."
    verdict = claims.report("07", ["events_not_barriers"], out=lambda line: None)[0]
    words = claims.words_of(verdict.claim, verdict.values)["verdict"]
    title, first, source = claims.take_away("07", (line,)).splitlines()
    assert (title, first) == ("What to take away", f"  1. {verdict.values['ratio']:.1f}x later: {words}.")
    assert "reference, recorded" in source
    flipped = {**verdict.values, "ratio": 1.0}
    assert claims.words_of(verdict.claim, flipped)["verdict"] != words


MEASURED_LOOKING = re.compile(r"\d[\d.,]*\s*(?:TB/s|GB/s|TFLOP/s|GFLOP/s|us\b|µs|ms\b)")


@pytest.mark.parametrize("notebook", sorted((target.ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_no_measured_looking_figure_is_typed_into_markdown(notebook):
    """The prose is the data: a figure with a unit of time or speed is printed by a cell."""
    cells = json.loads(notebook.read_text())["cells"]
    typed = [m.group(0) for c in cells if c["cell_type"] == "markdown"
             for m in MEASURED_LOOKING.finditer("".join(c["source"]))]
    assert not typed, f"{notebook.name}: typed into markdown: {typed}"


def test_lab01s_instrument_costs_name_the_costliest_opening_only_where_the_record_timed_it(monkeypatch):
    """A record taken after settling launches (`opening_us`) says so and prints the costliest
    opening; one taken before (the H200's, recorded earlier) reads as it always did."""
    claim = next(c for c in claims.claims_of("01") if c.name == "instruments_while_on")
    stored = reference.load
    before = claims.evaluate(claim, claims.sources("01", live=False)).text
    assert "opening" not in before

    def settled(lab, gpu=reference.DEFAULT_GPU):
        record = stored(lab, gpu)
        repeats = [r["wrapper_overhead"] for r in (record or {}).get("repeats", []) if "wrapper_overhead" in r]
        for repeat, timeline_opening in zip(repeats, (12.0, 31.5, 7.0)):
            for name, figures in repeat["while_on"].items():
                figures.update(settle_calls=20, opening_us=timeline_opening if name == "timeline" else 1.0)
        return record
    monkeypatch.setattr(reference, "load", settled)
    after = claims.evaluate(claim, claims.sources("01", live=False)).text
    assert "each timed after its first 20 launches" in after and "a Timeline the most: +31.5 us in all" in after
    assert after.replace(after[after.index(", each timed"):after.index("; the traffic")], "") == before


@pytest.mark.parametrize("notebook", sorted((target.ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_every_claim_of_a_lab_is_printed_by_its_notebook(notebook):
    """A claim no notebook prints is a measurement the student never reads: each lab's notebook
    reports all of them (`claims.report("NN")`) or names each one in a `claims.report` call. A claim
    about the course's instruments (`for_instructors`) is the instructor's: no notebook names it
    (a target about an instrument never prints [MISSED] in a lesson), docs/measuring.md does."""
    lab = notebook.name[:2]
    code = "\n".join("".join(c["source"]) for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code")
    calls = re.findall(r"claims\.report\((.*?)\)", code, re.S)
    reports_all = any(re.fullmatch(rf'\s*"{lab}"\s*(,\s*\w+\s*=\s*[^,]+)*', call) for call in calls)
    named = set(re.findall(r'"(\w+)"', " ".join(calls)))
    instructors = {claim.name for claim in claims.claims_of(lab) if claim.for_instructors}
    assert not instructors & (named | (instructors if reports_all else set())), \
        f"{notebook.name} prints an instructor's claim of {sorted(instructors)}"
    measuring = (target.ROOT / "docs" / "measuring.md").read_text()
    unnamed = sorted(name for name in instructors if f"`{name}`" not in measuring)
    assert not unnamed, f"docs/measuring.md names no instructor's claim {unnamed}"
    unprinted = [claim.name for claim in claims.claims_of(lab) if claim.name not in named | instructors]
    assert reports_all or not unprinted, f"{notebook.name} prints no sentence of {unprinted}"


def test_compared_prints_the_relation_that_holds_once():
    """A "compared:" line is read as fact: a comparison that failed prints its negation, and two
    checks of one relation print it once."""
    checks = (claims.says("a", "x", ">", 0, "up", "down"), claims.says("b", "x", ">", 0, "more", "less"),
              claims.says("c", "x", "<", "y", "under", "over"))
    claim = claims.Claim("c", "{x} {y} {a} {b} {c}", values=lambda r: {"x": -2.0, "y": 5.0}, checks=checks)
    compared = claims.evaluate(claim, {}).detailed().split("compared: ")[1]
    assert compared == "x = -2 <= 0; x = -2 < y = 5"


def test_lab01s_launch_costs_are_the_median_of_the_repeats_with_their_range():
    """Every repeat of `launch_methods` is recorded; a finding prints their median and range, the
    targets their worst (review 3-a, C2)."""
    records = claims.sources("01", live=False)
    repeats = reference.load("01")["repeats"]
    host = sorted(r["launch_methods"]["methods"]["plain, host submit"]["us"] for r in repeats)
    replay = [r["launch_methods"]["methods"]["graph replay, GPU events"]["us"] for r in repeats]
    claim = next(c for c in claims.claims_of("01") if c.name == "host_not_gpu")
    values = claim.values(records)
    assert (values["host_lo"], values["host"], values["host_hi"]) == pytest.approx((host[0], host[1], host[-1]))
    replayed = next(c for c in claims.claims_of("01") if c.name == "graph_replay").values(records)
    assert replayed["replay"] == pytest.approx(max(replay))
    argument = next(c for c in claims.claims_of("01") if c.name == "per_argument").values(records)   # a line per repeat
    assert argument["per_array_lo"] <= argument["per_array"] <= argument["per_array_hi"] < argument["per_array_lo"] * 2


def test_lab03s_host_records_are_the_median_of_the_repeats_with_their_range():
    """`host_launch` is read through every repeat: the launch cost that fills the model, and the
    stop it predicts, are the median repeat's (review 4-a, C1). A figure that combines two records
    is computed within each repeat, then their median (review 6-a: the host's pace drifts)."""
    records = claims.sources("03", live=False)
    repeats = reference.load("03")["repeats"]
    launch = sorted(r["host_launch"]["us"] for r in repeats)
    named = {c.name: c for c in claims.claims_of("03")}
    cost = named["merged_call_cost"].values(records)
    assert (cost["launch_lo"], cost["launch_us"], cost["launch_hi"]) == pytest.approx((launch[0], launch[1], launch[-1]))

    def us(repeat, variant):
        return next(1e3 * r["median_ms"] for r in repeat["tasks"]["rows"]
                    if r["variant"] == variant and r["size"] == cost["n"])
    python = sorted(us(r, "horizontal") - us(r, "horizontal_launches") for r in repeats)
    over = sorted(us(r, "horizontal_launches") / r["host_launch"]["us"] for r in repeats)
    assert (cost["py_merged_lo"], cost["py_merged"], cost["py_merged_hi"]) == pytest.approx((python[0], python[1], python[-1]))
    assert (cost["over_launch_lo"], cost["over_launch"], cost["over_launch_hi"]) == pytest.approx((over[0], over[1], over[-1]))
    gain = named["small_tasks_gain"].values(records)
    assert gain["gain_lo"] <= gain["measured"] <= gain["gain_hi"]      # the median of the repeats' own gains
    stops = named["stops_paying"].values(records)
    assert stops["launch_us"] == pytest.approx(launch[1])
    assert stops["stop_model_us"] >= launch[1]      # the model's one launch costs at least the median launch
