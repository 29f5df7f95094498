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

A handler that only needs to act before and after the call (a Timeline's: note the op, record an
event on each side) can be a `Bracket(before, after)` instead: while it is the only subscription
for a launch or a device array's copy, the call runs in the hook's own frame with no function
made to proceed with (on a GPU, no launch object either); that is the recorder's per-op path, and its
cost is what `kernellab bench 07` reports. A launch's and a copy's `before` get the op described,
not the call's arguments (see Bracket).

Subscribers nest: each hooked call passes through every open subscription, the first opened
outermost, and then runs (or, during a graph capture, is captured: `replace_launch`). A call
made while a subscription is already handling one on the same thread (numba-cuda's own copies
inside a launch, a timeline's own event records) passes that subscription by. Each entry point
is wrapped only while a subscription wants it and is restored, the original object itself, when
the last one closes: code outside every `with` block pays nothing.
"""

from __future__ import annotations

import contextlib
import functools
import operator
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

# The device array's two copy methods, `(self, ary, stream=0)`, and what `ary` defaults to (_REQUIRED:
# nothing, copy_to_device needs it). Their hooks take the same arguments by name rather than as
# *args and **kwargs: packing and unpacking those took ~0.3 of the ~0.7 us a trace-only copy added
# on this project's 2-core machine, where it runs on every copy a pipeline's recorder watches.
_REQUIRED = object()
_COPY_METHODS = {"copy_to_device": _REQUIRED, "copy_to_host": None}


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

    def recorded(self) -> tuple:
        """(name, stream, (grid, block), captured): what a Timeline notes, in one call."""
        return self.name, self.stream, (self.grid, self.block), self.captured


class _DispatchedLaunch(tuple):
    """A GPU launch as numba-cuda's dispatcher hands it over, (dispatcher, args, launch
    configuration, captured), read as a KernelLaunch is: each field is worked out when it is read.
    It is made on every hooked launch that goes through an around handler (record_launches, or
    several subscriptions at once; a sole Bracket gets no launch object), and building every field
    up front cost ~0.4 us per launch on this project's 2-core machine."""

    __slots__ = ()
    kernel = property(operator.itemgetter(0))
    args = property(operator.itemgetter(1))
    captured = property(operator.itemgetter(3))

    @property
    def name(self) -> str:
        return self[0].py_func.__name__

    @property
    def grid(self) -> tuple[int, int, int]:
        return self[2].griddim        # numba-cuda's configure() made it a 3-tuple

    @property
    def block(self) -> tuple[int, int, int]:
        return self[2].blockdim

    @property
    def stream(self):
        return self[2].stream

    @property
    def shared(self) -> int:
        return int(self[2].sharedmem or 0)

    @property
    def debug(self) -> bool:
        return bool(self[0].targetoptions.get("debug"))

    def recorded(self) -> tuple:
        """(name, stream, (grid, block), captured), as KernelLaunch.recorded: one call per launch."""
        dispatcher, _, config, captured = self
        return dispatcher.py_func.__name__, config.stream, (config.griddim, config.blockdim), captured


_new_launch = tuple.__new__   # no class-level __new__ in Python: the tuple's own


class Bracket(NamedTuple):
    """A handler in two halves: `before(*the call's arguments)` returns a token, and `after(token)`
    runs once the call has returned (not if it raised; `after` may be None). A launch's `before`
    gets what `KernelLaunch.recorded` gives: (name, stream, (grid, block), captured); a device
    array's copy's gets what `described_copy` gives: (kind, bytes, stream). Neither half may call a
    hooked operation (see `_hooked_copy`)."""

    before: Callable
    after: Callable | None = None


def described_copy(operation: str, array, ary, stream) -> tuple:
    """A device array's copy (`operation`: "copy_to_device" or "copy_to_host", with the method's
    arguments) as a copy's Bracket gets it: (kind, its bytes as the array gives them, the stream it
    runs on): "h2d", or "d2d" from another device array, or "d2h"; a copy given no stream runs on the
    array's. (`_hooked_copy` works the same out in its own frame.)"""
    stream = stream or getattr(array, "stream", 0)
    if operation == "copy_to_host":
        return "d2h", getattr(array, "nbytes", 0), stream
    return "d2d" if hasattr(ary, "copy_to_host") else "h2d", getattr(ary, "nbytes", 0), stream


