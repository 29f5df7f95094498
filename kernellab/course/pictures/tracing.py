"""Tracing a lab's function for its pictures: every global and shared access of one tiny launch,
in the simulator (in a simulator child process on a GPU), as a `KernelRun`."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import linecache
import os
import pickle
import re
import subprocess
import sys
import tempfile

import numpy as np

from kernellab.course import settings, target
from kernellab.gpu import device, launches, traffic
from kernellab.show.pictures import canvas


@dataclasses.dataclass(frozen=True)
class LaunchSpan:
    """One kernel launch of a traced call: its shape, and which accesses it made."""

    name: str
    grid: tuple
    block: tuple
    first: int          # accesses[first:end] are this launch's
    end: int


@dataclasses.dataclass
class KernelRun:
    """What a traced call did: its launches, its arrays' shapes, every global and shared access
    (`kernellab.gpu.traffic.Access`), and what it returned (copied to the host)."""

    lab: str
    function: str
    launches: list
    shapes: dict             # global array name -> shape
    accesses: list
    result: object = None
    source: str = canvas.TRACED

    def of(self, array: str | None = None, kind: str | None = None, space: str | None = None,
           launch: int | None = None) -> list:
        """The accesses to `array` (any when None) of `kind` and `space`, in one launch or all."""
        span = self.launches[launch] if launch is not None else None
        chosen = self.accesses[span.first:span.end] if span else self.accesses
        return [a for a in chosen if (array is None or a.array == array) and (kind is None or a.kind == kind)
                and (space is None or a.space == space)]

    def arrays(self, space: str = "global") -> list[str]:
        return list(dict.fromkeys(a.array for a in self.accesses if a.space == space))

    def launch_of(self, access) -> int:
        return next(i for i, span in enumerate(self.launches) if span.first <= access.order < span.end)

    def first_launch(self, array: str, kind: str | None = None, space: str | None = None) -> int:
        """The first launch that touched `array` (with `kind`); a clear error where none did."""
        found = self.of(array, kind, space)
        if not found:
            seen = ", ".join(self.arrays(space or "global")) or "none"
            what = f"{kind}s of" if kind else "accesses to"
            raise ValueError(f"{self.function} made no {what} {array!r} (arrays it touched: {seen})")
        return self.launch_of(found[0])


# --- tracing a call ----------------------------------------------------------------------------------

def trace(lab, function, *args, **kwargs) -> KernelRun:
    """Run `function` (a name, or the function itself) of lab `lab` of the current target on a tiny
    launch with every access traced. NumPy arrays among the arguments go to the device first and
    are named by their parameter. On a GPU the call runs in a simulator child process."""
    number = target.lab_number(lab)
    name = function if isinstance(function, str) else function.__name__
    if not device.is_simulator():
        return trace_in_child(number, name, args, kwargs)
    module = target.load(number)
    call = getattr(module, name, None) if isinstance(function, str) else function
    if call is None:
        raise ValueError(f"lab {number} ({target.module_name(number)}) has no function {name!r}")
    return trace_call(call, *args, lab=number, **kwargs)


def trace_call(call, *args, lab: str = "", **kwargs) -> KernelRun:
    """`trace` on any launcher (simulator only): the part that runs it under the meter."""
    cuda = device.cuda()
    try:
        bound = inspect.signature(call).bind(*args, **kwargs)
    except TypeError as error:
        raise ValueError(f"{call.__name__}{inspect.signature(call)} cannot take these arguments: {error}") from None
    named = {}
    for parameter, value in bound.arguments.items():
        if isinstance(value, np.ndarray):
            value = bound.arguments[parameter] = cuda.to_device(value)
        if hasattr(value, "copy_to_host"):
            named[parameter] = value
    spans = []
    with traffic.meter(trace=("global", "shared", "accesses"), **named) as counts, \
            launches.record_launches(on_launch=lambda launch: spans.append((launch, len(counts.accesses)))):
        result = call(*bound.args, **bound.kwargs)
    ends = [first for _, first in spans[1:]] + [len(counts.accesses)]
    launched = [LaunchSpan(launch.name, tuple(launch.grid), tuple(launch.block), first, end)
                for (launch, first), end in zip(spans, ends)]
    if not launched:
        raise ValueError(f"{call.__name__} launched no kernel: nothing to picture")
    renamed = _names(counts, result)
    shapes = {renamed.get(name, name): _shape(name, named) for name in counts}
    accesses = [a._replace(array=renamed.get(a.array, a.array)) if a.space == "global"
                else a._replace(array=shared_name(a)) for a in counts.accesses]
    host_result = result.copy_to_host() if hasattr(result, "copy_to_host") else result
    return KernelRun(lab, call.__name__, launched, shapes, accesses, host_result)


def _names(counts, result) -> dict:
    """The meter's generated name of the array the call returned -> "out"."""
    if not hasattr(result, "copy_to_host") or "out" in counts:
        return {}
    address = traffic.buffer_address(result)
    return {name: "out" for name, at in (counts.addresses or {}).items()
            if at == address and name.startswith("temp")}


def _shape(name: str, named: dict) -> tuple:
    if name in named:
        return tuple(named[name].shape)
    found = re.match(r"^temp\d+ (\(.*\)) \w+$", name)     # the meter's name for an unnamed array
    return tuple(ast.literal_eval(found.group(1))) if found else ()


def shared_name(access) -> str:
    """A shared array by its variable (`tile`), read from the line that declared it (the meter
    names it "file.py:12"), where that is the file of the access; else the meter's name."""
    file, _, line = access.array.rpartition(":")
    if not line.isdigit() or os.path.basename(access.site.path) != file:
        return access.array
    found = re.search(r"(\w+)\s*=\s*cuda\.shared\.array", linecache.getline(access.site.path, int(line)))
    return found.group(1) if found else access.array


CHILD = "import sys; from kernellab.course import pictures; pictures.traced_for_parent(*sys.argv[1:3])"


def trace_in_child(lab: str, function: str, args: tuple, kwargs: dict, chosen: str | None = None) -> KernelRun:
    """`trace` in a child process in simulator mode (what it does on a GPU) on target `chosen`
    (default: the current one): the arguments go over as host arrays, the KernelRun comes back."""
    def host(value):
        return value.copy_to_host() if hasattr(value, "copy_to_host") else value
    with tempfile.TemporaryDirectory() as folder:
        asked, answer = os.path.join(folder, "call.pickle"), os.path.join(folder, "run.pickle")
        with open(asked, "wb") as file:
            pickle.dump((lab, function, tuple(map(host, args)),
                         {k: host(v) for k, v in kwargs.items()}, chosen or target.current()), file)
        env = settings.child_env(device="sim", target=chosen or target.current())
        done = subprocess.run([sys.executable, "-c", CHILD, asked, answer],
                              env=env, capture_output=True, text=True, cwd=str(target.ROOT))
        if done.returncode != 0:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise RuntimeError(f"tracing {function} of lab {lab} in the simulator failed: {last}")
        with open(answer, "rb") as file:
            return pickle.load(file)


def traced_for_parent(asked: str, answer: str) -> None:
    """The child's side of `trace_in_child`: read the call, trace it, write the KernelRun."""
    with open(asked, "rb") as file:
        lab, function, args, kwargs, chosen = pickle.load(file)
    run = trace(lab, function, *args, **kwargs)      # in the target child_env chose
    with open(answer, "wb") as file:
        pickle.dump(run, file)
