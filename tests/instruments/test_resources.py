"""kernellab.kernels: kernels' registers, shared memory and stack, without a GPU, and the
grader's compile check (kernellab.grading.compile_check) that runs on the same compile child.

In the simulator (this machine, CI) the figures come from a child process that compiles the
kernels of tests/instruments/resources_kernels.py with the real numba.cuda and reads ptxas's report; one
child answers the whole batch, and the cache answers the tests after it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kernellab.gpu import device
from kernellab.grading import compile_check
from kernellab.kernels import jit, ptxas, resources
from kernellab.occupancy import occupancy

KERNELS_FILE = Path(__file__).parent / "resources_kernels.py"
simulator_only = pytest.mark.skipif(not device.is_simulator(), reason="checks the simulator path")


@pytest.fixture(scope="module")
def kernels():
    """The kernels' module, imported as `kernellab occupancy FILE:NAME` would import it."""
    axpy = jit.resolve_kernel(f"{KERNELS_FILE}:axpy")
    return sys.modules[axpy.py_func.__module__]


@pytest.fixture(scope="module")
def found(kernels):
    """Every kernel's resources on the default device (an H200, cc 9.0, in the simulator), from
    one batch; the broken kernel's failure is cached too."""
    k = kernels
    batch = [(k.axpy, None), (k.reverse_block, None), (k.heavy, None),
             (k.heavy_capped, "void(float64[::1], float64[::1])"), (k.local_scratch, None),
             (k.broken, "void(float32[::1], float32[::1])")]
    with pytest.raises(ptxas.KernelCompileError):
        resources.kernel_resources_batch(batch)
    return {kernel.__name__ if kernel is not k.heavy_capped else "heavy_capped":
            resources.kernel_resources(kernel, sig) for kernel, sig in batch[:-1]}


def test_simple_kernel(found):
    axpy = found["axpy"]
    assert 4 <= axpy.registers_per_thread <= 64
    assert (axpy.static_shared_bytes, axpy.local_bytes) == (0, 0)
    assert axpy.cc == device.facts().cc
    if device.is_simulator():
        assert axpy.source == "ptxas" and axpy.lto is not None and "ptxas info" in axpy.log
        assert (axpy.spill_stores_bytes, axpy.spill_loads_bytes) == (0, 0)
    else:
        assert axpy.source == "driver" and axpy.spill_stores_bytes is None


def test_static_shared_array(found):
    assert found["reverse_block"].static_shared_bytes == 256 * 4


def test_max_registers_caps_and_spills(found, kernels):
    heavy, capped = found["_many_live_values"], found["heavy_capped"]
    assert heavy.registers_per_thread > 32
    assert capped.registers_per_thread <= 32
    if capped.source == "ptxas":
        assert capped.spill_stores_bytes > 0 and capped.spill_loads_bytes > 0
    assert kernels.heavy_capped._kernellab_options == {"max_registers": 32}


def test_local_array_uses_the_stack_frame(found):
    assert found["local_scratch"].local_bytes >= 64 * 4


def test_example_arguments_give_the_same_answer(found, kernels):
    x = np.zeros(10, np.float32)
    assert resources.kernel_resources(kernels.axpy, (np.float32(2), x, x, x)) == found["axpy"]


def test_occupancy_of(found, kernels):
    heavy = found["_many_live_values"]
    got = resources.occupancy_of(kernels.heavy, None, 256)
    assert got == occupancy(heavy.cc, 256, heavy.registers_per_thread)
    assert "registers" in got.limiters


def test_other_cc(kernels):
    turing = resources.kernel_resources(kernels.reverse_block, None, cc="sm_75")
    assert turing.cc == (7, 5) and turing.static_shared_bytes == 1024
    assert turing.registers_per_thread > 0


def test_compile_failure_is_one_clear_line(found, kernels):
    with pytest.raises(ptxas.KernelCompileError) as info:
        resources.kernel_resources(kernels.broken, "void(float32[::1], float32[::1])")
    message = str(info.value)
    assert message.startswith("broken(") and "TypingError" in message
    assert "Traceback" not in message and len(message.splitlines()) == 1


def test_bad_inputs(kernels):
    with pytest.raises(TypeError, match="not a Numba CUDA kernel"):
        resources.kernel_resources(kernels.not_a_kernel, "void(float32[::1])")
    with pytest.raises(ValueError, match="bad signature"):
        resources.kernel_resources(kernels.axpy, "void(float32[::1]")
    with pytest.raises(ValueError, match="returns void"):
        resources.kernel_resources(kernels.axpy, "float32(float32[::1])")
    with pytest.raises(TypeError, match="signature_or_example_args"):
        resources.kernel_resources(kernels.axpy, 42)
    with pytest.raises(ValueError, match="no signature given for heavy_capped"):
        resources.kernel_resources(kernels.heavy_capped)
    with pytest.raises(ValueError, match="method"):
        resources.kernel_resources(kernels.axpy, None, method="nvcc")


