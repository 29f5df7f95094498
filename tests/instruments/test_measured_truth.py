"""Labs 07 and 08 report a bad measurement instead of hiding it, and each row gets the ceiling of its own
read:write mix (pure functions, no GPU needed)."""

import pytest

import kernellab  # noqa: F401
from kernellab.course import protocol

LAB07, LAB08 = protocol.experiment("07"), protocol.experiment("08")


def test_a_hidden_share_outside_0_1_is_a_problem():
    assert LAB07.fraction_problems([0.7, 1.0, 0.0]) == []
    assert LAB07.fraction_problems([0.9, 1.48, -0.34]) == [
        "run 2: hidden share 1.480 is outside [0, 1]", "run 3: hidden share -0.340 is outside [0, 1]"]


def _concurrency(connections, speedups_16=16.0) -> dict:
    rows = [{"streams": s, "speedup": min(s, speedups_16) if s == 16 else s, "model_error": 0.01 * s}
            for s in (1, 2, 4, 8, 16)]
    return {"max_connections": str(connections), "shapes": {"few_sms": {"modes": {"gated": rows}}},
            "live": True}       # live: read alone, never beside the reference file's repeats


def test_a_stream_sweep_is_read_only_at_the_connections_it_was_measured_at():
    """A record says its CUDA_DEVICE_MAX_CONNECTIONS; a claim about 8 queues never reads a 32 one."""
    from kernellab.course import claims
    at_32 = {"concurrency": _concurrency(32), "concurrency_8_connections": _concurrency(32, 7.9)}
    with pytest.raises(claims.Missing, match="measured at 32 connections, not 8"):
        LAB07._sweep(at_32, 8)
    sweep = LAB07._sweep({"concurrency": _concurrency(32)}, 32)
    assert (sweep["s16"], sweep["s8"], sweep["error"], sweep["where"]) == (16.0, 8, pytest.approx(16.0),
                                                                          "few_sms/gated")


def test_the_model_error_leaves_out_the_one_stream_baseline():
    assert LAB07.model_errors(_concurrency(8)) == {"few_sms/gated": pytest.approx(0.16)}


def test_padding_to_a_bucket_names_a_batch_no_bucket_holds():
    padded = LAB08.PaddedToBucket.__new__(LAB08.PaddedToBucket)
    padded.buckets = (1, 2, 4)
    assert [padded.bucket(b) for b in (1, 2, 3, 4)] == [1, 2, 4, 4]
    with pytest.raises(ValueError, match="larger than the largest bucket"):
        padded.bucket(5)


def _gap_row(total: tuple, duration: tuple, source="ncu", eager=(4.9, 5.0, 5.1)) -> dict:
    row = {"kernel_ms": duration[1], "duration_source": source, "eager_ms": eager[1], "graph_ms": total[1]}
    for label, t in (("eager", eager), ("graph", total)):
        row[f"{label}_gap_range"] = list(LAB08.gap_range(t, duration, kernels=100))
        row[f"{label}_gap"] = row[f"{label}_gap_range"][1]
    return row


def test_the_kernel_duration_is_the_marginal_time_of_a_graph_twice_as_long():
    """Graphs of 100 and 200 kernels: the fixed cost of a replay cancels, the spreads widen the range."""
    low, mid, high = LAB08.marginal_duration((1.00, 1.05, 1.10), (2.90, 3.05, 3.20), kernels=100)
    assert (low, mid, high) == pytest.approx((0.018, 0.020, 0.022))
    assert LAB08.signed_gap(1.05, mid, kernels=100) == pytest.approx(-0.475)


def test_gaps_are_signed_and_only_a_negative_one_beyond_the_spread_is_a_problem():
    assert LAB08.signed_gap(2.1, 0.02) == pytest.approx(0.05)
    within = _gap_row((1.97, 1.99, 2.03), (0.0199, 0.02, 0.0201))
    assert within["graph_gap"] == pytest.approx(-0.005)         # negative, reported as it is
    assert within["graph_gap_range"][2] > 0 and LAB08.gap_problems(within, kernels=100) == []
    beyond = _gap_row((1.85, 1.9, 1.95), (0.0199, 0.02, 0.0201))
    assert beyond["graph_gap"] == pytest.approx(-0.05)
    problems = LAB08.gap_problems(beyond, kernels=100)
    assert len(problems) == 1 and problems[0].startswith("graph: the total (1.9000 ms) is 5.0% below "
                                                         "100 x the kernel's own duration (0.0200 ms, ncu)")
    assert "at most -2.0%" in problems[0]
    assert LAB08.gap_problems(_gap_row((1.9, 2.0, 2.1), (-0.001, -0.0005, 0.0)), kernels=100)[0] \
        .startswith("the kernel's duration (ncu) came out at -0.00050 ms: not positive")


