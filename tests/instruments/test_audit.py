"""kernellab.course.audit: which kernels it audits, and that it asks a driver, never guesses one.

The audit itself runs on a GPU (`kernellab bench 06`: calculator_vs_driver, resources_vs_driver);
here, what a laptop can check: the kernel lists, the dynamic sizes it sweeps, its refusals.
"""

import pytest

from kernellab import occupancy as occ
from kernellab.course import protocol, target
from kernellab.gpu import device
from kernellab.course import audit


def test_lab_kernels_take_declared_signatures_and_name_the_rest():
    lab06 = target.load("06", "solutions")
    experiment = protocol.experiment("06")
    found, undeclared = audit.lab_kernels({"06": (lab06, ["linear_relu_kernel"]),
                                           "99": (experiment, ["stream_kernel"])})
    assert [(label, sig) for label, _, sig in found] == [
        ("lab06.linear_relu_kernel", lab06.SIGNATURES["linear_relu_kernel"])]
    assert found[0][1] is lab06.linear_relu_kernel
    assert undeclared == ["lab99.stream_kernel"], "a kernel with no signature is named, not dropped"


def test_course_kernels_walk_every_lab_and_keep_the_kernels_the_claims_read():
    """The grid claim reads lab00.axpb_grid_stride_kernel from resources_vs_driver; Lab 06's own
    kernel comes from its LAB.kernels."""
    found, undeclared = audit.course_kernels()
    labels = {label for label, _, _ in found}
    assert {"lab00.axpb_grid_stride_kernel", "lab06.linear_relu_kernel"} <= labels
    assert all(label.split(".")[0][3:] in target.labs() for label in labels | set(undeclared))
    assert [k.name for k in protocol.declaration("06").kernels] == ["linear_relu_kernel"]


def test_dynamic_values_straddle_each_boundary_and_stay_in_range():
    arch = occ.architecture((9, 0))
    static = 1000
    limit = arch.shared_per_block - static
    values = audit.dynamic_values(static, limit, arch)
    assert {limit - 1, limit, limit + 1} <= set(values)
    assert values == sorted(set(values)) and values[0] == 0
    assert max(values) <= arch.shared_per_block_optin - static + 1


def test_sweep_kernels_are_named_by_what_they_hold():
    label, kernel = audit.sweep_kernel(8, 1024, 32)
    assert label == "sweep_live8_shared1024_cap32"
    assert kernel._kernellab_options == {"max_registers": 32}
    assert len(audit.SWEEP_KERNELS) == len({audit.sweep_kernel(*spec)[0] for spec in audit.SWEEP_KERNELS})


@pytest.mark.skipif(not device.is_simulator(), reason="the refusal is the simulator's")
def test_the_driver_audit_refuses_the_simulator():
    with pytest.raises(RuntimeError, match="simulator has none"):
        audit.calculator_vs_driver([], provenance={})
    with pytest.raises(RuntimeError, match="simulator has none"):
        audit.resources_vs_driver([], [], provenance={})