def test_resolve_kernel_and_declared_signatures(kernels):
    assert jit.resolve_kernel(f"{kernels.__name__}:axpy") is kernels.axpy
    assert jit.declared_signatures(kernels.axpy) == [kernels.SIGNATURES["axpy"]]
    with pytest.raises(ValueError, match="its kernels: .*axpy"):
        jit.resolve_kernel(f"{KERNELS_FILE}:nothing_here")
    with pytest.raises(ValueError, match="must look like"):
        jit.resolve_kernel("resources_kernels.py")
    with pytest.raises(TypeError):
        jit.resolve_kernel(f"{KERNELS_FILE}:not_a_kernel")


@simulator_only
def test_driver_method_needs_a_gpu(kernels):
    with pytest.raises(RuntimeError, match="needs a GPU"):
        resources.kernel_resources(kernels.axpy, None, method="driver")


@simulator_only
def test_jit_drops_gpu_only_options_in_the_simulator(kernels):
    from numba.cuda.simulator.kernel import FakeCUDAKernel
    assert isinstance(kernels.heavy_capped, FakeCUDAKernel)


@simulator_only
def test_simulator_still_runs_after_the_child(found, kernels):
    cuda = device.cuda()
    x = np.arange(40, dtype=np.float32)
    y = np.ones(40, dtype=np.float32)
    out = cuda.device_array_like(x)
    kernels.axpy[2, 32](np.float32(3), x, y, out)
    np.testing.assert_allclose(out.copy_to_host(), 3 * x + 1)


def line_of(marker: str) -> int:
    """The line of resources_kernels.py that holds `marker`."""
    return next(n for n, text in enumerate(KERNELS_FILE.read_text().splitlines(), 1) if marker in text)


def test_float32_kernels_are_those_declared_or_launched_with_only_float32_arguments(kernels):
    from numba import float32, float64, int64
    vector, vector64 = float32[::1], float64[::1]
    assert compile_check.is_float32_kernel(kernels.axpy, (float32, vector, vector, vector))
    # declared float32: launched with a Python float, its float64 specialisation is checked
    assert compile_check.is_float32_kernel(kernels.axpy, (float64, vector, vector, vector))
    assert not compile_check.is_float32_kernel(kernels.heavy, (vector, vector))  # declared float64
    assert not compile_check.is_float32_kernel(kernels.float64_accumulator, (vector64, vector))
    assert not compile_check.is_float32_kernel(kernels.float64_accumulator, (int64[::1], int64[::1]))


def test_the_compile_check_names_float64_arithmetic_and_failures_by_their_line(kernels):
    """Float64 arithmetic in a float32 kernel (in the kernel, and inside a device function), a
    kernel no GPU compiles, and a clean float32 kernel, through the grader's compile server."""
    from numba import float32
    vector = float32[::1]
    cases = [(kernels.float64_in_device_function, (vector, vector)),
             (kernels.float64_accumulator, (vector, vector)),
             (kernels.broken, (vector, vector)),
             (kernels.reverse_block, (vector, vector))]
    requests = [compile_check.compile_request(kernel, types) for kernel, types in cases]
    with ptxas.CompileServer(lineinfo=True) as server:      # the grader's: one child, many batches
        device_function, accumulator = compile_check.gpu_compile_errors(requests[:2], server)
        server._proc.kill()                                 # a child that died is reported, then replaced
        with pytest.raises(RuntimeError, match="the compile child process failed"):
            server.ask(requests[2:])
        broken, clean = compile_check.gpu_compile_errors(requests[2:], server)
    assert device_function.startswith("lab kernel `_half_plus_zero` computes in float64 at ")
    assert device_function.endswith(
        f"resources_kernels.py:{line_of('# PRECISION')}: "
        "`return v * 0.5 + 0.0  # PRECISION: bare literals make this float64 arithmetic`\n"
        + compile_check.FLOAT64_RULE)
    assert accumulator.startswith("lab kernel `float64_accumulator` computes in float64 at ")
    assert accumulator.endswith(
        f"resources_kernels.py:{line_of('# ACCUMULATE')}: `acc += x[j]  # ACCUMULATE` (`acc` starts "
        f"as a float64 at line {line_of('# START')}: `acc = 0.0  # START`)\n"
        + compile_check.FLOAT64_RULE)
    assert broken.startswith("broken(array(float32, 1d, C), array(float32, 1d, C)) did not compile")
    assert broken.endswith(f"resources_kernels.py, line {line_of('table[0] = x[0]')}: `table[0] = x[0]`")
    assert clean is None


