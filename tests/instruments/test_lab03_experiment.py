"""Lab 03's experiment before its first recording with the launches timed alone (not graded).

The replay the `_launches` rows time makes the launcher's launches and nothing else; the claims
and the figure read a recording in the new form: a synthetic one here (marked live, so no claim
reads the older reference repeats), whose numbers only exercise the code, never a claim's truth;
the solution side's 4-per-thread kernel computes the tasks within their byte budget; and the
GPU-only prep measurement is checked on a fake clock.
"""

import importlib
import types

import numpy as np
import pytest

from kernellab.course import claims, protocol, reference, target
from kernellab.gpu import checks, device, timing
from kernellab.gpu.launches import Replay, record_launches, replayable
from kernellab.gpu.traffic import meter
from test_claims import flip_failures   # the perturbation of tests/instruments/test_claims.py

cuda = device.cuda()
SIZES = (1024, 2**26)


def test_a_replay_makes_the_launchers_launches_and_only_those():
    lab = target.load("03", "solutions")
    host = [checks.nonzero(np.random.default_rng(3), n) for n in (40, 20, 20, 10, 5)]
    inputs = [cuda.to_device(a) for a in host]
    out = checks.poisoned(75)
    with record_launches() as during_capture:
        replay = replayable(lambda: lab.horizontal_tasks(*inputs, 2.0, out=out, block=16))
    assert replay.names() == ["horizontal_kernel"] and np.isnan(out.copy_to_host()).all(), \
        "taking the launches must not run them"
    assert during_capture.names() == ["horizontal_kernel"]   # the recorder still sees the launch taken
    with record_launches() as replayed:
        replay()
    assert replayed.names() == ["horizontal_kernel"] and replayed[0].grid == (3 + 2 + 1 + 1, 1, 1)
    checks.assert_matches(out, lab.reference_tasks(*host, 2.0), rtol=1e-6, what="the replayed launch")


def _rows(variants, ms_of):
    return [{"size": n, "variant": v, "ok": True, "median_ms": ms_of(v, n), "p10_ms": ms_of(v, n),
             "p90_ms": ms_of(v, n), "bytes": 22 * n, "inner": 1}
            for n in SIZES for v in variants]


def synthetic_records(experiment, lab) -> dict:
    """A recording in the new form with round numbers: whole calls, launches alone, the GPU alone."""
    names = list(experiment.launcher_calls(lab))
    tasks_variants = names + [f"{v}{experiment.LAUNCHES}" for v in experiment.versions(lab)]

    def paced(variant, n):   # the model (20 us a launch) charges the four launches too much, the merged too little
        host_ms = 0.025 if experiment.is_merged(variant) else 4 * 0.015
        prep = 0 if variant.endswith(experiment.LAUNCHES) else 0.05
        return max(host_ms, 22 * n / 4e9) + prep

    def gpu(variant, n):
        return max((1 if experiment.is_merged(variant) else 4) * 0.002, 22 * n / 3.9e9)

    prep = {v: {"launches": 1, "call_us_median": 70.0, "launches_us_median": 25.0, "prep_us_median": 45.0,
                "prep_us_p10": 40.0, "prep_us_p90": 52.0} for v in names}
    base = {"live": True, "axis": "elements in the largest task", "sizes": list(SIZES), "copy_gbps": 4000.0,
            "provenance": {"gpu": reference.profiled_on("03")}}     # the profiled GPU: its rows may sit beside
    return {"tasks": {**base, "benchmark": "tasks", "variants": dict.fromkeys(tasks_variants, {}),
                      "rows": _rows(tasks_variants, paced)},
            "tasks_gpu": {**base, "benchmark": "tasks_gpu", "variants": dict.fromkeys(experiment.versions(lab), {}),
                          "rows": _rows(experiment.versions(lab), gpu)},
            "host_launch": {"live": True, "us": 20.0},
            "registers": {"live": True, "rows": [{"kernel": k.name, "block": b, "registers": 16, "occupancy": 1.0}
                                                 for k in experiment.KERNELS for b in (128, 256)]},
            "launcher_prep": {"live": True, "size": 1024, "variants": prep}}


@pytest.mark.parametrize("name", [c.name for c in claims.claims_of("03")])
def test_every_claim_reads_a_recording_in_the_new_form(name):
    """Filled, with no placeholder left, and each comparison able to flip (test_claims's perturbation)."""
    experiment, lab = protocol.experiment("03"), target.load("03", "solutions")
    claim = next(c for c in experiment.CLAIMS if c.name == name)
    recorded = claims.sources("03", live=False)
    lab01 = {name: {**r, "live": True} if isinstance(r, dict) else r for name, r in recorded["lab01"].items()}
    records = {**recorded, **synthetic_records(experiment, lab), "lab01": lab01}   # one live machine throughout
    verdict = claims.evaluate(claim, records)
    assert verdict.true is not None, f"{name} awaits: {verdict.missing}"
    assert "{" not in verdict.text, verdict.text
    assert not flip_failures(claim, claim.values(records)), flip_failures(claim, claim.values(records))


