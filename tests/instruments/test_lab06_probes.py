"""Lab 06's compute-bound probes are FMA-bound by construction: their PTX loop is FMAs.

Issue 13: with a runtime trip count, the probe's loop put 64-bit compares, selects and adds
beside every few FMAs and it peaked at 10% of the FP32 peak. The probes now have a compile-time
trip count and an int32 counter; their innermost PTX loop (sm_90, compiled without a GPU) must
be FMAs with a few instructions of loop control, and the form they replaced must not be.
"""

import pytest

from kernellab.course import protocol

experiment = protocol.experiment("06")

NESTED = """\
$L__BB0_2:
\tld.global.f32 \t%f1, [%rd4];
\tmov.u64 \t%rd9, 256;
$L__BB0_3:
\tfma.rn.f32 \t%f1, %f1, 0f3F7FBE77, 0f3A83126F;
\tfma.rn.f32 \t%f1, %f1, 0f3F7FBE77, 0f3A83126F;
\tadd.s64 \t%rd9, %rd9, -2;
\tsetp.ne.s64 \t%p1, %rd9, 0;
\t@%p1 bra \t$L__BB0_3;
\tst.global.f32 \t[%rd5], %f1;
\t@%p2 bra \t$L__BB0_2;
"""


def test_loop_instructions_reads_the_innermost_loop_that_holds_fmas():
    assert experiment.loop_instructions(NESTED) == {
        "fma": 2, "other": 3, "others": {"add.s64": 1, "setp.ne.s64": 1, "bra": 1}}
    with pytest.raises(ValueError, match="no loop"):
        experiment.loop_instructions(NESTED.replace("fma.rn.f32", "mul.rn.f32"))


@pytest.fixture(scope="module")
def loops():
    return experiment.probe_loops()


@pytest.mark.parametrize("probe", ["compute_bound", "compute_bound_ilp4"])
def test_the_compute_probes_loop_is_fmas(loops, probe):
    loop = loops[probe]
    assert loop["fma"] >= 32 and loop["other"] * 16 <= loop["fma"], (
        f"{probe}: its PTX loop holds {loop['fma']} fma.rn.f32 beside {loop['other']} other "
        f"instructions ({loop['others']}); the FMA pipe would lose their issue slots")
    assert not any(".f64" in opcode for opcode in loop["others"]), loop["others"]


def test_the_runtime_trip_count_form_is_what_the_probes_replaced(loops):
    """The check can fail: the form the probes replaced has as many other instructions as FMAs."""
    loop = loops["runtime_trip_count"]
    assert loop["other"] >= loop["fma"], loop


def sweep_record(compute_gflops, ilp4_gflops, peak_gflops=66_908.16):
    rows = [{"probe": "compute_bound", "gflops": compute_gflops},
            {"probe": "compute_bound", "gflops": compute_gflops / 2},
            {"probe": "compute_bound_ilp4", "gflops": ilp4_gflops}]
    return {"occupancy_vs_speed": {"fp32_peak_gflops": peak_gflops, "fma_ceiling_tflops": 32.7, "rows": rows,
                                   "fma_loop": {"compute_bound": {"fma": 64, "other": 3, "others": {}}},
                                   "provenance": {}}}


def test_the_target_is_60_percent_of_the_fp32_peak_by_the_best_probe():
    lab = experiment.LAB.module()
    met = experiment.targets(lab, sweep_record(41_000, 30_000))["compute_probe"]
    assert met["fp32_peak_target_met"] and round(met["pct_of_fp32_peak"]) == 61
    assert round(met["pct_of_measured_fma"]) == round(100 * 41 / 32.7)
    missed = experiment.targets(lab, sweep_record(6_947, 19_313))["compute_probe"]   # as recorded 2026-11-29
    assert not missed["fp32_peak_target_met"] and round(missed["pct_of_fp32_peak"]) == 29
