"""kernellab.course.profile: ncu's CSV parsed by a pure function, joined to the child's launches, read back."""

import dataclasses
import json
from pathlib import Path

import pytest

import kernellab  # noqa: F401
from kernellab.course import profile, protocol, reference, target

SAMPLE = (Path(__file__).parent / "data" / "ncu_sample.csv").read_text()
MANIFEST = [{"benchmark": "chain", "variant": "unfused", "size": 1 << 24, "kernel": k,
             "requested_bytes": 268435456, "flops": None} for k in ("affine_kernel", "relu_kernel")]


def test_parse_reads_every_launch_in_base_units():
    launches = profile.parse_ncu_csv(SAMPLE)
    assert [launch["id"] for launch in launches] == [0, 1]
    assert "affine_kernel" in launches[0]["kernel_name"]
    assert launches[0]["metrics"]["dram__bytes_read.sum"] == 134_229_248
    assert launches[1]["metrics"]["sm__warps_active.avg.pct_of_peak_sustained_active"] == 84.77
    scaled = SAMPLE.replace('"byte","134,229,248"', '"Mbyte","134.229248"')
    assert profile.parse_ncu_csv(scaled)[0]["metrics"]["dram__bytes_read.sum"] == pytest.approx(134_229_248)


def test_rows_follow_the_record_format():
    rows = profile.rows_from(profile.parse_ncu_csv(SAMPLE), MANIFEST)
    first = rows[0]
    assert set(first) == {"benchmark", "variant", "size", "kernel", "dram_bytes_read", "dram_bytes_write",
                          "requested_bytes", "flops", "gpu_time_ns", "l1_sectors_per_request",
                          "achieved_occupancy_pct", "sm_throughput_pct", "dram_throughput_pct",
                          "registers_per_thread", "warp_instructions"}
    assert first["warp_instructions"] == 4_718_592
    assert first["dram_bytes_write"] == 54_955_264 and first["l1_sectors_per_request"] == 4.0
    assert first["registers_per_thread"] == 16 and first["gpu_time_ns"] == 41_632
    assert "DRAM = dram__bytes_read.sum" in profile.table({"rows": rows})


def test_launches_that_do_not_match_the_manifest_are_refused():
    launches = profile.parse_ncu_csv(SAMPLE)
    with pytest.raises(profile.ProfileError, match="profiled 2 launches but the child made 1"):
        profile.rows_from(launches, MANIFEST[:1])
    swapped = [MANIFEST[1], MANIFEST[0]]
    with pytest.raises(profile.ProfileError, match="where the child launched 'relu_kernel'"):
        profile.rows_from(launches, swapped)
    with pytest.raises(profile.ProfileError, match="no CSV header"):
        profile.parse_ncu_csv("==PROF== No kernels were profiled.\n")


def test_recorded_rows_are_read_back_and_summed_per_variant(monkeypatch, capsys):
    rows = profile.rows_from(profile.parse_ncu_csv(SAMPLE), MANIFEST)
    stored = {"lab": "02", "records": {}, "profile": {"rows": rows, "provenance": {
        "gpu": "NVIDIA H200", "date": "2026-12-01T09:00:00+00:00", "tool": "ncu 2025.3.1"}}}
    monkeypatch.setattr(reference, "load", lambda lab, gpu=None: stored)
    assert reference.profile_rows("02") == rows
    assert reference.variant_dram_bytes("02", "chain", "unfused", 1 << 24) == \
        134_229_248 + 54_955_264 + 67_110_912 + 60_817_408
    assert reference.variant_dram_bytes("02", "chain", "fused", 1 << 24) is None
    if kernellab.gpu.device.is_simulator():
        assert profile.main("02:relu_kernel") == 0
        shown = capsys.readouterr().out
        assert "RECORDED profile, not measured here" in shown and "relu_kernel" in shown
        assert "affine_kernel" not in shown


def test_labs_declare_their_benchmarks():
    lab = target.load("02")
    names = [b.name for b in profile.declared_benchmarks(protocol.experiment("02"), lab)]
    assert names == ["chain"]


def test_the_child_runs_each_variant_once_and_lists_its_launches(monkeypatch, tmp_path):
    """What runs under ncu, here in the simulator with the profiler calls stubbed out."""
    from cuda.bindings import driver
    monkeypatch.setattr(driver, "cuProfilerStart", lambda: None)
    monkeypatch.setattr(driver, "cuProfilerStop", lambda: None)
    experiment = protocol.experiment("08")
    small = dataclasses.replace(experiment.chain_benchmark(target.load("08")), sizes=[40])
    monkeypatch.setattr(profile, "declared_benchmarks", lambda module, lab: [small])
    manifest = tmp_path / "manifest.json"
    profile.run_child("08", manifest)
    launches = json.loads(manifest.read_text())
    assert [m["kernel"] for m in launches] == ["affine_step_kernel"] * 4
    assert launches[0] | {"kernel": None} == {"benchmark": "chain", "variant": "eager", "size": 40,
                                              "kernel": None, "requested_bytes": 4 * 2 * 40 * 4,
                                              "flops": None}
