"""The numba-cuda 0.30 calls Numba's CUDA simulator lacks, supplied in the simulator with their real
meaning, so code written for a GPU runs (and scores) the same there.

What numba-cuda 0.30.4 has and its simulator did not (`numba/cuda/cudadrv/driver.py`, `api.py`):

- `cuda.event(timing=True)`, also positional (`cuda.event(False)`): the simulator's `Event()`
  took no argument;
- `event.query()`: whether the work before the event's last record has finished;
- `cuda.event_elapsed_time(start, end)` (and `start.elapsed_time(end)`, which calls it);
- `stream.add_callback(callback, arg=None)`: `callback(stream, status, arg)` once the work queued
  before it has finished; `stream.async_done()`: an asyncio future that resolves to the stream then;
- the device's attributes (`cuda.get_current_device().MULTIPROCESSOR_COUNT`, ...), which the
  simulator read from nowhere: here they are kernellab's reference device's
  (`kernellab.gpu.device.facts()`, the H200 unless `KERNELLAB_REFERENCE_DEVICE` says otherwise),
  and so is the compute capability the simulator's device and context report.

The simulator runs every kernel and copy to the end before the call returns, so all work before any
point has finished: a query answers True, and a callback runs at once, in the order added.

`install` patches the simulator's own classes in place (no subclass), so kernellab.gpu.hooks, which
wraps `Event.record` and the rest on those classes, sees the same objects. It is called by
`kernellab.gpu.device.cuda()` in simulator mode, and takes the facts as an argument so that this
module imports nothing of kernellab (kernellab.gpu.device imports it).
"""

from __future__ import annotations

import warnings

# The CUDA limits no reference device differs in (cc 7.0 and later): per-block register file,
# block and grid dimensions.
_COMMON_ATTRIBUTES = {
    "MAX_REGISTERS_PER_BLOCK": 65536,
    "MAX_BLOCK_DIM_X": 1024, "MAX_BLOCK_DIM_Y": 1024, "MAX_BLOCK_DIM_Z": 64,
    "MAX_GRID_DIM_X": 2**31 - 1, "MAX_GRID_DIM_Y": 65535, "MAX_GRID_DIM_Z": 65535,
}

CUDA_SUCCESS = 0   # the status a stream callback gets when the work before it succeeded


class EventError(RuntimeError):
    """What the driver's cuEventElapsedTime refuses, in the simulator: an event created with
    timing=False (CUDA_ERROR_INVALID_HANDLE)."""


def device_attributes(facts) -> dict[str, int]:
    """The driver's device attributes (`CU_DEVICE_ATTRIBUTE_<name>`) that kernellab's reference
    device `facts` (a kernellab.gpu.device.DeviceFacts) gives, by the names numba-cuda reads."""
    return {
        "MULTIPROCESSOR_COUNT": facts.sm_count,
        "MAX_THREADS_PER_BLOCK": facts.max_threads_per_block,
        "MAX_THREADS_PER_MULTIPROCESSOR": facts.max_threads_per_sm,
        "MAX_BLOCKS_PER_MULTIPROCESSOR": facts.max_blocks_per_sm,
        "WARP_SIZE": facts.warp_size,
        "MAX_REGISTERS_PER_MULTIPROCESSOR": facts.registers_per_sm,
        "MAX_SHARED_MEMORY_PER_BLOCK": facts.max_shared_per_block,
        "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN": facts.max_shared_per_block_optin,
        "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR": facts.max_shared_per_sm,
        "L2_CACHE_SIZE": facts.l2_bytes,
        "COMPUTE_CAPABILITY_MAJOR": facts.cc[0],
        "COMPUTE_CAPABILITY_MINOR": facts.cc[1],
        **_COMMON_ATTRIBUTES,
    }


