"""Labs 07 and 08 report a bad measurement instead of hiding it, and each row gets the ceiling of its own
read:write mix (pure functions, no GPU needed)."""

import pytest

import kernellab  # noqa: F401
from kernellab.course import protocol

LAB07, LAB08 = protocol.experiment("07"), protocol.experiment("08")


def test_a_recorder_free_share_above_1_is_a_problem_only_beyond_its_reps_noise():
    """Each rep's share is a difference of three noisy makespans: a pipeline hiding everything
    reads a little above 1 in some reps (call B, 2026-12-02: median 1.009), which is no problem;
    shares above 1 in nearly every rep are."""
    from experiments.lab07_measure import saved_too_much
    assert saved_too_much([0.97, 0.99, 1.0, 1.01, 1.009, 1.02, 0.98, 1.03, 1.004, 0.995]) == []
    assert saved_too_much([1.04, 1.05, 1.06, 1.08, 1.05, 1.07, 1.04, 1.09, 1.06, 1.05]) == [
        "without the recorder: hidden share above 1 in 9 of 10 reps (p10 1.040)"]


def _concurrency(connections, speedups_16=16.0) -> dict:
    rows = [{"streams": s, "speedup": min(s, speedups_16) if s == 16 else s, "model_error": 0.01 * s}
            for s in (1, 2, 4, 8, 16)]
    return {"max_connections": str(connections), "shapes": {"few_sms": {"modes": {"gated": rows}}},
            "live": True}       # live: read alone, never beside the reference file's repeats


def test_a_stream_sweep_is_read_only_at_the_connections_it_was_measured_at():
    """A record says its CUDA_DEVICE_MAX_CONNECTIONS; a claim about 8 queues never reads a 32 one."""
    from kernellab.course import claims
    from experiments import lab07_claims
    at_32 = {"concurrency": _concurrency(32), "concurrency_8_connections": _concurrency(32, 7.9)}
    with pytest.raises(claims.Missing, match="measured at 32 connections, not 8"):
        lab07_claims._sweep(at_32, 8)
    sweep = lab07_claims._sweep({"concurrency": _concurrency(32)}, 32)
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


def _timing(p10: float, median: float, p90: float) -> "timing.Timing":
    """A Timing whose p10, median and p90 are the three given (ms): 11 samples of each end, 78 of
    the median (numpy's percentiles interpolate between neighbours)."""
    from kernellab.gpu import timing
    return timing.Timing((p10,) * 11 + (median,) * 78 + (p90,) * 11)


BRACKET = (0.0030, 0.0031, 0.0032)      # one launch on one element between events: latency + a tiny kernel


def _gap_row(graph: tuple, alone: tuple, n=33554432, eager=(18.0, 18.2, 18.4), bracket=BRACKET) -> dict:
    """A size's row as measure_idle_gaps builds it, from made-up (p10, median, p90) timings; the
    200-kernel replay is twice the 100-kernel one."""
    return LAB08.gap_row(n, _timing(*eager), _timing(*graph), _timing(*(2 * t for t in graph)),
                         _timing(*alone), _timing(*bracket))


def test_the_kernel_alone_less_its_one_element_launch_is_the_duration():
    """The latency the events and the launch add is in both measurements and cancels; the range
    pairs the extremes of the two spreads."""
    low, mid, high = LAB08.alone_duration((0.0500, 0.0510, 0.0520), BRACKET)
    assert (low, mid, high) == pytest.approx((0.0468, 0.0479, 0.0490))
    assert LAB08.marginal_duration(1.05, 3.05, kernels=100) == pytest.approx(0.020)
    row = _gap_row((4.90, 4.95, 5.00), (0.0500, 0.0510, 0.0520))
    assert row["kernel_ms"] == pytest.approx(0.0479) and row["duration_source"] == LAB08.ALONE
    assert row["marginal_kernel_ms"] == pytest.approx(0.0495)           # recorded beside, not used
    assert row["graph_gap"] == pytest.approx(4.95 / 4.79 - 1)


def test_a_gaps_resolution_is_the_spreads_of_its_own_measurements():
    """The duration's range over its median plus the total's p10-p90 over its median, from the
    samples: no other row and no other instrument enters it."""
    duration = LAB08.alone_duration((0.0500, 0.0510, 0.0520), BRACKET)
    assert LAB08.gap_resolution(duration, (4.90, 4.95, 5.00)) == pytest.approx(0.0022 / 0.0479 + 0.10 / 4.95)
    assert LAB08.gap_resolution((-0.001, 0.0, 0.001), (1.0, 1.0, 1.0)) == float("inf")


