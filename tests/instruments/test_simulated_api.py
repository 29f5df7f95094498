"""The simulator speaks numba-cuda 0.30's real API (kernellab.gpu.simulated_api): each call it lacked
is called once here, and its signature is checked against numba-cuda's own source."""

from __future__ import annotations

import ast
import asyncio
import inspect
from pathlib import Path

import pytest

from kernellab.gpu import device, simulated_api

cuda = device.cuda()
pytestmark = pytest.mark.skipif(not device.is_simulator(), reason="the simulator's additions")


def real_parameters(relative: str, qualname: str) -> list[str]:
    """The parameter names of numba-cuda's real (GPU) function `qualname` in `relative`
    (a file of the installed numba.cuda package), read from its source."""
    import numba.cuda
    tree = ast.parse((Path(numba.cuda.__file__).parent / relative).read_text())
    *owner, name = qualname.split(".")
    body = tree.body
    for class_name in owner:
        body = next(n for n in body if isinstance(n, ast.ClassDef) and n.name == class_name).body
    function = next(n for n in body if isinstance(n, ast.FunctionDef) and n.name == name)
    return [a.arg for a in function.args.args]


@pytest.mark.parametrize("ours, relative, qualname", [
    (lambda: cuda.event, "api.py", "event"),
    (lambda: cuda.event_elapsed_time, "cudadrv/driver.py", "event_elapsed_time"),
    (lambda: cuda.event().query, "cudadrv/driver.py", "Event.query"),
    (lambda: cuda.event().elapsed_time, "cudadrv/driver.py", "Event.elapsed_time"),
    (lambda: cuda.stream().add_callback, "cudadrv/driver.py", "Stream.add_callback"),
    (lambda: cuda.stream().async_done, "cudadrv/driver.py", "Stream.async_done"),
])
def test_signatures_match_numba_cuda(ours, relative, qualname):
    real = [name for name in real_parameters(relative, qualname) if name != "self"]
    assert list(inspect.signature(ours()).parameters) == real


def test_events_take_the_timing_flag_answer_queries_and_time_nothing():
    untimed, positional, default = cuda.event(timing=False), cuda.event(True), cuda.event()
    assert (untimed.timing, positional.timing, default.timing) == (False, True, True)
    positional.record(cuda.stream())
    default.record()
    assert positional.query() and default.query()   # the simulator has finished all work
    assert cuda.event_elapsed_time(positional, default) == -1.0 == positional.elapsed_time(default)
    with pytest.raises(simulated_api.EventError, match="timing=False"):
        cuda.event_elapsed_time(untimed, default)


def test_stream_callbacks_run_in_order_and_async_done_resolves_to_the_stream():
    stream, seen = cuda.stream(), []
    stream.add_callback(lambda s, status, arg: seen.append((s is stream, status, arg)), "first")
    stream.add_callback(lambda s, status, arg: seen.append(arg))
    assert seen == [(True, simulated_api.CUDA_SUCCESS, "first"), None]

    async def wait():
        return await stream.async_done()
    assert asyncio.run(wait()) is stream
    with pytest.raises(RuntimeError):       # as on a GPU: it needs a running event loop
        stream.async_done()


def test_device_attributes_are_the_reference_devices():
    facts, gpu = device.facts(), cuda.get_current_device()
    assert (gpu.MULTIPROCESSOR_COUNT, gpu.MAX_THREADS_PER_BLOCK, gpu.WARP_SIZE,
            gpu.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, gpu.L2_CACHE_SIZE) == (
        facts.sm_count, facts.max_threads_per_block, facts.warp_size,
        facts.max_shared_per_block_optin, facts.l2_bytes)
    assert gpu.compute_capability == facts.cc == (gpu.COMPUTE_CAPABILITY_MAJOR,
                                                   gpu.COMPUTE_CAPABILITY_MINOR)
    with pytest.raises(AttributeError, match="no attribute 'CLOCK_RATE_OF_NOTHING'"):
        gpu.CLOCK_RATE_OF_NOTHING