def test_the_figure_and_the_key_line_read_a_recording_in_the_new_form(tmp_path):
    experiment, lab = protocol.experiment("03"), target.load("03", "solutions")
    records = synthetic_records(experiment, lab)
    assert experiment.speedup_figure(lab, records, tmp_path).exists()
    assert experiment.key_figure(lab, records).startswith("one launch 2.4x faster than four at 1,024")
    ratios = experiment.kernel_ratios(records["tasks_gpu"])
    assert [r["n"] for r in ratios] == list(SIZES) and ratios[-1]["ratio"] == pytest.approx(1.0)
    judged = experiment.targets(lab, records)["versions"]
    assert set(judged) == {v for v in experiment.versions(lab) if experiment.is_merged(v)}
    assert judged["horizontal_block256"]["against"] == "separate_block256"
    assert all(v["met"] and v["worst_size"] == 2**26 for v in judged.values())


@pytest.mark.skipif(not device.is_simulator(), reason="the traffic meter counts loads in the simulator")
@pytest.mark.parametrize("sizes", [(301, 150, 75, 37), (0, 130, 0, 1), (64, 65, 1, 128)])
def test_the_solution_sides_4_per_thread_kernel_computes_the_tasks_reading_each_input_once(sizes):
    """Ragged ends, empty tasks and a task of one element; every input element read once and every
    output element written once (the simulator's meter against the fused ledger)."""
    lab = target.load("03", "solutions")
    rng = np.random.default_rng(sum(sizes))
    n0, n1, n2, n3 = sizes
    host = dict(zip(("x0", "x1", "z1", "x2", "x3"), (checks.nonzero(rng, n) for n in (n0, n1, n1, n2, n3))))
    dev = {k: cuda.to_device(v) for k, v in host.items()}
    out = checks.poisoned(sum(sizes))
    with meter(**dev, out=out) as traffic, record_launches() as launched:
        lab.horizontal_4_per_thread_tasks(*dev.values(), 2.5, out=out, block=16)
    assert launched.names() == ["horizontal_4_per_thread_kernel"]
    lab.tasks_ledger(sizes, fused=True).check_against(traffic)
    checks.assert_matches(out, lab.reference_tasks(*host.values(), 2.5), rtol=1e-6, what="4 per thread")


# --- the GPU-only measurements, on a fake clock ---------------------------------------------------

def test_the_rest_of_a_call_is_timed_in_pairs(monkeypatch):
    """time_host_beyond: the whole, the part, and their difference sample by sample."""
    clock = {"now": 0.0}

    def advance(seconds):
        return lambda: clock.__setitem__("now", clock["now"] + seconds)

    monkeypatch.setattr(timing, "require_gpu", lambda what: None)
    monkeypatch.setattr(timing, "cuda", types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: clock["now"]))
    split = timing.time_host_beyond(advance(70e-6), advance(25e-6), inner=4, reps=6, warmup=1)
    assert split["whole"].median_ms == pytest.approx(0.070) and split["part"].median_ms == pytest.approx(0.025)
    assert split["rest"].samples_ms == pytest.approx((0.045,) * 6)


def test_the_launcher_prep_record_splits_every_call(monkeypatch):
    """measure_launcher_prep: for every whole call, its launches taken apart and each part's figures."""
    experiment, lab = protocol.experiment("03"), target.load("03", "solutions")
    measure = importlib.import_module("experiments.lab03_measure")   # where the measurement reads PREP_SIZE
    ran = []

    def fake_split(whole, part, **_):   # nothing runs: the launches were taken, never made
        ran.append(part)
        return {key: timing.Timing((ms, ms)) for key, ms in (("whole", 0.07), ("part", 0.025), ("rest", 0.045))}

    monkeypatch.setattr(measure, "PREP_SIZE", 40)
    monkeypatch.setattr(timing, "time_host_beyond", fake_split)
    monkeypatch.setattr(reference, "provenance", lambda: {})
    record = experiment.measure_launcher_prep(lab)
    assert set(record["variants"]) == set(experiment.launcher_calls(lab)) and record["size"] == 40
    assert record["variants"]["separate"]["launches"] == 4 and record["variants"]["horizontal"]["launches"] == 1
    assert record["variants"]["horizontal"]["prep_us_median"] == pytest.approx(45.0)
    assert all(isinstance(part, Replay) for part in ran)
