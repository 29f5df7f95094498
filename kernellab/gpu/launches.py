"""Launch recording: which kernels a piece of code launched (name, grid, block, stream, shared).

    with record_launches() as launches:
        lab.fused_chain(x, w, b, r)
    assert [l.name for l in launches] == ["fused_chain_kernel"]

Works on a GPU and in the simulator. The hook is installed only inside the `with` block, so
ordinary launches pay nothing for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

from kernellab.gpu import device


@dataclasses.dataclass(frozen=True)
class Launch:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    stream: int            # the stream handle; 0 is the default stream (always 0 in the simulator)
    shared: int            # dynamic shared memory, bytes
    kernel: object = dataclasses.field(default=None, compare=False, repr=False)
    argtypes: tuple = dataclasses.field(default=(), compare=False, repr=False)  # with_types=True

    @property
    def threads(self) -> int:
        g, b = self.grid, self.block
        return g[0] * g[1] * g[2] * b[0] * b[1] * b[2]


class LaunchLog(list):
    """The launches seen, in order, with a few views the tests use."""

    on_launch = None   # called with each Launch just before the kernel runs (the grader's watch)
    on_return = None   # simulator: called with each Launch once the kernel has finished

    def names(self) -> list[str]:
        return [launch.name for launch in self]

    def count(self, name: str | None = None) -> int:  # type: ignore[override]
        return len(self) if name is None else sum(launch.name == name for launch in self)


_lock = threading.Lock()
_active: list[LaunchLog] = []
_typed: list[LaunchLog] = []   # the logs that asked for argument types (the grader's compile check)


def dim3(dims) -> tuple[int, int, int]:
    dims = tuple(int(d) for d in (dims if isinstance(dims, tuple) else tuple(dims)))
    return (dims + (1, 1, 1))[:3]


def stream_handle(stream) -> int:
    if stream is None or stream == 0:
        return 0
    handle = getattr(stream, "handle", None)
    if handle is None:
        return 0
    value = getattr(handle, "value", handle)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return id(stream)


def _note(kernel, name, grid, block, stream, shared, args):
    argtypes = ()
    if _typed:
        from numba import typeof
        argtypes = tuple(typeof(arg) for arg in args)
    launch = Launch(name, dim3(grid), dim3(block), stream_handle(stream), int(shared or 0),
                    kernel, argtypes)
    for log in _active:
        log.append(launch)
    for log in list(_active):
        if log.on_launch is not None:
            log.on_launch(launch)
    return launch


def _returned(launch):
    for log in list(_active):
        if log.on_return is not None:
            log.on_return(launch)


def _install():
    """Wrap the one place each mode launches through; returns the undo."""
    cuda = device.cuda()
    if device.is_simulator():
        from numba.cuda.simulator.kernel import FakeCUDAKernel, _kernel_context
        original_call, original_getitem = FakeCUDAKernel.__call__, FakeCUDAKernel.__getitem__

        def getitem(self, configuration):
            self._kernellab_stream = configuration[2] if len(configuration) > 2 else 0
            return original_getitem(self, configuration)

        def call(self, *args):
            if self._device or _kernel_context:
                return original_call(self, *args)
            launch = _note(self, self.fn.__name__, self.grid_dim, self.block_dim,
                           getattr(self, "_kernellab_stream", 0), self.dynshared_size, args)
            try:
                return original_call(self, *args)
            finally:
                _returned(launch)

        FakeCUDAKernel.__call__, FakeCUDAKernel.__getitem__ = call, getitem

        def undo():
            FakeCUDAKernel.__call__, FakeCUDAKernel.__getitem__ = original_call, original_getitem
        return undo

    from numba.cuda.dispatcher import CUDADispatcher
    del cuda
    original = CUDADispatcher.call

    def call(self, args, launch_config):
        _note(self, self.py_func.__name__, launch_config.griddim, launch_config.blockdim,
              launch_config.stream, launch_config.sharedmem, args)
        return original(self, args, launch_config)

    CUDADispatcher.call = call

    def undo():
        CUDADispatcher.call = original
    return undo


_undo = None


@contextlib.contextmanager
def record_launches(with_types: bool = False, on_launch=None, on_return=None):
    """Collect every kernel launch made inside the block (nested blocks each see them all).

    `with_types=True` also keeps each launch's Numba argument types, so the kernel can be
    compiled for a real GPU afterwards. `on_launch(launch)` runs before each launch (an
    exception it raises stops the launch); `on_return(launch)`, in the simulator, after the
    kernel has finished (a GPU launch returns before its kernel ends).
    """
    global _undo
    log = LaunchLog()
    log.on_launch, log.on_return = on_launch, on_return
    with _lock:
        if not _active:
            _undo = _install()
        _active.append(log)
        if with_types:
            _typed.append(log)
    try:
        yield log
    finally:
        with _lock:  # by identity: two logs with equal contents are still different logs
            _active[:] = [other for other in _active if other is not log]
            _typed[:] = [other for other in _typed if other is not log]
            if not _active and _undo is not None:
                _undo()
                _undo = None