def test_gaps_are_signed_and_only_a_negative_one_beyond_its_resolution_is_a_problem():
    assert LAB08.signed_gap(2.1, 0.02) == pytest.approx(0.05)
    tight = (0.16330, 0.16331, 0.16332)                  # the kernel alone: duration 0.16021 ms, +-0.0001
    within = _gap_row((15.98, 15.99, 16.00), tight)
    assert within["graph_gap"] == pytest.approx(-0.0019, abs=1e-4)      # negative, reported as it is
    assert within["graph_resolution"] > 0.0019 and LAB08.gap_problems(within) == []
    beyond = _gap_row((15.19, 15.20, 15.21), tight)
    assert beyond["graph_gap"] == pytest.approx(-0.0512, abs=1e-4)
    problems = LAB08.gap_problems(beyond)
    assert len(problems) == 1 and problems[0].startswith("graph: the total (15.2000 ms) is 5.1% below "
                                                         "100 x the kernel's own duration (0.1602 ms, the kernel alone")
    assert "beyond what its measurements resolve (0.27%" in problems[0]
    unresolved = _gap_row((1.9, 2.0, 2.1), (0.0029, 0.0030, 0.0031))
    assert LAB08.gap_problems(unresolved)[0].startswith("the kernel's duration (the kernel alone")
    assert unresolved["graph_gap"] != unresolved["graph_gap"]           # NaN: no gap, never 0


def test_the_target_reads_the_gaps_against_the_kernel_alone():
    """Under 5% with no problem holds; 6%, or a problem, misses; short kernels do not count."""
    alone = (0.0430, 0.0431, 0.0432)                     # 40 us kernels: duration 0.0400 ms
    short = _gap_row((0.50, 0.51, 0.52), (0.0040, 0.0041, 0.0042), n=1 << 20)   # 1 us kernels, gaps ~400%
    met = LAB08.judge_gaps({"rows": [short, _gap_row((4.15, 4.16, 4.17), alone, n=1 << 23)]})
    assert met["target"] == {"gap_max": 0.05, "kernel_ms_min": 0.02, "ok": True}
    missed = LAB08.judge_gaps({"rows": [short, _gap_row((4.23, 4.24, 4.25), alone, n=1 << 23)]})
    assert not missed["target"]["ok"] and missed["rows"][1]["graph_gap"] == pytest.approx(0.06, abs=1e-3)


def _recorded_gaps(graph_ms: float) -> dict:
    """A live idle-gap record (read alone, never beside the reference file's repeats) of three
    sizes, the longest's replay taking `graph_ms` against kernels of 0.1602 ms."""
    rows = [_gap_row((0.20, 0.21, 0.22), (0.0031, 0.0032, 0.0033), n=1 << 12),    # duration not resolved
            _gap_row((0.61, 0.62, 0.63), (0.0090, 0.0091, 0.0092), n=1 << 20, eager=(4.2, 4.3, 4.4)),
            _gap_row((graph_ms - 0.01, graph_ms, graph_ms + 0.01), (0.16330, 0.16331, 0.16332))]
    return {"idle_gaps": {**LAB08.judge_gaps({"kernels": 100, "rows": rows}), "live": True}}


def test_the_gaps_claim_says_its_duration_and_flips_across_5_percent():
    from kernellab.course import claims
    gaps = next(c for c in LAB08.CLAIMS if c.name == "gaps_below_5pct")
    held = claims.evaluate(gaps, _recorded_gaps(16.50))                 # +3.0%
    assert held.true and "[holds]" in held.text and "largest replayed gap of any kernel every repeat resolves" in held.text
    assert "1 row(s) too short to resolve" in held.text
    missed = claims.evaluate(gaps, _recorded_gaps(16.98))               # +6.0%
    assert missed.true and "[MISSED]" in missed.text
    below = claims.evaluate(gaps, _recorded_gaps(15.20))                # -5.1%, beyond its resolution
    assert "-5.12%, lies below -0.27%" in below.text and "(1 measurement problems;" in below.text
    from test_claims import flip_failures        # the perturbation test, on a record it can read
    assert flip_failures(gaps, gaps.values(_recorded_gaps(16.50))) == []


