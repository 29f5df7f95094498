"""Lab 09's experiment (not graded: no student code): its benchmarks are found by `kernellab bench`
and `kernellab profile`, and its roofline reads the profile records through kernellab.course.profile.

The profile records are synthetic, written to a temporary copy of the reference data, so the
path from a recorded DRAM count to a point's intensity and label is proved in the simulator.
"""

import json
import math
import shutil

from kernellab.course import profile, protocol, reference, target

CEILINGS = {"copy_gbps": 4000.0, "fp32_fma_tflops": 60.0, "launch_floor_ms": 0.02}


def test_lab09_is_declared_and_its_benchmarks_found_by_bench_and_profile():
    """`kernellab bench 09` and `kernellab profile 09` find both benchmarks in the declaration;
    the experiment has no bench or tour of its own."""
    experiment = protocol.experiment("09")
    assert protocol.declaration("09") is experiment.LAB
    found = profile.declared_benchmarks(experiment, target.load("09", "solutions"))
    assert [b.name for b in found] == ["scale_rows", "transpose"]
    assert not hasattr(experiment, "bench") and not hasattr(experiment, "tour")
    lab = target.load("09", "solutions")
    assert all(callable(getattr(lab, name)) for name in experiment.LAB.references)


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
    lab = target.load("09", "solutions")
    before = {p["name"]: p for p in experiment.roofline_points(lab)}
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

    points = experiment.roofline_points(lab)
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
    assert experiment.missing_profiles(points) == ["00", "01", "02", "04", "05", "06", "07", "08"]
    assert "no profile rows for labs 00, 01, 02, 04, 05, 06, 07, 08" in experiment.bytes_line(points)


def test_lab09_recorded_points_join_the_roofline(monkeypatch, tmp_path):
    """A (synthetic) lab 09 record puts its scale_rows variants on the roofline marked
    "recorded", with its own ceilings; the variant with a profile row uses DRAM bytes."""
    experiment = protocol.experiment("09")
    monkeypatch.setattr(reference, "DATA", shutil.copytree(reference.DATA, tmp_path / "reference"))
    reference.path("09").unlink(missing_ok=True)
    assert experiment.own_rows({}) == [], "no lab 09 record: no lab 09 point"
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
    points = {p["name"]: p for p in experiment.roofline_points(target.load("09", "solutions"),
                                                               own={"scale_rows": record})}
    strided, coalesced = points["09 scale_rows_strided (recorded)"], points["09 scale_rows (recorded)"]
    assert (strided["bytes_kind"], strided["bytes"]) == (experiment.DRAM_BYTES, 4 * requested + 10**8)
    assert (coalesced["bytes_kind"], coalesced["bytes"]) == (experiment.REQUESTED_BYTES, requested)
    elsewhere = {**record, "live": True, "provenance": {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-12-07"}}
    live = {p["name"]: p for p in experiment.roofline_points(target.load("09", "solutions"),
                                                             own={"scale_rows": elsewhere})}
    assert live["09 scale_rows_strided (live)"]["bytes_kind"] == experiment.REQUESTED_BYTES, \
        "a live run on another GPU takes no DRAM bytes from the recorded profile (review 14, 09-1)"
    assert math.isclose(coalesced["flops"], rows * cols, rel_tol=1e-9)
    assert coalesced["ceilings"]["copy_gbps"] == CEILINGS["copy_gbps"]
    assert "09" in experiment.missing_profiles(list(points.values()))


def test_labs_07_and_08_are_on_the_roofline_from_their_records():
    """Lab 08's eager chain from its bench row with the DRAM bytes of its 4 profiled launches;
    Lab 07's busy kernel from its `busy` bench row (64 dependent FMAs per element over 2^26)
    with the DRAM bytes of its profiled launch, and the timeline record's kernel alone as the
    fallback while no `busy` record exists."""
    experiment = protocol.experiment("09")
    lab = target.load("09", "solutions")
    points = {p["name"]: p for p in experiment.roofline_points(lab)}
    chain = points["08 chain eager"]
    rows = [r for r in reference.profile_rows("08") if r["benchmark"] == "chain" and r["variant"] == "eager"]
    assert len(rows) == 4 and chain["bytes_kind"] == experiment.DRAM_BYTES
    assert chain["bytes"] == sum(r["dram_bytes_read"] + r["dram_bytes_write"] for r in rows)
    assert chain["flops"] == 2.0 * 4 * 2**25 and chain["bound"] == "memory"
    busy = points["07 busy kernel"]
    [row] = [r for r in reference.profile_rows("07") if r["benchmark"] == "busy"]
    assert busy["bytes_kind"] == experiment.DRAM_BYTES
    assert busy["bytes"] == row["dram_bytes_read"] + row["dram_bytes_write"]
    assert busy["flops"] == 2.0 * protocol.experiment("07").BENCH_ITERS * 2**26
    records = {"07": {k: v for k, v in experiment.recorded("07").items() if k != "busy"}}
    fallback = {p["name"]: p for p in experiment.roofline_points(
        lab, records_of=lambda n: records.get(n, experiment.recorded(n)))}["07 busy kernel"]
    record = records["07"]["concurrency"]
    threads = record["shapes"]["fills_gpu"]["blocks"] * record["block"]
    assert (fallback["flops"], fallback["requested_bytes"]) == (2.0 * record["iters"] * threads, 8 * threads)
    assert fallback["bytes_kind"].startswith("requested") and fallback["bound"] == "compute"
    assert fallback["ceilings"]["copy_gbps"] == experiment.recorded("06")["occupancy_vs_speed"]["copy_ceiling"]["gbps"]
    assert "Lab 06's record" in fallback["ceilings"]["source"]
    assert {"07", "08"}.isdisjoint(experiment.OFF_THE_ROOF)


def test_a_main_kernel_awaiting_its_record_shows_its_fallback_or_nothing():
    """Lab 00's `axpb` benchmark is declared but not recorded yet: its point comes from the
    grid-size sweep meanwhile, and the awaiting line says so; with no record at all, no point."""
    experiment = protocol.experiment("09")
    records = {number: experiment.recorded(number) for number in ("00", "01", "02", "04", "05", "06", "07", "08")}
    without_axpb = {**records, "00": {k: v for k, v in records["00"].items() if k != "axpb"}}
    lines = experiment.awaiting(without_axpb.__getitem__)
    assert any(line.startswith("00 axpb: awaits lab 00's 'axpb' record") and "grid_size_sweep" in line
               for line in lines), lines
    lab = target.load("09", "solutions")
    names = [p["name"] for p in experiment.roofline_points(lab, records_of=without_axpb.__getitem__)]
    assert names.count("00 axpb") == 1
    nothing = {**without_axpb, "00": {}}
    assert "00 axpb" not in [p["name"] for p in experiment.roofline_points(lab, records_of=nothing.__getitem__)]
    assert any(line.endswith("not placed") for line in experiment.awaiting(nothing.__getitem__))