def test_float64_arithmetic_is_found_in_ptx_with_its_line():
    ptx = """\
\t.file\t1 "/course/labs/lab02.py"
\t.loc\t1 12 1
\tld.global.f32 \t%f1, [%rd4];
\tmov.f64 \t%fd9, 0d0000000000000000;
\t.loc\t1 13 5
@%p1 bra \t$L__BB0_2;
\tcvt.f64.f32 \t%fd1, %f1;
\tfma.rn.f64 \t%fd2, %fd1, 0d3FE0000000000000, 0d0000000000000000;
"""
    found = compile_check.float64_arithmetic(ptx)
    assert found == compile_check.Float64Use("cvt.f64.f32 %fd1, %f1", "/course/labs/lab02.py", 13)
    assert compile_check.float64_arithmetic(ptx.replace("f64", "f32")) is None


LTO_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Function properties for helper
ptxas         .     24 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Compiling entry function 'K' for 'sm_90a'
ptxas info    : Function properties for K
ptxas         .     16 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1024 bytes smem
"""
PTX_LOG = """\
ptxas info    : Compiling entry function 'K' for 'sm_80'
ptxas info    : Function properties for K
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 13 registers, used 1 barriers, 464 bytes cmem[0]
info    : 16 bytes gmem
info    : Function properties for 'K':
info    : used 13 registers, used 1 barriers, 0 stack, 1024 bytes smem, 464 bytes cmem[0], 0 bytes lmem
"""


def test_parse_ptxas_log():
    assert ptxas.parse_ptxas_log(LTO_LOG, "K") == dict(
        registers_per_thread=40, static_shared_bytes=1024, local_bytes=16,
        spill_stores_bytes=4, spill_loads_bytes=12)
    assert ptxas.parse_ptxas_log(PTX_LOG, "K") == dict(
        registers_per_thread=13, static_shared_bytes=1024, local_bytes=0,
        spill_stores_bytes=0, spill_loads_bytes=0)
    with pytest.raises(ptxas.KernelCompileError, match="no ptxas figures"):
        ptxas.parse_ptxas_log(LTO_LOG, "other")


def test_figures_the_cache_hid_in_process_come_from_the_child(kernels, monkeypatch):
    """On a GPU a link in the grader's own process may find the code in CUDA's JIT cache and print
    no figures; the compile child (cache off) answers instead."""
    import types

    def cached_link(*args):
        raise ptxas.KernelCompileError("no ptxas figures for K in the link log:\nptxas info    : 8 bytes gmem")
    monkeypatch.setattr(resources, "device", types.SimpleNamespace(is_simulator=lambda: False, facts=device.facts))
    monkeypatch.setattr(resources, "_ptxas_in_process", cached_link)
    monkeypatch.setattr(jit, "CACHE", {})
    found = resources.kernel_resources(kernels.axpy, None, lto=True)
    assert found.source == "ptxas" and found.registers_per_thread > 0


def test_the_compile_child_links_with_cudas_jit_cache_off(monkeypatch):
    """A link that CUDA's JIT cache answers prints no ptxas figures: on an H100 the child found none
    for a kernel the GPU had compiled under the same HOME (so valid Lab 06 files lost 4 points in
    the mutants' runs, which share a HOME), and found them with the cache off."""
    monkeypatch.setenv("CUDA_CACHE_DISABLE", "0")
    assert ptxas._child_env()["CUDA_CACHE_DISABLE"] == "1"


def test_kernels_of_one_factory_are_told_apart_by_what_they_closed_over():
    """Two kernels a factory builds share their name; the constants they closed over (block
    sizes, trip counts) make them different compiles (a cache keyed on the name alone gave the
    second the first one's registers)."""
    from kernellab.course import target
    lab05 = target.load("05", "solutions")
    small, large = lab05.vector_kernels(256, 8), lab05.vector_kernels(1024, 2)
    assert jit.kernel_name(small) == jit.kernel_name(large)
    keys = {jit.compile_key(k, ("float32[::1]",), (9, 0), None) for k in (small, large)}
    assert len(keys) == 2


def test_a_launch_with_a_python_float_is_checked_as_the_float64_kernel_it_compiled(kernels):
    """The grader's requests come from the launches as recorded, in either mode (here a fake
    record, as a GPU child would take it): axpy, declared float32, launched with a Python float
    for `a`, compiles a float64 `a * x[i]`; the same kernel launched with np.float32 is clean."""
    from numba import float32, float64
    from kernellab.gpu.launches import Launch
    vector = float32[::1]
    launched = [Launch("axpy", (2, 1, 1), (32, 1, 1), 0, 0, kernels.axpy, types)
                for types in [(float64, vector, vector, vector), (float32, vector, vector, vector),
                              (float64, vector, vector, vector)]]        # the repeat is asked once
    requests = compile_check.launched_requests(launched, kernels.axpy.py_func.__module__)
    assert [r["float64_arguments"] for r in requests] == [["a"], []]
    assert compile_check.launched_requests(launched, "labs.") == []     # not the lab's kernel
    python_float, float32_scalar = compile_check.gpu_compile_errors(requests)
    assert python_float.startswith("lab kernel `axpy` computes in float64 at ")
    assert "launched with a Python float for `a`" in python_float.splitlines()[0]
    assert float32_scalar is None
