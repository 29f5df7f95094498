"""Where kernellab wraps numba-cuda's calls to watch them: kernel launches, copies, events,
synchronization. (The one other patch, `simulated_api`, adds to the simulator the calls it lacks,
once and for good; it watches nothing.)

numba-cuda has no public hook for these (its `pre_launch_callbacks` live on one launch
configuration and must not touch CUDA), so kernellab wraps numba-cuda's private entry points:
`FakeCUDAKernel.__getitem__`/`__call__` in the simulator, `CUDADispatcher.call` on a GPU, and a
few API functions and methods. The launch recorder (`launches`), the stream timeline
(`timeline`) and graph capture (`graphs`) subscribe here:

    def around_launch(proceed, launch):          # launch: a KernelLaunch
        print("launching", launch.name)
        return proceed()                         # the inner subscribers, then the launch itself

    with hooks.subscribe(launch=around_launch, synchronize=lambda proceed: proceed()):
        ...

Subscribers nest: each hooked call passes through every open subscription, the first opened
outermost, and then runs (or, during a graph capture, is captured: `replace_launch`). A call
made while a subscription is already handling one on the same thread (numba-cuda's own copies
inside a launch, a timeline's own event records) passes that subscription by. Each entry point
is wrapped only while a subscription wants it and is restored, the original object itself, when
the last one closes: code outside every `with` block pays nothing.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, NamedTuple

from kernellab.gpu import device

LAUNCH = "launch"
# Operation -> (where it lives in the simulator, where on a GPU): "module:attribute", or
# "module:Class.method". Each wrapped function keeps the original's arguments.
OPERATIONS = {
    "to_device": ("numba.cuda:to_device",) * 2,
    "device_array": ("numba.cuda:device_array",) * 2,
    "device_array_like": ("numba.cuda:device_array_like",) * 2,
    "pinned_array": ("numba.cuda:pinned_array",) * 2,
    "pinned_array_like": ("numba.cuda:pinned_array_like",) * 2,
    "synchronize": ("numba.cuda:synchronize",) * 2,
    "copy_to_device": ("numba.cuda.simulator.cudadrv.devicearray:FakeCUDAArray.copy_to_device",
                       "numba.cuda.cudadrv.devicearray:DeviceNDArrayBase.copy_to_device"),
    "copy_to_host": ("numba.cuda.simulator.cudadrv.devicearray:FakeCUDAArray.copy_to_host",
                     "numba.cuda.cudadrv.devicearray:DeviceNDArrayBase.copy_to_host"),
    "event_record": ("numba.cuda.simulator.api:Event.record", "numba.cuda.cudadrv.driver:Event.record"),
    "event_wait": ("numba.cuda.simulator.api:Event.wait", "numba.cuda.cudadrv.driver:Event.wait"),
    "event_synchronize": ("numba.cuda.simulator.api:Event.synchronize",
                          "numba.cuda.cudadrv.driver:Event.synchronize"),
    "stream_synchronize": ("numba.cuda.simulator.api:stream.synchronize",
                           "numba.cuda.cudadrv.driver:Stream.synchronize"),
}


def dim3(dims) -> tuple[int, int, int]:
    if type(dims) is tuple and len(dims) == 3:   # what numba-cuda's launch configuration holds
        return dims
    dims = tuple(int(d) for d in (dims if isinstance(dims, tuple) else tuple(dims)))
    return (dims + (1, 1, 1))[:3]


class KernelLaunch(NamedTuple):
    """One kernel launch as both modes describe it (a tuple: it is made on every hooked launch)."""

    kernel: Any                  # the dispatcher (GPU) or FakeCUDAKernel (simulator)
    name: str
    args: tuple
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    stream: Any                  # what the launch was given: 0, a Numba stream, a capture's stream
    shared: int                  # dynamic shared memory, bytes
    debug: bool
    captured: bool               # a graph capture records it instead of running it now


_new_launch = tuple.__new__   # KernelLaunch(...) through the named tuple's own __new__ costs ~4x more


class _Subscription:
    """One `subscribe` block: its handlers, and whether it is handling a call on this thread (a
    call made meanwhile, by its handler or by numba-cuda underneath, passes it by)."""

    def __init__(self, arounds: dict[str, Callable], replace_launch: Callable | None):
        self.arounds = arounds
        self.replace_launch = replace_launch
        self._local = threading.local()

    def run(self, handler: Callable, proceed: Callable, *args, **kwargs):
        """handler(proceed, *args, **kwargs) with this subscription busy; `proceed()` alone if it
        already is. A flag, not a context manager: this runs on every hooked call, and what it
        costs is part of what a Timeline adds to each launch (`kernellab bench 07`)."""
        local = self._local
        if getattr(local, "busy", False):
            return proceed()
        local.busy = True
        try:
            return handler(proceed, *args, **kwargs)
        finally:
            local.busy = False

    def wants(self, operation: str) -> bool:
        return operation in self.arounds or (operation == LAUNCH and self.replace_launch is not None)


_lock = threading.Lock()
_subscriptions: list[_Subscription] = []
_undo: dict[str, Callable[[], None]] = {}    # operation -> puts numba-cuda's original back
# Kept by subscribe and its close, read on every hooked call: per operation, the open subscriptions
# that handle it (the first opened outermost), and the one that replaces launches (a capture).
_chains: dict[str, tuple[_Subscription, ...]] = {}
_replacing: _Subscription | None = None


def _index_subscriptions():
    global _replacing
    _chains.clear()
    for operation in (LAUNCH, *OPERATIONS):
        chain = tuple(s for s in _subscriptions if operation in s.arounds)
        if chain:
            _chains[operation] = chain
    _replacing = next((s for s in _subscriptions if s.replace_launch is not None), None)


def _through(operation: str, run: Callable, *args, **kwargs):
    """Pass a call through every open subscription that handles `operation`, then `run` it."""
    chain = _chains.get(operation, ())
    if len(chain) == 1:          # one timeline or recorder open: no chain of closures to build
        return chain[0].run(chain[0].arounds[operation], run, *args, **kwargs)

    def step(i: int):
        if i == len(chain):
            return run()
        subscription = chain[i]
        return subscription.run(subscription.arounds[operation], lambda: step(i + 1), *args, **kwargs)
    return step(0)


def launches_replaced() -> bool:
    """True while a subscription (a graph capture) takes over running kernel launches."""
    return _replacing is not None


def _launch(launch: KernelLaunch, run: Callable):
    replacing = _replacing
    if replacing is None:
        return _through(LAUNCH, run, launch)

    def capture():               # the capture's own launches (busy) run as they are
        return replacing.run(lambda proceed, kernel: replacing.replace_launch(kernel, proceed), run, launch)
    return _through(LAUNCH, capture, launch)


def _install_launch() -> Callable[[], None]:
    if device.is_simulator():
        from numba.cuda.simulator import kernel as simulator
        kernel_class = simulator.FakeCUDAKernel
        original_call, original_getitem = kernel_class.__call__, kernel_class.__getitem__

        def getitem(kernel, configuration):
            kernel._kernellab_stream = configuration[2] if len(configuration) > 2 else 0
            return original_getitem(kernel, configuration)

        def call(kernel, *args):
            if kernel._device or simulator._kernel_context or kernel.grid_dim is None:
                return original_call(kernel, *args)   # a device function, or numba's own error
            launch = KernelLaunch(kernel, kernel.fn.__name__, args, dim3(kernel.grid_dim),
                                  dim3(kernel.block_dim), getattr(kernel, "_kernellab_stream", 0),
                                  int(kernel.dynshared_size or 0), bool(kernel._debug),
                                  launches_replaced())
            return _launch(launch, lambda: original_call(kernel, *args))

        kernel_class.__call__, kernel_class.__getitem__ = call, getitem

        def undo():
            kernel_class.__call__, kernel_class.__getitem__ = original_call, original_getitem
        return undo

    from numba.cuda.dispatcher import CUDADispatcher
    original = CUDADispatcher.call

    def dispatch(dispatcher, args, config):
        launch = _new_launch(KernelLaunch, (dispatcher, dispatcher.py_func.__name__, args,
                                            dim3(config.griddim), dim3(config.blockdim), config.stream,
                                            int(config.sharedmem or 0),
                                            bool(dispatcher.targetoptions.get("debug")),
                                            _replacing is not None))
        return _launch(launch, lambda: original(dispatcher, args, config))

    CUDADispatcher.call = dispatch

    def undo():
        CUDADispatcher.call = original
    return undo


def _install(operation: str) -> Callable[[], None]:
    if operation == LAUNCH:
        return _install_launch()
    import importlib
    device.setup()
    module_name, _, path = OPERATIONS[operation][0 if device.is_simulator() else 1].partition(":")
    owner = importlib.import_module(module_name)
    *classes, name = path.split(".")
    for class_name in classes:
        owner = getattr(owner, class_name)
    original = getattr(owner, name)

    def hooked(*args, **kwargs):
        return _through(operation, lambda: original(*args, **kwargs), *args, **kwargs)

    setattr(owner, name, hooked)
    return lambda: setattr(owner, name, original)


@contextlib.contextmanager
def subscribe(replace_launch: Callable | None = None, **arounds: Callable):
    """Hand the calls named in `arounds` (LAUNCH or a key of OPERATIONS) to
    `around(proceed, *the call's arguments)` while the block runs; `proceed()` goes on with the
    call and returns its result. A launch's handler gets `(proceed, launch)`, a KernelLaunch.

    `replace_launch(launch, run)` takes over running each kernel (graph capture: record instead
    of running, or run on the capture stream); one subscription at a time may hold it.
    """
    unknown = set(arounds) - {LAUNCH, *OPERATIONS}
    if unknown:
        raise ValueError(f"no numba-cuda operation named {', '.join(sorted(unknown))}")
    subscription = _Subscription(arounds, replace_launch)
    with _lock:
        if replace_launch is not None and _replacing is not None:
            raise RuntimeError("another subscription already replaces kernel launches")
        _subscriptions.append(subscription)
        _index_subscriptions()
        try:
            for operation in (LAUNCH, *OPERATIONS):
                if subscription.wants(operation) and operation not in _undo:
                    _undo[operation] = _install(operation)
        except BaseException:
            _unsubscribe(subscription)
            raise
    try:
        yield
    finally:
        with _lock:
            _unsubscribe(subscription)


def _unsubscribe(subscription: _Subscription):
    """Close a subscription (by identity) and restore what no open one still wants."""
    _subscriptions[:] = [s for s in _subscriptions if s is not subscription]
    _index_subscriptions()
    for operation in list(_undo):
        if not any(s.wants(operation) for s in _subscriptions):
            _undo.pop(operation)()