def test_the_idle_gap_measurement_times_the_kernel_alone_beside_each_replay(monkeypatch):
    """measure_idle_gaps on a clock that answers made-up timings (no GPU needed; capture runs,
    nothing is launched): per size, the eager pipeline, the two replays, the kernel alone on the
    size's buffer and on one element, in that order; its record is what the claim reads."""
    from kernellab.course import claims, target
    from kernellab.gpu import timing
    answers = {"eager": (18.0, 18.2, 18.4), "replay": (16.49, 16.50, 16.51), "double": (32.9, 33.0, 33.1),
               "alone": (0.16330, 0.16331, 0.16332), "bracket": BRACKET}
    timed = []

    def clock(fn, **kwargs):
        what = list(answers)[len(timed) % len(answers)]
        timed.append((what, kwargs.get("hide_host", True), kwargs.get("reps")))
        return _timing(*answers[what])

    monkeypatch.setattr(timing, "time_gpu", clock)
    # tiny buffers (the clock decides the lengths), set where measure_idle_gaps reads them (lab08_measure)
    monkeypatch.setitem(LAB08.measure_idle_gaps.__globals__, "GAP_SIZES", (40, 64))
    record = LAB08.measure_idle_gaps(target.load("08", "solutions"))
    assert [w for w, _, _ in timed] == list(answers) * 2
    assert [h for w, h, _ in timed if w == "eager"] == [False, False]          # the host's pacing is the subject
    assert {r for w, _, r in timed if w in ("alone", "bracket")} == {LAB08.ALONE_REPS}
    row = record["rows"][1]
    assert row["kernel_ms"] == pytest.approx(0.16021) and row["duration_source"] == LAB08.ALONE
    assert row["graph_gap"] == pytest.approx(16.50 / 16.021 - 1) and record["target"]["ok"]
    gaps = next(c for c in LAB08.CLAIMS if c.name == "gaps_below_5pct")
    assert claims.evaluate(gaps, {"idle_gaps": {**record, "live": True}}).true


def test_a_record_without_the_independent_duration_awaits_it():
    """The H200 reference of 2026-12-01 has the gaps against the replay's own duration: the claim
    awaits the new recording, the figures and the key line say which duration they show."""
    from kernellab.course import claims
    gaps = next(c for c in LAB08.CLAIMS if c.name == "gaps_below_5pct")
    old = {"idle_gaps": {"kernels": 100, "live": True, "rows": [
        {"n": 1 << 25, "kernel_ms": 0.16, "kernel_ms_range": [0.159, 0.161], "graph_gap": -0.005,
         "eager_gap": 0.02, "graph_gap_range": [-0.006, -0.005, -0.004]}]}}
    verdict = claims.evaluate(gaps, old)
    assert verdict.true is None and "before the kernel's independent duration" in verdict.missing
    assert LAB08.duration_used(old["idle_gaps"]).startswith("recorded before the independent duration")
    assert not LAB08.below_resolution(old["idle_gaps"]["rows"][0], "graph")


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


def test_a_ceiling_is_never_below_a_measured_mix_with_more_writes():
    """The H200's 2026-12-02 ceilings: the read-only sum (4362 GB/s) under the 4:1 stream (4420).
    Lab 02's vectorised chain, 4 / 21 of its bytes written, ran at 4420: 100.1% of the line
    between them, which the 4:1 measurement itself shows too low."""
    from kernellab.gpu import timing
    measured = {"read_only": {"write_fraction": 0.0021, "gbps": 4362.0}, "4:1": {"write_fraction": 0.2, "gbps": 4420.0},
                "2:1": {"write_fraction": 1 / 3, "gbps": 4356.0}, "copy": {"write_fraction": 0.5, "gbps": 4259.0}}
    gbps, how = timing.ceiling_for_mix(4 / 21, measured)
    assert gbps == 4420.0
    assert how.startswith("4:1 (measured at write fraction 0.200, more writes than this mix's 0.190, "
                          "and faster than interpolated between read_only and 4:1")
    assert timing.ceiling_for_mix(0.25, measured)[0] == pytest.approx(4420 + (0.25 - 0.2) / (1 / 3 - 0.2) * (4356 - 4420))
    assert timing.ceiling_for_mix(0.5, measured)[0] == 4259.0


def test_a_row_above_its_ceiling_within_the_timings_resolution_is_at_the_ceiling():
    """Above by less than half of each timing's p10-p90 spread, added: at the ceiling. Above by
    more: an instrument error, whatever the spreads."""
    from kernellab.course import bench
    ceiling = {"write_fraction": 0.2, "gbps": 4400.0, "median_ms": 1.0, "p10_ms": 0.999, "p90_ms": 1.001}
    ceilings = {"copy_gbps": 4000.0, "copy": {**ceiling, "write_fraction": 0.5, "gbps": 4000.0},
                "streams": {"4:1": ceiling}}

    def rated(gbps, spread_ms):
        ms = 20_000_000 / (gbps * 1e6)
        row = {"bytes": 20_000_000, "write_fraction": 0.2, "median_ms": ms, "p10_ms": ms - spread_ms,
               "p90_ms": ms + spread_ms}
        bench.rate_against_ceilings(row, ceilings)
        return row
    close = rated(4403.0, 0.00002)            # 100.07%, resolution 0.1 + 0.44 points
    assert "instrument_error" not in close and close["at_ceiling"].startswith("100.07% of the ceiling")
    above = rated(4450.0, 0.00002)            # 101.1%
    assert "at_ceiling" not in above and above["instrument_error"].startswith("101.1% of the ceiling")
    below = rated(4300.0, 0.0)
    assert "at_ceiling" not in below and "instrument_error" not in below


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