def test_a_gap_within_the_durations_disagreement_is_not_a_problem():
    """The kernel's cold-cache (Nsight Compute) and in-chain (marginal) durations differ by 0.55%
    in the H200 data: a gap of -0.5% beyond the timing spread is within that, -1% is not."""
    eager = (18.0, 18.2, 18.4)                                           # eager gaps: ~14%
    row = _gap_row((15.92, 15.924, 15.927), (0.16006, 0.16011, 0.16032), eager=eager)
    row.update(n=33554432, ncu_kernel_ms=0.16011, marginal_kernel_ms=0.15923)
    assert LAB08.gap_problems(row, kernels=100) != []                    # beyond the spread alone
    record = LAB08.judge_gaps({"rows": [row]})
    assert record["duration_resolution"] == pytest.approx(0.0055, abs=1e-4)
    assert row["problems"] == [] and record["target"]["ok"]
    assert row["graph_gap"] == pytest.approx(-0.0054, abs=1e-4)          # still reported as it is
    worse = _gap_row((15.82, 15.85, 15.87), (0.16006, 0.16011, 0.16032), eager=eager)
    worse.update(n=33554432, ncu_kernel_ms=0.16011, marginal_kernel_ms=0.15923)
    judged = LAB08.judge_gaps({"rows": [worse]})
    assert "durations' disagreement (0.55%)" in worse["problems"][0] and not judged["target"]["ok"]


def test_a_duration_range_that_reaches_zero_leaves_the_gap_unbounded_above():
    assert LAB08.gap_range((1.0, 1.0, 1.0), (0.0, 0.01, 0.02), kernels=100)[2] == float("inf")


STREAMS = {"copy": {"write_fraction": 0.5, "gbps": 4000.0}, "2:1": {"write_fraction": 1 / 3, "gbps": 4100.0},
           "4:1": {"write_fraction": 0.2, "gbps": 4400.0}, "read_only": {"write_fraction": 0.008, "gbps": 4600.0}}


def test_a_row_gets_the_ceiling_of_its_own_read_write_mix():
    from kernellab.gpu import timing
    assert timing.ceiling_for_mix(0.5, STREAMS) == (4000.0, "copy (measured, write fraction 0.500)")
    assert timing.ceiling_for_mix(0.2, STREAMS)[0] == 4400.0
    assert timing.ceiling_for_mix(0.0, STREAMS)[0] == 4600.0           # within MIX_MATCH of 0.008
    # Lab 02's fused chain: x, w, b, r (4 B) and a 1-byte mask read, out written: 4 / 21
    gbps, how = timing.ceiling_for_mix(4 / 21, STREAMS)
    share = (4 / 21 - 0.008) / (0.2 - 0.008)
    assert gbps == pytest.approx(4600 + share * (4400 - 4600))
    assert how == "interpolated between read_only and 4:1 at write fraction 0.190"
    between = timing.ceiling_for_mix(0.4, STREAMS)[0]
    assert between == pytest.approx(4100 + (0.4 - 1 / 3) / (0.5 - 1 / 3) * (4000 - 4100))
    gbps, how = timing.ceiling_for_mix(0.8, STREAMS)                   # write-heavy: none measured
    assert gbps == 4000.0 and how.startswith("copy, the nearest measured mix (write fraction 0.800 is outside")
    with pytest.raises(ValueError, match="outside"):
        timing.ceiling_for_mix(1.2, STREAMS)


def test_a_read_heavy_kernel_above_the_copy_is_not_an_instrument_error_below_its_own_ceiling():
    """torch.compile's 4:1 chain on an H200 read 101.4% of the copy: a result against the 4:1 ceiling."""
    from kernellab.course import bench
    from kernellab.gpu import timing
    ceilings = {"copy_gbps": 4000.0, "copy": STREAMS["copy"], "streams": {k: v for k, v in STREAMS.items()
                                                                           if k != "copy"}}
    fused = {"bytes": 20_000_000, "write_fraction": 0.2, "median_ms": 20_000_000 / 4318e6}
    bench.rate_against_ceilings(fused, ceilings)
    assert fused["pct_of_copy"] == pytest.approx(107.95) and "instrument_error" not in fused
    assert fused["pct_of_ceiling"] == pytest.approx(100 * 4318 / 4400)
    copy_like = {"bytes": 8_000_000, "write_fraction": 0.5, "median_ms": 8_000_000 / 4318e6}
    bench.rate_against_ceilings(copy_like, ceilings)
    assert copy_like["instrument_error"].startswith("108.0% of the ceiling for its mix (copy (measured")
    assert timing.memory_roof(ceilings) == (4600.0, "read_only")


