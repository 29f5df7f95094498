"""Tests of kernellab.gpu.graphs itself (not graded): capture, replay, what breaks capture, GraphCache."""

import numpy as np
import pytest

from kernellab.gpu import device, graphs, timing
from kernellab.gpu.launches import record_launches
from kernellab.gpu.timeline import Timeline

cuda = device.cuda()


@cuda.jit
def add_kernel(x, value):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += value


@cuda.jit(debug=True, opt=False)
def add_kernel_debug(x, value):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += value


def adds(x, values, stream=0, block=32):
    for value in values:
        add_kernel[(x.size + block - 1) // block, block, stream](x, value)


def ones(n=40):
    return cuda.to_device(np.ones(n, dtype=np.float32))


def launch_entry_points():
    """What the launch hooks replace, to check that capture puts them back."""
    if device.is_simulator():
        from numba.cuda.simulator.kernel import FakeCUDAKernel
        return FakeCUDAKernel.__call__, FakeCUDAKernel.__getitem__
    from numba.cuda.dispatcher import CUDADispatcher
    return (CUDADispatcher.call,)


ORIGINAL_ENTRY_POINTS = launch_entry_points()


def test_capture_records_without_running_and_replay_runs():
    x = ones()
    graph = graphs.capture(adds, x, [1.0, 2.0], block=16)
    assert len(graph) == 2 and graph.launches.names() == ["add_kernel", "add_kernel"]
    assert graph.launches[0].grid == (3, 1, 1) and graph.launches[0].block == (16, 1, 1)
    assert np.all(x.copy_to_host() == 1.0), "capture ran a kernel"
    graph.replay()
    assert np.all(x.copy_to_host() == 4.0)
    graph.replay(cuda.stream())
    cuda.synchronize()
    assert np.all(x.copy_to_host() == 7.0)
    assert "2 kernels" in repr(graph)


def test_replay_uses_the_values_baked_in_at_capture():
    x = ones()
    values = [1.0]
    graph = graphs.capture(adds, x, values)
    values[0] = 100.0                       # the host-side list changes; the graph does not
    graph.replay()
    assert np.all(x.copy_to_host() == 2.0)


@pytest.mark.parametrize("name", ["device_array", "device_array_like", "to_device"])
def test_allocation_breaks_capture(name):
    x = ones()
    arguments = {"device_array": (4,), "device_array_like": (x,), "to_device": (np.ones(4),)}

    def allocating(x, stream=0):
        getattr(cuda, name)(*arguments[name])
        adds(x, [1.0], stream=stream)

    with pytest.raises(graphs.CaptureError, match=f"cuda.{name}.*allocation"):
        graphs.capture(allocating, x)


def test_host_array_argument_breaks_capture():
    host = np.ones(10, dtype=np.float32)
    with pytest.raises(graphs.CaptureError, match="argument 0 is a NumPy host array"):
        graphs.capture(adds, host, [1.0])
    assert np.all(host == 1.0)


@pytest.mark.parametrize("how", ["synchronize", "copy_to_host"])
def test_synchronization_breaks_capture(how):
    def waiting(x, stream=0):
        adds(x, [1.0], stream=stream)
        cuda.synchronize() if how == "synchronize" else x.copy_to_host()

    with pytest.raises(graphs.CaptureError, match="synchronization cannot be captured"):
        graphs.capture(waiting, ones())


def test_launch_on_another_stream_breaks_capture():
    with pytest.raises(graphs.CaptureError, match="another stream"):
        graphs.capture(lambda x, stream: adds(x, [1.0]), ones())


def test_debug_kernel_breaks_capture():
    def debug_launch(x, stream=0):
        add_kernel_debug[2, 32, stream](x, 1.0)

    with pytest.raises(graphs.CaptureError, match="debug=True"):
        graphs.capture(debug_launch, ones())


def test_capture_of_nothing_and_nested_capture_are_errors():
    with pytest.raises(graphs.CaptureError, match="launched no kernel"):
        graphs.capture(lambda x, stream: None, ones())
    x = ones()
    with pytest.raises(graphs.CaptureError, match="inside another capture"):
        graphs.capture(lambda x, stream: graphs.capture(adds, x, [1.0]), x)


def test_a_failed_capture_puts_everything_back():
    before = (cuda.device_array, cuda.to_device, cuda.synchronize, launch_entry_points())
    with pytest.raises(graphs.CaptureError):
        graphs.capture(lambda x, stream: cuda.device_array(3), ones())
    assert (cuda.device_array, cuda.to_device, cuda.synchronize, launch_entry_points()) == before
    x = ones()
    add_kernel[2, 32](x, 1.0)               # eager launches run again
    assert np.all(x.copy_to_host() == 2.0)
    graphs.capture(adds, x, [1.0]).replay()  # and so does the next capture
    assert np.all(x.copy_to_host() == 3.0)


def test_record_launches_sees_captured_launches_in_both_modes_and_replays_in_the_simulator():
    x = ones()
    with record_launches() as outer:
        graph = graphs.capture(adds, x, [1.0, 1.0])
    with record_launches() as replayed:
        graph.replay()
    assert outer.names() == ["add_kernel"] * 2         # capture sees the launches it records
    if device.is_simulator():                           # the simulator replays launch by launch
        assert replayed.names() == ["add_kernel"] * 2
    else:                                               # a GPU replay is one graph launch
        assert replayed.names() == []
    assert np.all(x.copy_to_host() == 3.0)


def test_a_timeline_inside_a_recorder_inside_a_capture_sees_every_captured_launch():
    x = ones()
    inside = {}

    def recorded_pipeline(x, stream):
        with record_launches() as launches, Timeline() as tl:
            adds(x, [1.0, 2.0], stream=stream)
        inside.update(launches=launches, timeline=tl)

    with record_launches() as outer:
        graph = graphs.capture(recorded_pipeline, x)
    assert outer.names() == inside["launches"].names() == graph.launches.names() == ["add_kernel"] * 2
    assert [op.label for op in inside["timeline"].trace.kernels()] == ["add_kernel"] * 2
    assert "inside a graph capture" in inside["timeline"].report()   # captured work is not timed
    assert np.all(x.copy_to_host() == 1.0), "capture ran a kernel"
    graph.replay()
    assert np.all(x.copy_to_host() == 4.0)
    assert launch_entry_points() == ORIGINAL_ENTRY_POINTS    # every hook came off again


def test_graph_cache_builds_each_key_once():
    built = []
    cache = graphs.GraphCache(lambda key: built.append(key) or f"graph {key}")
    assert [cache[k] for k in (3, 5, 3, 3, 5)] == ["graph 3", "graph 5", "graph 3", "graph 3", "graph 5"]
    assert built == [3, 5] and cache.builds == 2 and len(cache) == 2
    assert 3 in cache and 4 not in cache and cache.keys() == [3, 5]


def test_gpu_timing_helpers_say_no_timing_in_the_simulator():
    if not device.is_simulator():
        pytest.skip("on a GPU they measure")
    with pytest.raises(timing.NoTiming):
        timing.time_gpu(lambda: None)
