"""Lab 09's experiment (not graded: no student code): its benchmarks are found by `kernellab bench`
and `kernellab profile`, and its roofline reads the profile records through kernellab.course.profile.

The profile records are synthetic, written to a temporary copy of the reference data, so the
path from a recorded DRAM count to a point's intensity and label is proved in the simulator.
"""

import json
import math
import shutil

from kernellab.course import profile, reference, target, tour, protocol

CEILINGS = {"copy_gbps": 4000.0, "fp32_fma_tflops": 60.0, "launch_floor_ms": 0.02}


def test_benchmarks_are_declared_for_bench_and_profile():
    """`kernellab bench 09` and `kernellab profile 09` find both benchmarks."""
    experiment = protocol.experiment("09")
    found = profile.declared_benchmarks(experiment, target.load("09", "solutions"))
    assert [b.name for b in found] == ["scale_rows", "transpose"]
    assert callable(experiment.bench) and callable(experiment.tour)


def synthetic_row(variant, kernel, size, read, write):
    return {"benchmark": "chain", "variant": variant, "size": size, "kernel": kernel,
            "dram_bytes_read": read, "dram_bytes_write": write, "requested_bytes": None, "flops": None,
            "gpu_time_ns": 1e6, "l1_sectors_per_request": 4.0, "achieved_occupancy_pct": 80.0,
            "sm_throughput_pct": 20.0, "dram_throughput_pct": 90.0, "registers_per_thread": 16}


def test_roofline_uses_recorded_dram_bytes(monkeypatch, tmp_path):
    """A synthetic profile record in a copy of the reference data: the point of the variant it
    profiles (at its size) takes the DRAM bytes, read + write over its kernels, as its bytes and
    says so; a row at another size changes nothing; the labs without rows are listed."""
    experiment = protocol.experiment("09")
    monkeypatch.setattr(reference, "DATA", shutil.copytree(reference.DATA, tmp_path / "reference"))
    for file in (tmp_path / "reference").glob("*/lab*.json"):  # no profile rows but the synthetic ones
        recorded = json.loads(file.read_text())
        if recorded.pop("profile", None) is not None:
            file.write_text(json.dumps(recorded))
    before = {p["name"]: p for p in experiment.roofline_points()}
    unfused = before["02 chain unfused"]
    assert unfused["bytes_kind"] == experiment.REQUESTED_BYTES
    size = experiment.ELEMENTWISE
    reads = (unfused["requested_bytes"] // 3, unfused["requested_bytes"] // 7)
    writes = (unfused["requested_bytes"] // 5, 4096)
    file = reference.path("02")
    stored = json.loads(file.read_text())
    stored["profile"] = {"provenance": {"tool": "ncu synthetic"}, "rows": [
        synthetic_row("unfused", "affine_kernel", size, reads[0], writes[0]),
        synthetic_row("unfused", "add_kernel", size, reads[1], writes[1]),
        synthetic_row("fused", "fused_chain_kernel", size // 4, 10**6, 10**6)]}
    file.write_text(json.dumps(stored))

    points = experiment.roofline_points()
    after = {p["name"]: p for p in points}
    dram = sum(reads) + sum(writes)
    point = after["02 chain unfused"]
    assert point["bytes_kind"] == experiment.DRAM_BYTES == "DRAM (Nsight Compute)"
    assert (point["bytes"], point["requested_bytes"]) == (dram, unfused["requested_bytes"])
    assert math.isclose(point["intensity"], point["flops"] / dram, rel_tol=1e-12)
    assert math.isclose(point["intensity"], unfused["intensity"] * unfused["requested_bytes"] / dram,
                        rel_tol=1e-12), "the intensity did not move by requested / DRAM bytes"
    changed = [name for name, p in before.items() if after[name] != p]
    assert changed == ["02 chain unfused"], f"changed: {changed} (the fused row is at another size)"
    line = next(t for t in experiment.points_table(points).splitlines() if t.startswith("02 chain unfused"))
    assert line.endswith(experiment.DRAM_BYTES), line
    assert experiment.missing_profiles(points) == ["00", "01", "02", "04", "05", "06"]
    assert "no profile rows for labs 00, 01, 02, 04, 05, 06" in experiment.bytes_line(points)


def test_lab09_recorded_points_join_the_roofline(monkeypatch, tmp_path):
    """In the simulator, a (synthetic) lab 09 record puts its scale_rows variants on the roofline
    marked "recorded", with its own ceilings; the variant with a profile row uses DRAM bytes."""
    experiment = protocol.experiment("09")
    monkeypatch.setattr(experiment.device, "is_simulator", lambda: True)  # the recorded path, on any machine
    monkeypatch.setattr(reference, "DATA", shutil.copytree(reference.DATA, tmp_path / "reference"))
    reference.path("09").unlink(missing_ok=True)
    assert experiment.own_rows() == [], "no lab 09 record: no lab 09 point"
    rows, cols = experiment.GPU_SHAPE
    requested = 3 * rows * cols * 4
    record = {"benchmark": "scale_rows", "variants": {}, "provenance": {"gpu": "NVIDIA H200", "date": "2026-12-01"},
              "ceilings": CEILINGS, "rows": [
                  {"variant": variant, "size": rows, "ok": True, "median_ms": ms, "bytes": requested,
                   "gflops": rows * cols / (ms * 1e-3) / 1e9}
                  for variant, ms in (("scale_rows_strided", 2.0), ("scale_rows", 0.25))]}
    profiled = synthetic_row("scale_rows_strided", "scale_rows_strided_kernel", rows, 4 * requested, 10**8)
    reference.path("09").write_text(json.dumps({"lab": "09", "records": {"scale_rows": record},
                                                "profile": {"rows": [{**profiled, "benchmark": "scale_rows"}]}}))
    points = {p["name"]: p for p in experiment.roofline_points(own=experiment.own_rows())}
    strided, coalesced = points["09 scale_rows_strided (recorded)"], points["09 scale_rows (recorded)"]
    assert (strided["bytes_kind"], strided["bytes"]) == (experiment.DRAM_BYTES, 4 * requested + 10**8)
    assert (coalesced["bytes_kind"], coalesced["bytes"]) == (experiment.REQUESTED_BYTES, requested)
    assert math.isclose(coalesced["flops"], rows * cols, rel_tol=1e-9)
    assert coalesced["ceilings"]["copy_gbps"] == CEILINGS["copy_gbps"]
    assert "09" in experiment.missing_profiles(list(points.values()))
