"""Checks of the benchmark harness itself (not graded): validation, ledgers, timing rows, files.

The GPU path runs here with a fake clock standing in for CUDA events, so the row arithmetic,
the input-set rotation and the files written are checked without a GPU.
"""

import dataclasses
import json
import types

import numpy as np
import pytest

from kernellab.course import bench
from kernellab.gpu import checks, device, timing
from kernellab.show import plots
from kernellab.gpu.launches import record_launches
from kernellab.gpu.traffic import Ledger

cuda = device.cuda()


@cuda.jit
def double_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + x[i]   # 2 loads of x[i]: the ledger below must say so


def double(x, out, shift=0.0):
    double_kernel[(x.size + 63) // 64, 64](x, out)
    if shift:
        out.copy_to_device(out.copy_to_host() + np.float32(shift))
    return out


def double_ledger(n):
    return Ledger("double").add("double", "x", reads=2 * n).add("double", "out", writes=n)


def benchmark(variants, sizes=(100, 600)):
    return bench.Benchmark(
        name="double", axis="n", sizes=list(sizes), sim_sizes=[77],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
        reference=lambda host: 2.0 * host["x"].astype(np.float64), variants=variants)


GOOD = bench.Variant("good", lambda d, out: double(d["x"], out), "right", ledger=double_ledger)


def test_variant_names_must_differ():
    with pytest.raises(ValueError, match="repeat"):
        benchmark([GOOD, GOOD])
    with pytest.raises(ValueError, match="no variants"):
        benchmark([])


@pytest.mark.skipif(not device.is_simulator(), reason="the simulator path")
def test_simulator_validates_checks_ledgers_and_has_no_timing(tmp_path, capsys):
    wrong = bench.Variant("wrong", lambda d, out: double(d["x"], out, shift=0.5), "off by 0.5",
                          ledger=double_ledger)
    bad_ledger = bench.Variant("bad_ledger", lambda d, out: double(d["x"], out), "says 1 read",
                               ledger=lambda n: Ledger("bad").add("d", "x", reads=n)
                               .add("d", "out", writes=n))
    result = bench.run(benchmark([GOOD, wrong, bad_ledger]), out_dir=tmp_path, progress=False)
    json.dumps(result)
    rows = {r["variant"]: r for r in result["rows"]}
    assert rows["good"]["ok"] and rows["good"]["launches"] == 1 and rows["good"]["rel_error"] < 1e-6
    assert "relative error" in rows["wrong"]["error"]
    assert "x: declared 77 reads" in rows["bad_ledger"]["error"] and "measured 154 reads" in \
        rows["bad_ledger"]["error"]
    assert not result["ok"] and not result["live"] and "no timing exists" in result["timing"]
    assert not any("median_ms" in r for r in result["rows"])
    assert list(tmp_path.iterdir()) == [], "the simulator must write no measurement files"
    assert "no timing exists in simulator mode" in capsys.readouterr().out


@pytest.fixture
def fake_gpu(monkeypatch):
    """bench.run's GPU path with a clock that charges 10 us per launch plus 1 ms per MB declared."""
    facts = dataclasses.replace(device.facts(), l2_bytes=8_000)
    state = {"bytes": 0}

    def time_gpu(fn, *, warmup=5, reps=50, inner=1, stream=0, setup=None, hide_host=True):
        state["hide_host"] = hide_host
        with record_launches() as log:
            fn()
        ms = 0.01 * len(log) + state["bytes"] / 1e6
        return timing.Timing((0.9 * ms, ms, 1.1 * ms))

    real_time = bench._time

    def traced_time(variant, sets, reps, **options):
        state["bytes"] = variant.ledger(sets[0].host["x"].size).total_bytes
        return real_time(variant, sets, reps, **options)

    monkeypatch.setattr(bench, "device", types.SimpleNamespace(is_simulator=lambda: False,
                                                                facts=lambda: facts))
    monkeypatch.setattr(bench, "timing", types.SimpleNamespace(
        time_gpu=time_gpu, NoTiming=timing.NoTiming,
        ceiling_for_mix=timing.ceiling_for_mix, stream_ceilings=timing.stream_ceilings,
        ceilings=lambda: {"copy_gbps": 2.0, "fp32_fma_tflops": 1.0, "launch_floor_ms": 0.01,
                          "torch_copy_gbps": None, "copy": {"gbps": 2.0, "method": "fake"},
                          "streams": {"read_only": {"write_fraction": 0.01, "gbps": 3.0}}}))
    monkeypatch.setattr(bench, "_time", traced_time)
    return state


def test_gpu_path_reports_time_bandwidth_and_rotates_small_sets(fake_gpu, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("KERNELLAB_PROGRESS", "on")   # pytest's stderr is no terminal
    result = bench.run(benchmark([GOOD], sizes=(100, 600)), out_dir=tmp_path, progress=True)
    small, large = bench.row(result, "good", 100), bench.row(result, "good", 600)
    assert result["ok"] and result["live"] and result["copy_gbps"] == 2.0
    assert small["bytes"] == 1200 and small["median_ms"] == pytest.approx(0.01 + 1200 / 1e6)
    assert small["gbps"] == pytest.approx(1200 / (small["median_ms"] * 1e-3) / 1e9)
    assert small["pct_of_copy"] == pytest.approx(100 * small["gbps"] / 2.0)
    # its ledger reads 2 and writes 1 per element: between the fake read-only (3 GB/s) and copy (2 GB/s)
    assert small["write_fraction"] == pytest.approx(1 / 3)
    assert small["ceiling_gbps"] == pytest.approx(3.0 - (1 / 3 - 0.01) / (0.5 - 0.01))
    assert small["ceiling_mix"] == "interpolated between read_only and copy at write fraction 0.333"
    assert small["pct_of_ceiling"] == pytest.approx(100 * small["gbps"] / small["ceiling_gbps"])
    # One set of 800 B fits the fake 8 KB L2 many times over: rotate through several.
    assert small["input_sets"] > 1 and large["input_sets"] < small["input_sets"]
    stored = json.loads((tmp_path / "double.json").read_text())
    assert "live" not in stored, "a stored record must not claim to be live when read back"
    assert stored["rows"] == json.loads(json.dumps(result["rows"]))
    assert (tmp_path / "double.png").exists()
    captured = capsys.readouterr()
    assert ("copy ceiling 2 GB/s (fake), stream ceilings by read:write mix read-only 3 GB/s, FP32 FMA 1.0 "
            "TFLOP/s" in captured.out)                                          # the table
    assert "double: 100%" in captured.err                                     # the progress bar


def test_a_host_paced_benchmark_keeps_the_host_submit_inside_the_window(fake_gpu, tmp_path):
    result = bench.run(benchmark([GOOD], sizes=(100,)), out_dir=tmp_path, progress=False)
    assert fake_gpu["hide_host"] and not result["host_paced"]
    paced = dataclasses.replace(benchmark([GOOD], sizes=(100,)), host_paced=True)
    result = bench.run(paced, out_dir=tmp_path, progress=False)
    assert not fake_gpu["hide_host"] and result["host_paced"]


def test_a_failing_baseline_does_not_fail_the_benchmark(fake_gpu, tmp_path):
    broken = bench.Variant("broken_baseline", lambda d, out: 1 / 0, "raises", ledger=double_ledger)
    result = bench.run(dataclasses.replace(benchmark([GOOD], sizes=(100,)), baselines=[broken]),
                       progress=False)
    assert result["ok"], bench.table(result)
    assert bench.failures(result) == ["broken_baseline at n=100: ZeroDivisionError: division by zero"]
    assert result["variants"]["broken_baseline"]["baseline"]


def test_row_names_what_is_missing():
    result = {"benchmark": "b", "axis": "n", "variants": {"v": {}}, "rows": []}
    with pytest.raises(KeyError, match="no row for 'v' at n=5"):
        bench.row(result, "v", 5)


def test_optional_torch_only_on_a_gpu():
    if device.is_simulator():
        assert bench.optional_torch() is None


def test_shared_charts_render(tmp_path):
    rows = [{"size": n, "variant": v, "ok": True, "median_ms": t, "p10_ms": 0.9 * t,
             "p90_ms": 1.1 * t, "gbps": 8 * n / t / 1e6, "pct_of_copy": 50.0}
            for n in (2**10, 2**20) for v, t in (("a", 0.02), ("b", 0.01))]
    result = {"benchmark": "demo", "axis": "n", "sizes": [2**10, 2**20], "copy_gbps": 100.0,
              "launch_floor_ms": 0.005, "rows": rows,
              "variants": {"a": {"baseline": False}, "b": {"baseline": True}}}
    fig, axes = plots.new_figure("demo", result, ncols=4)
    plots.time_vs_size(axes[0], result)
    plots.bandwidth_vs_size(axes[1], result, {("a", 2**20): 8 * 2**20})   # a DRAM point
    plots.bandwidth_bars(axes[2], result, 2**20)
    plots.stacked_bytes(axes[3], {"two ops": Ledger().add("f", "x", reads=10).add("g", "y", writes=5),
                                  "one op": Ledger().add("fg", "x", reads=10)})
    assert plots.save(fig, "demo", tmp_path).exists()


def test_a_torch_style_baseline_may_return_a_new_array(fake_gpu):
    """torch_variant hands the inputs over by name and validates whatever array comes back."""
    fake_torch = types.SimpleNamespace(as_tensor=lambda value, device: value)
    baseline = bench.torch_variant(fake_torch, "returns_new",
                                   lambda x: double(x, cuda.device_array_like(x)),
                                   "allocates its result", ledger=double_ledger)
    result = bench.run(dataclasses.replace(benchmark([GOOD], sizes=(100,)), baselines=[baseline]),
                       progress=False)
    row = bench.row(result, "returns_new", 100)
    assert row["ok"] and row["median_ms"] > 0, bench.table(result)


def _repeat(ms: float, gbps_ceiling: float, met: bool) -> dict:
    row = {"size": 8, "variant": "v", "ok": True, "bytes": 8000, "median_ms": ms, "p10_ms": ms,
           "p90_ms": ms, "gbps": 8000 / (ms * 1e-3) / 1e9}
    row["write_fraction"] = 0.5
    ceilings = {"copy_gbps": gbps_ceiling, "fp32_fma_tflops": 60.0, "launch_floor_ms": 0.01,
                "copy": {"method": "memcpy", "gbps": gbps_ceiling},
                "streams": {"read_only": {"write_fraction": 0.0, "gbps": 2 * gbps_ceiling}}}
    bench.rate_against_ceilings(row, ceilings)
    result = {"benchmark": "b", "axis": "n", "sizes": [8], "variants": {"v": {}}, "rows": [row],
              "ok": True, "copy_gbps": gbps_ceiling, "launch_floor_ms": 0.01, "ceilings": ceilings}
    return {"lab": "02", "records": {"b": result, "targets": {"reaches_90pct": met, "n": 8,
                                                              "provenance": {"simulated": False}}}}


def test_repeats_keep_every_run_pool_each_row_in_its_worst_and_judge_targets_on_the_worst():
    stored = [_repeat(0.004, 3.0, True), _repeat(0.002, 3.0, False), _repeat(0.003, 3.0, True)]
    combined = bench.combine_repeats(stored)
    row = combined["records"]["b"]["rows"][0]
    assert row["median_ms"] == 0.004 and row["repeat_ms"] == [0.004, 0.002, 0.003]   # the worst repeat's
    assert row["p10_ms"] <= row["median_ms"] <= row["p90_ms"] and row["pct_of_ceiling"] == pytest.approx(66.7, abs=0.1)
    assert "worst repeat" in combined["records"]["b"]["method"]
    assert plots.time_band(row) == (0.002, 0.004)
    assert "in 1 of 3 repeats: 133.3% of the ceiling for its mix (copy" in row["instrument_error"]
    assert row["repeat_pct_of_ceiling"] == pytest.approx([66.7, 133.3, 88.9], abs=0.1)
    assert len(combined["repeats"]) == 3 and combined["records"]["targets"]["reaches_90pct"] is True
    verdict = combined["targets_over_repeats"]["targets"]["targets.reaches_90pct"]
    assert verdict == {"per_repeat": [True, False, True], "met": False}
    assert list(combined["targets_over_repeats"]["targets"]) == ["targets.reaches_90pct"], \
        "a provenance flag is not a target"
    assert "worst repeat" in combined["targets_over_repeats"]["rule"]
    assert "INSTRUMENT ERROR" in bench.table(combined["records"]["b"])


def test_a_partial_bench_keeps_the_records_it_did_not_run():
    previous = {"records": {"b": {"old": True}, "other": {"kept": 1}}, "repeats": [{"other": {"kept": 1}}],
                "records_note": "one run"}
    combined = bench.keep_unrun_records(bench.combine_repeats([_repeat(0.004, 3.0, True)] * 2), previous, ("b",))
    assert combined["records"]["other"] == {"kept": 1} and "old" not in combined["records"]["b"]
    assert combined["repeats"][0]["other"] == {"kept": 1} and "other" not in combined["repeats"][1]
    assert combined["records_note"] == "b (and the targets): merged over 2 repeats of a partial bench | one run"
    again = bench.keep_unrun_records(bench.combine_repeats([_repeat(0.004, 3.0, True)] * 3), combined, ("b",))
    assert again["records_note"] == "b (and the targets): merged over 3 repeats of a partial bench | one run"


def test_repeats_are_combined_after_every_round_over_the_file_as_it_was(tmp_path):
    """A run stopped after its first round (a device call's time limit) leaves that round combined,
    over the records the file held before the run, not over its own first round."""
    base, out = tmp_path / "repeats", tmp_path / "out"
    out.mkdir()
    before = {"lab": "02", "records": {"other": {"kept": 1}}, "profile": {"rows": ["kept"]}}
    (out / "lab02.json").write_text(json.dumps(before))
    previous = bench.previous_file("02", out)
    for r, ms in ((1, 0.004), (2, 0.002)):
        (base / f"repeat-{r}").mkdir(parents=True)
        (base / f"repeat-{r}" / "lab02.json").write_text(json.dumps(_repeat(ms, 3.0, True)))
    lines = []
    bench.write_combined("02", ("b",), base, 1, out, previous, last=False, out=lines.append)
    first = json.loads((out / "lab02.json").read_text())
    assert len(first["repeats"]) == 1 and first["records"]["other"] == {"kept": 1}
    assert first["profile"] == {"rows": ["kept"]} and "1 repeat(s) combined so far" in lines[-1]
    bench.write_combined("02", ("b",), base, 2, out, previous, last=True, out=lines.append)
    second = json.loads((out / "lab02.json").read_text())
    assert len(second["repeats"]) == 2 and second["records"]["b"]["rows"][0]["repeat_ms"] == [0.004, 0.002]
    assert second["records"]["other"] == {"kept": 1} and "2 repeats ->" in lines[-1]


def test_a_partial_bench_names_the_records_a_lab_makes():
    from kernellab.course import protocol
    assert protocol.bench_spec("6") == ("06", None)
    assert protocol.bench_spec("06:compute_probe, memory_probe") == ("06", ("compute_probe", "memory_probe"))
    with pytest.raises(ValueError, match="lab 06 records no nonsense; its records are memory_probe"):
        protocol.bench_spec("06:nonsense")


def test_a_row_whose_rereads_a_cache_serves_is_rated_on_its_compulsory_bytes():
    """Requested bytes may outrun DRAM when L2 serves re-reads; the compulsory bytes may not."""
    ceilings = {"copy_gbps": 100.0, "copy": {"method": "memcpy", "gbps": 100.0},
                "streams": {"read_only": {"write_fraction": 0.0, "gbps": 110.0}}}
    row = {"bytes": 300, "compulsory_bytes": 150, "write_fraction": 1 / 3, "median_ms": 2e-6}
    bench.rate_against_ceilings(row, ceilings)
    assert row["gbps_requested"] == pytest.approx(150.0) and row["gbps"] == pytest.approx(75.0)
    assert "instrument_error" not in row and row["pct_of_copy"] == pytest.approx(75.0)
    too_fast = {**row, "median_ms": 1e-6}
    bench.rate_against_ceilings(too_fast, ceilings)
    assert "instrument error" in too_fast["instrument_error"]
