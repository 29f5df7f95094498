"""Launch recording: which kernels a piece of code launched (name, grid, block, stream, shared).

    with record_launches() as launches:
        lab.fused_chain(x, w, b, r)
    assert [l.name for l in launches] == ["fused_chain_kernel"]

Works on a GPU and in the simulator. It subscribes to kernellab.gpu.hooks only inside the
`with` block, so ordinary launches pay nothing for it.

`replayable(call)` takes the launches a call makes without running them, and gives them back
as a function that makes the same launches again (the same kernels, configurations and argument
objects) without the call's own Python: what a benchmark times when its subject is the launches
alone, with the launcher's preparation outside the window.
"""

from __future__ import annotations

import contextlib
import dataclasses

from kernellab.gpu import device, hooks


@dataclasses.dataclass(frozen=True)
class Launch:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    stream: int            # the stream handle; 0 is the default stream (always 0 in the simulator)
    shared: int            # dynamic shared memory, bytes
    kernel: object = dataclasses.field(default=None, compare=False, repr=False)
    argtypes: tuple = dataclasses.field(default=(), compare=False, repr=False)  # with_types=True
    args: tuple = dataclasses.field(default=(), compare=False, repr=False)      # with_args=True

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


@dataclasses.dataclass(frozen=True)
class Replay:
    """The kernel launches one call made, to make again: each `kernel[grid, block, stream,
    shared](*args)` with the call's own kernel objects and arguments, through numba-cuda's whole
    launch path (argument typing and marshalling, the driver's launch) and nothing else."""

    launches: tuple[hooks.KernelLaunch, ...]

    def __call__(self) -> None:
        for launch in self.launches:
            launch.kernel[launch.grid, launch.block, launch.stream, launch.shared](*launch.args)

    def names(self) -> list[str]:
        return [launch.name for launch in self.launches]


def replayable(call) -> Replay:
    """The launches `call()` makes, taken instead of run (nothing reaches the device), as a Replay.

    For a launcher whose Python does not read what its kernels write (an elementwise launcher
    that returns its output): its kernels then run only when the Replay is called. The argument
    objects are kept, so the arrays a call allocated for its launches stay alive with the Replay.
    """
    taken = []

    def take(launch: hooks.KernelLaunch, run):
        taken.append(launch)

    with hooks.subscribe(replace_launch=take):
        call()
    return Replay(tuple(taken))


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


@contextlib.contextmanager
def record_launches(with_types: bool = False, on_launch=None, on_return=None, with_args: bool = False):
    """Collect every kernel launch made inside the block (nested blocks each see them all).

    `with_types=True` also keeps each launch's Numba argument types, so the kernel can be
    compiled for a real GPU afterwards; `with_args=True` its arguments themselves (which output
    each launch served). `on_launch(launch)` runs before each launch (an
    exception it raises stops the launch); `on_return(launch)`, in the simulator, after the
    kernel has finished (a GPU launch returns before its kernel ends).
    """
    log = LaunchLog()
    log.on_launch, log.on_return = on_launch, on_return
    simulated = device.is_simulator()

    def around(proceed, launch: hooks.KernelLaunch):
        argtypes = ()
        if with_types:
            from numba import typeof
            argtypes = tuple(typeof(arg) for arg in launch.args)
        seen = Launch(launch.name, launch.grid, launch.block, stream_handle(launch.stream),
                      launch.shared, launch.kernel, argtypes, tuple(launch.args) if with_args else ())
        log.append(seen)
        if log.on_launch is not None:
            log.on_launch(seen)
        try:
            return proceed()
        finally:
            if simulated and log.on_return is not None:
                log.on_return(seen)

    with hooks.subscribe(launch=around):
        yield log
