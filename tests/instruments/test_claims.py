"""Every claim a lab's discussion prints holds on the recorded reference data (data/reference/h200/).

A claim whose records are not there yet (a benchmark added after the recording) is skipped with
what it awaits; one whose check fails on the data is a failure: change the claim, or the code.
"""

import json
import re

import pytest

from kernellab.course import claims, reference, target


def all_claims():
    return [(lab, claim) for lab in target.labs() for claim in claims.claims_of(lab)]


@pytest.mark.parametrize("lab, claim", all_claims(), ids=lambda value: getattr(value, "name", value))
def test_claim_holds_on_the_reference_data(lab, claim):
    assert not reference.LIVE, "a live record would replace the reference"
    verdict = claims.evaluate(claim, claims.sources(lab))
    if verdict.holds is None:
        pytest.skip(f"lab {lab} {claim.name} awaits data: {verdict.missing}")
    assert verdict.holds, f"lab {lab}: this claim no longer holds on data/reference/h200/:\n{verdict.line()}"
    assert "{" not in verdict.text, f"lab {lab} {claim.name}: a placeholder was left unfilled: {verdict.text}"


def test_the_labs_own_article_claims_have_verdicts():
    """Labs 00-06 give the article's grid, registers and shared-memory claims their verdicts."""
    covered = {claim.article for lab, claim in all_claims() if claim.article}
    assert {"grid", "registers", "shared"} <= covered, f"article claims with a verdict: {sorted(covered)}"


SPEED = claims.Claim("speed", "{ms:.1f} ms", values=lambda r: {"ms": claims.need(r, "run", "ms")},
                     holds=lambda v: v["ms"] < 2)


def test_a_claim_is_filled_and_checked_from_its_records():
    record = {"ms": 1.25, "provenance": {"gpu": "NVIDIA H200", "date": "2026-11-29T18:00:00+00:00"}}
    verdict = claims.evaluate(SPEED, {"run": record})
    assert (verdict.holds, verdict.text) == (True, "1.2 ms")
    assert verdict.source == "NVIDIA H200 reference, recorded 2026-11-29"
    assert claims.evaluate(SPEED, {"run": {**record, "ms": 3.0}}).holds is False
    assert claims.evaluate(SPEED, {"run": {**record, "live": True}}).source == "live"


def test_missing_records_await_data_and_other_errors_are_bugs():
    verdict = claims.evaluate(SPEED, {"other": {}})
    assert verdict.holds is None and "run.ms" in verdict.missing and "awaiting" in verdict.line()
    broken = claims.Claim("broken", "{x}", values=lambda r: {"x": r["run"]["typo"]}, holds=bool)
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
        claims.Claim("x", "", values=dict, holds=bool, article="warp size")


def test_a_prediction_is_compared_when_written_and_asked_for_when_not():
    lines = []
    claim = claims.claims_of("00")[0]
    measured = claims.evaluate(claim, claims.sources("00"))
    assert measured.holds, measured.line()
    key = next(iter(claim.values(claims.sources("00"))))
    value = claim.values(claims.sources("00"))[key]
    assert claims.compare_prediction(None, "00", claim.name, key, "it", out=lines.append) is None
    assert "write your prediction" in lines[-1]
    assert claims.compare_prediction(value / 2, "00", claim.name, key, "it", out=lines.append) == pytest.approx(2.0)
    assert "2.00x your number" in lines[-1]
    with pytest.raises(ValueError, match="declares no claim"):
        claims.compare_prediction(1, "00", "no_such_claim", key, "it")


def test_a_claim_the_live_run_did_not_measure_falls_back_to_the_reference(monkeypatch):
    size = claims.Claim("size", "n = {n}", values=lambda r: {"n": claims.need(r, "grid_size_sweep", "n")},
                        holds=lambda v: v["n"] > 0)
    monkeypatch.setattr(reference, "LIVE", {"00": {"grid_size_sweep": {"live": True}}})
    verdict, records = claims.judge(size, "00")
    assert verdict.holds and "reference" in verdict.source and not records["grid_size_sweep"].get("live")
    monkeypatch.setattr(reference, "LIVE", {"00": {"grid_size_sweep": {"live": True, "n": 7}}})
    verdict, _ = claims.judge(size, "00")
    assert (verdict.text, verdict.source) == ("n = 7", "live")


MEASURED_LOOKING = re.compile(r"\d[\d.,]*\s*(?:TB/s|GB/s|TFLOP/s|GFLOP/s|us\b|µs|ms\b)")


@pytest.mark.parametrize("notebook", sorted((target.ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_no_measured_looking_figure_is_typed_into_markdown(notebook):
    """The prose is the data: a figure with a unit of time or speed is printed by a cell."""
    cells = json.loads(notebook.read_text())["cells"]
    typed = [m.group(0) for c in cells if c["cell_type"] == "markdown"
             for m in MEASURED_LOOKING.finditer("".join(c["source"]))]
    assert not typed, f"{notebook.name}: typed into markdown: {typed}"