def test_lab02s_vectorised_chain_moves_each_input_in_16_byte_loads():
    """fused_chain_vectorized_kernel (given, in labs/ and solutions/ alike) loads x, w, b and r with
    one ld.global.v4.f32 each and stores with one st.global.v4.f32; its 4-byte accesses are the
    tail's and the mask's bytes (the vectorised benchmark row would otherwise be a scalar kernel)."""
    import re
    from kernellab.course import audit
    from kernellab.course.claims import course_solution
    lab = course_solution("02")
    text, = audit.ptx([(lab.fused_chain_vectorized_kernel, lab.SIGNATURES["fused_chain_vectorized_kernel"])])
    assert len(re.findall(r"\bld\.global\.v4\.f32", text)) == 4, text
    assert len(re.findall(r"\bst\.global\.v4\.f32", text)) == 1, text


@pytest.mark.parametrize("order", ["depth_first", "breadth_first"])
def test_the_tuning_steps_given_pipelines_give_the_labs_result(order):
    """A tuning step's given pipeline computes what the lab's does (the simulator, 37 elements)."""
    from numba import cuda
    import numpy as np
    from experiments import lab07_measure
    from kernellab.course import target
    lab = target.load("07", "solutions")
    host_x = cuda.pinned_array(37, dtype=np.float32)
    host_x[:] = np.linspace(-1.0, 2.0, 37, dtype=np.float32)
    streams = [cuda.stream() for _ in range(3)]
    buffers = (cuda.device_array(37, dtype=np.float32), cuda.device_array(37, dtype=np.float32))
    depth = lab.pipeline(host_x, 2, streams, 5, cuda.pinned_array_like(host_x), buffers).copy()
    out = cuda.pinned_array_like(host_x)
    out[:] = np.nan
    assert lab07_measure.issued_pipeline(lab, order, host_x, 2, streams, 5, out, buffers) is out
    np.testing.assert_array_equal(out, depth)
    np.testing.assert_allclose(out, lab.busy_reference(host_x, 2), rtol=1e-6)


def test_a_samples_settling_calls_run_inside_its_context_before_its_clock(monkeypatch):
    """What opening a way's context costs the calls right after it (a transient: the first calls slow)
    is paid by the settling calls, timed apart, and not spread over the sample's per-call figure."""
    import contextlib
    from kernellab.gpu import timing
    monkeypatch.setattr(timing, "require_gpu", lambda what="": None)
    clock = {"s": 0.0, "calls": 0}           # a host clock that only the calls move
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock["s"])

    @contextlib.contextmanager
    def opened():          # an instrument whose first 3 calls after each opening take 2 ms more
        clock["calls"] = 0
        yield

    def transient():
        clock["calls"] += 1
        clock["s"] += 1e-6 + (2e-3 if clock["calls"] <= 3 else 0.0)

    def bare():
        clock["s"] += 1e-6
    ways = {"bare": (contextlib.nullcontext, bare), "transient": (opened, transient)}
    spread = timing.time_host_in_turn(ways, inner=10, reps=4)
    settled = timing.time_host_in_turn(ways, inner=10, reps=4, settle=5)
    assert spread["transient"].samples_ms == pytest.approx((0.601,) * 4)     # 6 ms over 10 calls
    assert settled["transient"].samples_ms == pytest.approx((0.001,) * 4)
    assert spread["transient"].settle_ms == () and settled["transient"].settle_ms == pytest.approx((6.005,) * 4)


def test_where_eager_gaps_fall_under_5_percent_is_said_in_every_case():
    """Under 5% from a length on, from the shortest, or nowhere: never 'between 40 and nan us'."""
    from experiments.lab08_claims import _eager_under_5pct
    rows = [{"kernel_ms": ms} for ms in (0.005, 0.040, 0.159)]
    assert _eager_under_5pct(rows, rows[2:]) == ("somewhere between 40 and 159 us kernels "
                                                 "(the sweep has no length between)")
    assert _eager_under_5pct(rows, rows) == "at every length every repeat resolves, from 5 us"
    assert _eager_under_5pct(rows, []) == "at none of the lengths every repeat resolves, up to 159 us"