def test_provenance_records_the_settings_that_change_results(monkeypatch):
    from kernellab.course import reference
    monkeypatch.setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
    settings = reference.provenance()["settings"]
    assert settings["CUDA_DEVICE_MAX_CONNECTIONS"] == "32"
    assert settings["clocks"]        # read through nvidia-smi on a GPU; says why not otherwise


def test_the_stream_ceiling_kernels_compute_over_their_whole_buffers(monkeypatch):
    """The 2:1, 4:1 and read-only kernels of every width, run once each on a tiny 'L2' (the
    simulator has no clock: each timing is a stand-in, so only the mixes' bytes and the kernels'
    own checks are real)."""
    import types
    from kernellab.gpu import timing
    monkeypatch.setattr(timing, "require_gpu", lambda what="": None)
    monkeypatch.setattr(timing, "COPY_BLOCK", 32)
    monkeypatch.setattr(timing.device, "facts", lambda: types.SimpleNamespace(l2_bytes=256, sm_count=1))

    def time_once(fn, **_):
        fn()
        return timing.Timing((1.0, 1.0, 1.0))

    monkeypatch.setattr(timing, "time_gpu", time_once)
    mixes = timing.stream_bandwidths()           # raises if a kernel missed part of its buffer
    buffer = 2048                                # 8 x the 256 B 'L2', in whole chunks
    assert mixes["2:1"]["bytes"] == 3 * buffer and mixes["2:1"]["write_fraction"] == pytest.approx(1 / 3)
    assert mixes["4:1"]["bytes"] == 5 * buffer and mixes["4:1"]["write_fraction"] == pytest.approx(0.2)
    for mix, methods in timing._stream_methods().items():
        assert set(mixes[mix]["by_method_gbps"]) == set(methods)
    assert mixes["read_only"]["bytes"] == buffer + 8 * 32 * 16   # the widest partials won the stand-in


def test_the_copy_ceiling_checks_every_method_in_a_poisoned_buffer(monkeypatch):
    """Each copy method, the float32x4 one included, copies the whole buffer (stand-in timings, as
    above); a method that skips its work fails the check instead of winning the ceiling."""
    import types
    from kernellab.gpu import timing
    monkeypatch.setattr(timing, "require_gpu", lambda what="": None)
    monkeypatch.setattr(timing, "COPY_BLOCK", 32)
    monkeypatch.setattr(timing, "CHECKED", 64)
    monkeypatch.setattr(timing.device, "facts", lambda: types.SimpleNamespace(l2_bytes=256, sm_count=1))
    times = iter([2.0, 1.0, 1.0, 1.0, 0.5, 1.0])  # memcpy, then the kernels: the float32x4 one is fastest

    def time_once(fn, **_):
        fn()
        return timing.Timing((next(times),))

    monkeypatch.setattr(timing, "time_gpu", time_once)
    copy = timing.copy_bandwidth()
    assert set(copy["by_method_gbps"]) == {"memcpy", *timing._copy_methods()}
    assert copy["method"] == "copy_2xfloat32x4" and copy["bytes"] == 2 * 2048
    lazy = timing.device.cuda().jit(lambda src, dst: None)
    monkeypatch.setattr(timing, "_copy_methods", lambda: {"copy_lazy": (lazy, timing.np.float32)})
    times = iter([1.0, 0.1])
    with pytest.raises(RuntimeError, match="copy ceiling: copy_lazy did not compute"):
        timing.copy_bandwidth()


def test_the_float32x4_ceiling_kernels_move_16_bytes_per_load_and_store():
    """Their PTX (compiled for an H200 without a GPU) has only 128-bit global accesses
    (ld/st.global.v4.f32), the accesses Triton's kernels make; the read-only sum's one partial
    per thread is its only 4-byte store."""
    import re
    from kernellab.gpu import timing
    from kernellab.course import audit
    one, two, four = (", ".join(["float32[::1]"] * n) for n in (2, 3, 5))
    kernels = {timing.copy_float32x4_kernel: one, timing.add_2_to_1_float32x4_kernel: two,
               timing.add_4_to_1_float32x4_kernel: four, timing.copy_float32x4_flat_kernel: one,
               timing.add_2_to_1_float32x4_flat_kernel: two, timing.add_4_to_1_float32x4_flat_kernel: four,
               timing.read_sum_float32x4_kernel: one, timing.read_sum_float32x4_flat_kernel: one}
    found = [set(re.findall(r"\b(?:ld|st)\.global[.\w]*", text))
             for text in audit.ptx([(kernel, f"void({args})") for kernel, args in kernels.items()])]
    vector, summed = {"ld.global.v4.f32", "st.global.v4.f32"}, {"ld.global.v4.f32", "st.global.f32"}
    assert found == [vector] * 6 + [summed] * 2, found
