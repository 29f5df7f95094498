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