def _around_of(operation: str, bracket: Bracket) -> Callable:
    """The bracket as an around handler, for a call that passes through several subscriptions."""
    before, after = bracket

    def around(proceed, *args, **kwargs):
        if operation == LAUNCH:
            token = before(*args[0].recorded())
        elif operation in _COPY_METHODS:       # (array, ary, stream), as _hooked_copy passes them
            token = before(*described_copy(operation, *args))
        else:
            token = before(*args, **kwargs)
        result = proceed()
        if after is not None:
            after(token)
        return result
    return around


class _BusyFlag(threading.local):
    """Per thread, whether a subscription is handling a call. False until it first is, from the
    class: a thread-local attribute never set is a miss on every read (an AttributeError made and
    caught inside getattr), which a copy's hook, reading the flag without setting it, would pay."""

    busy = False


class _Subscription:
    """One `subscribe` block: its handlers, and whether it is handling a call on this thread (a
    call made meanwhile, by its handler or by numba-cuda underneath, passes it by)."""

    def __init__(self, handlers: dict[str, Callable | Bracket], replace_launch: Callable | None):
        self.brackets = {op: h for op, h in handlers.items() if isinstance(h, Bracket)}
        self.arounds = {op: _around_of(op, h) if isinstance(h, Bracket) else h for op, h in handlers.items()}
        self.replace_launch = replace_launch
        self._local = _BusyFlag()

    def run(self, handler: Callable, proceed: Callable, *args, **kwargs):
        """handler(proceed, *args, **kwargs) with this subscription busy; `proceed()` alone if it
        already is. A flag, not a context manager: this runs on every hooked call, and what it
        costs is part of what a Timeline adds to each launch (`kernellab bench 07`)."""
        local = self._local
        if local.busy:
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
# For a launch or a copy, a list of one item that its hook holds: (its busy flag, before, after, or
# `_no_after` where the Bracket has none) while exactly one subscription handles it, with a Bracket
# (and, for launches, none replaces them), and the call then runs in the hook's frame; else None. (A
# hook reads its own list's item: no dict to look in per call. Other operations have no such short
# way: their hooks always go through the subscriptions.)
_sole_brackets: dict[str, list] = {operation: [None] for operation in (LAUNCH, *_COPY_METHODS)}


def _index_subscriptions():
    global _replacing
    _chains.clear()
    _replacing = next((s for s in _subscriptions if s.replace_launch is not None), None)
    for operation in (LAUNCH, *OPERATIONS):
        chain = tuple(s for s in _subscriptions if operation in s.arounds)
        if chain:
            _chains[operation] = chain
        if operation in _sole_brackets:
            sole = (chain[0].brackets.get(operation) if len(chain) == 1 and (operation in _COPY_METHODS or
                                                                              not _replacing) else None)
            _sole_brackets[operation][0] = (chain[0]._local, sole.before, sole.after or _no_after) if sole else None


def _no_after(token) -> None:
    """A sole Bracket's `after` where it has none: the hooks call it rather than ask, a line less per call."""


def _through(operation: str, run: Callable, *args, **kwargs):
    """Pass a call through every open subscription that handles `operation`, then `run` it. (No
    closure in here: a function that defines one builds its cells on every call, even on the path
    that does not use it.)"""
    chain = _chains.get(operation, ())
    if len(chain) != 1:
        return _through_chain(chain, 0, operation, run, args, kwargs)
    subscription = chain[0]      # one timeline or recorder open: _Subscription.run, in this frame
    local = subscription._local
    if local.busy:
        return run()
    local.busy = True
    try:
        return subscription.arounds[operation](run, *args, **kwargs)
    finally:
        local.busy = False


def _through_chain(chain: tuple, i: int, operation: str, run: Callable, args: tuple, kwargs: dict):
    if i == len(chain):
        return run()
    subscription = chain[i]
    return subscription.run(subscription.arounds[operation],
                            lambda: _through_chain(chain, i + 1, operation, run, args, kwargs), *args, **kwargs)


def launches_replaced() -> bool:
    """True while a subscription (a graph capture) takes over running kernel launches."""
    return _replacing is not None


