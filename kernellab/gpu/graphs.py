"""CUDA Graphs for Numba kernels: capture the launches a function makes, then replay them as one.

    graph = graphs.capture(lab.pipeline, x, coeffs)   # calls pipeline(x, coeffs, stream=<capture>)
    graph.replay()                                    # every captured kernel, one submission
    graph.launches.names()                            # what was captured, in order

The rules are those of CUDA stream capture, checked here in both modes:
- `fn` takes a `stream` keyword and launches every kernel on it (`kernel[grid, block, stream]`).
- Capture records launches; it does not run them. Results appear after `replay()`.
- Arguments are baked in: every replay uses the device arrays (their addresses) and the scalar
  values seen at capture. The graph keeps the arguments given to `capture` alive; arrays reached
  any other way must outlive the graph too.
- What cannot be captured raises `CaptureError`, naming the cause: allocating device memory, a
  NumPy host array as a kernel argument (an implicit copy each way), synchronizing or copying to
  the host, a launch on another stream, a kernel compiled with debug=True.

On a GPU, capture gives numba-cuda a cuda.core GraphBuilder as the launch stream (numba-cuda
0.30 accepts one) and replay launches the instantiated graph: one driver call for all kernels.
In the simulator, capture records each launch (kernel, grid, block, arguments) and replay
re-launches them in order: the same results and the same errors, none of the speed.

`GraphCache` keeps one graph per shape (the seed article: one graph per batch size).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from typing import Any, Callable

import numpy as np

from kernellab.gpu import device, hooks, launches

cuda = device.cuda()

ALLOCATION = ("Numba's allocation cannot be captured: it calls cuMemAlloc, which runs at once "
              "instead of being recorded, so the graph would bake in an address it never allocates "
              "again. Stream-ordered allocation (cuMemAllocAsync) can be captured as a memory "
              "node, but numba-cuda does not allocate that way. Allocate every buffer before "
              "capture() and pass it to the captured function.")
SYNCHRONIZATION = ("synchronization cannot be captured: capture records kernels without running "
                   "them, so there is nothing to wait for or to read back yet. Synchronize or "
                   "copy results to the host after replay().")


class CaptureError(RuntimeError):
    """Something done inside a graph capture cannot be captured; the message says what and why."""


class CapturedGraph:
    """The kernels one call of a function launched, replayable as a unit."""

    def __init__(self, log: launches.LaunchLog, keep_alive: tuple, executable=None,
                 builder=None, recorded: tuple = ()):
        self.launches = log                 # what was captured, as record_launches would list it
        self._keep_alive = keep_alive       # the arrays the baked addresses point into
        self.executable = executable        # the cuda.core Graph (GPU); None in the simulator
        self._builder = builder             # owns the captured graph definition (GPU)
        self._recorded = recorded           # the hooks.KernelLaunch captured (simulator)
        self._default_stream = _core_stream(0) if executable is not None else None

    def __len__(self) -> int:
        return len(self.launches)

    def __repr__(self) -> str:
        names = self.launches.names()
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        return f"<CapturedGraph of {len(self)} kernels: {shown}>"

    def replay(self, stream=0):
        """Run every captured kernel in capture order on `stream` (0 or a Numba stream)."""
        if self.executable is None:
            for launch in self._recorded:
                launch.kernel[launch.grid, launch.block, stream, launch.shared](*launch.args)
        elif isinstance(stream, int) and stream == 0:
            self.executable.launch(self._default_stream)  # made once: replay stays cheap
        else:
            self.executable.launch(_core_stream(stream))


class GraphCache:
    """One graph per key (a batch size, a shape), built by `build(key)` on first use, then reused.

    A graph bakes in its shapes and addresses, so a dispatcher keeps one per shape it serves;
    `builds` counts how often that cost was paid.
    """

    def __init__(self, build: Callable[[Any], Any]):
        self._build = build
        self._entries: dict = {}
        self.builds = 0

    def __getitem__(self, key):
        if key not in self._entries:
            self._entries[key] = self._build(key)
            self.builds += 1
        return self._entries[key]

    def __contains__(self, key) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def keys(self) -> list:
        return list(self._entries)


# --- capture -------------------------------------------------------------------------------------

_lock = threading.Lock()
_capturing = False


def capture(fn: Callable, *args, **kwargs) -> CapturedGraph:
    """Capture the kernels `fn(*args, stream=s, **kwargs)` launches on `s` as a replayable graph."""
    global _capturing
    with _lock:
        if _capturing:
            raise CaptureError("capture() inside another capture: capture the outer function "
                               "only, or capture the inner one first and replay it afterwards")
        _capturing = True
    try:
        if device.is_simulator():
            return _capture_simulated(fn, args, kwargs)
        return _capture_gpu(fn, args, kwargs)
    finally:
        _capturing = False


class _Capture:
    """What one capture saw, and the checks each launch must pass."""

    def __init__(self, stream, stream_handle: int = 0):
        self.stream = stream                 # what fn receives as `stream`
        self.stream_handle = stream_handle   # its driver handle (GPU)
        self.log = launches.LaunchLog()
        self.recorded: list[hooks.KernelLaunch] = []

    def on_capture_stream(self, stream) -> bool:
        if device.is_simulator():
            return stream is self.stream
        return int(stream.handle) == self.stream_handle   # a cuda.core Stream: the builder's

    def admit(self, launch: hooks.KernelLaunch):
        """Refuse a launch that cannot be captured; otherwise log it."""
        name = launch.name
        if launch.debug:
            raise CaptureError(f"kernel {name} was compiled with debug=True, which copies an error "
                               "flag to the host after every launch; that copy cannot be captured. "
                               "Capture a kernel compiled without debug.")
        for position, arg in enumerate(launch.args):
            if isinstance(arg, np.ndarray) and not hasattr(arg, "__cuda_array_interface__"):
                raise CaptureError(
                    f"kernel {name}: argument {position} is a NumPy host array "
                    f"(shape {arg.shape}, {arg.dtype}). A host array means an implicit copy to the "
                    "device before the launch and back after it, which cannot be captured. Copy "
                    "it once with cuda.to_device() before capture() and pass the device array.")
        if not self.on_capture_stream(launch.stream):
            raise CaptureError(f"kernel {name} was launched on another stream during capture, so "
                               "it would run now and be missing from the graph. Launch every "
                               "kernel on the `stream` argument capture() passes: "
                               "kernel[grid, block, stream](...).")
        self.log.append(launches.Launch(name, launch.grid, launch.block,
                                        launches.stream_handle(launch.stream), launch.shared,
                                        launch.kernel))

    def capture(self, launch: hooks.KernelLaunch, run):
        """Each launch during capture: checked, then recorded (simulator) or run on the capture
        stream, which records it into the graph (GPU)."""
        self.admit(launch)
        if device.is_simulator():
            self.recorded.append(launch)
            return None
        return run()


def _run_captured(fn, args, kwargs, capturing):
    with _guards(capturing):
        fn(*args, stream=capturing.stream, **kwargs)
    if not capturing.log:
        raise CaptureError(f"{getattr(fn, '__name__', fn)} launched no kernel on the capture "
                           "stream; there is nothing to replay")


def _capture_simulated(fn, args, kwargs) -> CapturedGraph:
    capturing = _Capture(cuda.stream())
    _run_captured(fn, args, kwargs, capturing)
    return CapturedGraph(capturing.log, (args, kwargs), recorded=tuple(capturing.recorded))


def _capture_gpu(fn, args, kwargs) -> CapturedGraph:
    from cuda.core import Device
    gpu = Device(cuda.get_current_device().id)
    gpu.set_current()                      # the primary context, the one Numba uses
    builder = gpu.create_graph_builder()
    capturing = _Capture(builder, int(builder.stream.handle))
    builder.begin_building()
    try:
        _run_captured(fn, args, kwargs, capturing)
    except BaseException:
        with contextlib.suppress(Exception):  # the capture may already be invalidated
            builder.end_building()
        builder.close()
        raise
    executable = builder.end_building().complete()
    graph = CapturedGraph(capturing.log, (args, kwargs), executable, builder)
    executable.upload(graph._default_stream)  # so the first replay does not pay for the upload
    return graph


def _core_stream(stream):
    from numba.cuda.cudadrv.driver import _to_core_stream  # what numba-cuda's own launch uses
    return _to_core_stream(stream)


def _refusing(what: str, why: str):
    def refuse(proceed, *args, **kwargs):
        raise CaptureError(f"{what} inside graph capture: {why}")
    return refuse


@contextlib.contextmanager
def _guards(capturing: _Capture):
    """Route launches through `capturing.capture`, and refuse allocation and synchronization."""
    refusals = {name: _refusing(f"cuda.{name}()", ALLOCATION)
                for name in ("device_array", "device_array_like", "to_device")}
    refusals["synchronize"] = _refusing("cuda.synchronize()", SYNCHRONIZATION)
    refusals["copy_to_host"] = _refusing("copy_to_host()", SYNCHRONIZATION)
    with hooks.subscribe(replace_launch=capturing.capture, **refusals), \
            cuda.defer_cleanup():          # no frees while the driver is capturing
        yield


@dataclasses.dataclass
class ReplayCount:
    count: int = 0


@contextlib.contextmanager
def replays_counted():
    """Count the CapturedGraph replays made inside the block (a graded test's view of how often a
    dispatcher replayed, without reaching into it)."""
    counted = ReplayCount()
    original = CapturedGraph.replay

    def replay(self, stream=0):
        counted.count += 1
        return original(self, stream)

    CapturedGraph.replay = replay
    try:
        yield counted
    finally:
        CapturedGraph.replay = original