def install(facts) -> None:
    """Give the simulator the calls above (once per process; later calls do nothing)."""
    from numba.cuda import simulator
    from numba.cuda.simulator import api
    from numba.cuda.simulator.cudadrv import devices
    if getattr(api.Event, "_kernellab_api", False):
        return
    _install_events(api)
    _install_streams(api.stream)
    _install_device(devices, facts)
    simulator.event_elapsed_time = api.event_elapsed_time = event_elapsed_time
    import numba.cuda
    numba.cuda.event_elapsed_time = event_elapsed_time


def event_elapsed_time(evtstart, evtend) -> float:
    """numba-cuda's `cuda.event_elapsed_time(evtstart, evtend)`, in the simulator.

    It refuses, as the driver does, an event created with timing=False, then returns -1.0, which is not a time: the simulator has no GPU clock. -1.0 is what the simulator's
    own `Event.elapsed_time` always returned (numba-cuda: "the output is meaningless"), and, as
    kernellab.gpu.timing says, no timing exists in simulator mode: kernellab's timing functions
    raise NoTiming there, and recorded GPU figures are in data/reference/.
    """
    for which, event in (("start", evtstart), ("end", evtend)):
        if not getattr(event, "timing", True):
            raise EventError(f"[CUDA_ERROR_INVALID_HANDLE] the {which} event was created with "
                             "timing=False: only events created with timing=True can be timed")
    return -1.0


def _install_events(api) -> None:
    event_class = api.Event   # its record, wait and synchronize stay (kernellab.gpu.hooks wraps them)

    def __init__(self, timing=True):
        """numba-cuda's `cuda.event(timing=True)`: timing data is recorded only with timing=True."""
        self.timing = bool(timing)

    def query(self):
        """True if all work before the most recent record has completed: always, in the
        simulator, which finishes each piece of work before the call that submitted it returns."""
        return True

    def elapsed_time(self, evtend):
        return event_elapsed_time(self, evtend)

    elapsed_time.__doc__ = event_elapsed_time.__doc__
    for name, value in (("__init__", __init__), ("query", query), ("elapsed_time", elapsed_time)):
        setattr(event_class, name, value)
    event_class._kernellab_api = True


def _install_streams(stream_class) -> None:
    def add_callback(self, callback, arg=None):
        """numba-cuda's `stream.add_callback(callback, arg=None)`: `callback(stream, status, arg)`
        once all work queued on the stream before it has completed. In the simulator that work has
        already completed, so the callback runs now, on this thread: callbacks run in the order they
        were added. As on a GPU, an exception in a callback becomes a warning."""
        try:
            callback(self, CUDA_SUCCESS, arg)
        except Exception as exc:
            warnings.warn(f"Exception in stream callback: {exc}")

    def async_done(self):
        """numba-cuda's `stream.async_done()`: an asyncio future of the running loop that resolves
        to this stream once the work queued before it has completed (here, on the loop's next
        turn). Outside a running loop it raises RuntimeError, as on a GPU."""
        import asyncio
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def resolve(stream, status, future):
            loop.call_soon(lambda: future.done() or future.set_result(stream))

        self.add_callback(resolve, future)
        return future

    stream_class.add_callback = add_callback
    stream_class.async_done = async_done


def _install_device(devices, facts) -> None:
    attributes = device_attributes(facts)

    def __getattr__(self, name):
        """A device attribute of kernellab's reference device (numba-cuda reads
        CU_DEVICE_ATTRIBUTE_<name> from the driver)."""
        try:
            return attributes[name]
        except KeyError:
            raise AttributeError(f"the simulated device has no attribute {name!r} (the simulator "
                                 f"models {', '.join(sorted(attributes))} from {facts.source})") \
                from None

    devices.FakeCUDADevice.__getattr__ = __getattr__
    devices.FakeCUDADevice.name = f"{facts.name} (simulated)"
    devices.FakeCUDADevice.compute_capability = property(lambda self: tuple(facts.cc))
    devices.FakeCUDAContext.compute_capability = property(lambda self: tuple(facts.cc))