def _launch(launch: KernelLaunch, run: Callable):
    if _replacing is None:
        return _through(LAUNCH, run, launch)
    return _through(LAUNCH, _capturing(_replacing, launch, run), launch)


def _capturing(replacing: _Subscription, launch: KernelLaunch, run: Callable) -> Callable:
    """The launch handed to the subscription that captures it (its own launches, made while it
    is busy, run as they are)."""
    def capture():
        return replacing.run(lambda proceed, kernel: replacing.replace_launch(kernel, proceed), run, launch)
    return capture


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
    original, sole_bracket = CUDADispatcher.call, _sole_brackets[LAUNCH]

    def dispatch(dispatcher, args, config):
        sole = sole_bracket[0]
        if sole is None:
            launch = _new_launch(_DispatchedLaunch, (dispatcher, args, config, _replacing is not None))
            return _launch(launch, functools.partial(original, dispatcher, args, config))
        # the sole Bracket, in this frame (a call of its own cost ~0.1 us per launch here): `original`
        # between before(*KernelLaunch.recorded()) and after, with the subscription busy
        local, before, after = sole
        if local.busy:
            return original(dispatcher, args, config)
        local.busy = True
        try:
            token = before(dispatcher.py_func.__name__, config.stream, (config.griddim, config.blockdim), False)
            result = original(dispatcher, args, config)
            after(token)
            return result
        finally:
            local.busy = False

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
    if operation in _COPY_METHODS:
        setattr(owner, name, _hooked_copy(operation, original, _COPY_METHODS[operation]))
        return lambda: setattr(owner, name, original)

    def hooked(*args, **kwargs):   # no short way (an allocation, an event, a synchronization)
        return _through(operation, functools.partial(original, *args, **kwargs), *args, **kwargs)

    setattr(owner, name, hooked)
    return lambda: setattr(owner, name, original)


def _hooked_copy(operation: str, original: Callable, ary_default) -> Callable:
    """`hooked` of `_install` for a copy method, with the method's own arguments. A call the method
    does not take goes to numba-cuda unwatched, for its own error. With a sole Bracket the copy
    only reads the subscription's busy flag (a copy inside a launch passes it by) and does not set
    it: numba-cuda's copy methods call the driver (or, in the simulator, NumPy), nothing hooked,
    and a Bracket's halves call nothing hooked either (the Timeline records its events through the
    driver). With that and the flag's class default (`_BusyFlag`), a copy through a do-nothing
    Bracket added +0.25-0.34 us here in the simulator, from +0.41-0.57 before. The copy is
    described for the Bracket (`described_copy`) here too, not in a function of its own: on the
    H200's host each Python call on this path cost ~0.3 us or more."""
    to_host, sole_bracket = operation == "copy_to_host", _sole_brackets[operation]

    def hooked(self, ary=ary_default, stream=0, *more, **named):
        if ary is _REQUIRED or more or named:        # numba-cuda's own call, or its own error
            if ary is _REQUIRED:
                return original(self, stream=stream, **named)
            return original(self, ary, stream, *more, **named)
        sole = sole_bracket[0]
        if sole is None:
            return _through(operation, functools.partial(original, self, ary, stream), self, ary, stream)
        local, before, after = sole          # the sole Bracket, in this frame (as in dispatch)
        if local.busy:
            return original(self, ary, stream)
        if to_host:                          # described_copy, in this frame
            token = before("d2h", getattr(self, "nbytes", 0), stream or getattr(self, "stream", 0))
        else:
            token = before("d2d" if hasattr(ary, "copy_to_host") else "h2d", getattr(ary, "nbytes", 0),
                           stream or getattr(self, "stream", 0))
        result = original(self, ary, stream)
        after(token)
        return result
    return hooked


@contextlib.contextmanager
def subscribe(replace_launch: Callable | None = None, **arounds: Callable):
    """Hand the calls named in `arounds` (LAUNCH or a key of OPERATIONS) to
    `around(proceed, *the call's arguments)` while the block runs; `proceed()` goes on with the
    call and returns its result. A launch's handler gets `(proceed, launch)`, a KernelLaunch. A
    handler may instead be a Bracket (before and after the call; the recorder's kind).

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
