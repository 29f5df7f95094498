"""Memory traffic: what a kernel actually read and wrote in global memory, counted in the simulator.

    with meter(x=d_x, out=d_out) as traffic:
        lab.axpb(d_x, 2.0, 1.0, out=d_out)
    traffic["x"].reads == n and traffic["out"].writes == n

Only global memory is counted: shared and local arrays are plain NumPy arrays inside the
simulator and never pass through the hook. Arrays not named in `meter(...)` (intermediates a
launcher allocates) are reported under a generated name with their shape and dtype.
Counting needs the simulator; on a GPU `meter` raises, since no hardware counter is read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import numpy as np

from . import device


@dataclasses.dataclass
class ArrayTraffic:
    name: str
    itemsize: int
    reads: int = 0       # elements loaded
    writes: int = 0      # elements stored

    @property
    def bytes_read(self) -> int:
        return self.reads * self.itemsize

    @property
    def bytes_written(self) -> int:
        return self.writes * self.itemsize


class TrafficCount(dict):
    """{array name: ArrayTraffic}, with totals."""

    @property
    def bytes_read(self) -> int:
        return sum(t.bytes_read for t in self.values())

    @property
    def bytes_written(self) -> int:
        return sum(t.bytes_written for t in self.values())

    @property
    def total_bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def table(self) -> str:
        lines = [f"{'array':<16} {'reads':>10} {'writes':>10} {'bytes':>12}"]
        for t in self.values():
            lines.append(f"{t.name:<16} {t.reads:>10} {t.writes:>10} "
                         f"{t.bytes_read + t.bytes_written:>12}")
        lines.append(f"{'total':<16} {'':>10} {'':>10} {self.total_bytes:>12}")
        return "\n".join(lines)

    def __missing__(self, name):
        raise KeyError(f"no traffic recorded for array {name!r}; arrays seen: {', '.join(self) or 'none'}")


def _buffer_address(array) -> int:
    """The start of the memory an array (or a view of it) lives in: names survive re-wrapping."""
    base = getattr(array, "_ary", array)
    while getattr(base, "base", None) is not None and isinstance(base.base, np.ndarray):
        base = base.base
    return base.__array_interface__["data"][0]


_lock = threading.Lock()


@contextlib.contextmanager
def meter(**named_arrays):
    """Count global loads and stores per array for the launches inside the block (simulator only)."""
    if not device.is_simulator():
        raise RuntimeError("the traffic meter counts loads and stores in Numba's simulator; "
                           "on a GPU use the ledger's declared bytes (or a profiler such as ncu)")
    device.cuda()
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray as Within

    counts = TrafficCount()
    names = {_buffer_address(array): name for name, array in named_arrays.items()}
    for name, array in named_arrays.items():
        counts[name] = ArrayTraffic(name, array.dtype.itemsize)

    def entry(inner) -> ArrayTraffic:
        address = _buffer_address(inner)
        name = names.get(address)
        if name is None:
            name = names[address] = f"temp{len(names)} {tuple(inner.shape)} {inner.dtype}"
            counts[name] = ArrayTraffic(name, inner.dtype.itemsize)
        return counts[name]

    original_get, original_set = Within.__getitem__, Within.__setitem__

    def counted_get(self, idx):
        value = original_get(self, idx)
        if not isinstance(value, Within):  # taking a view (x[a:b]) loads nothing
            with _lock:
                entry(self._item).reads += 1
        return value

    def counted_set(self, idx, value):
        original_set(self, idx, value)
        with _lock:
            entry(self._item).writes += int(np.size(self._item._ary[idx]))

    with _lock:
        Within.__getitem__, Within.__setitem__ = counted_get, counted_set
    try:
        yield counts
    finally:
        with _lock:
            Within.__getitem__, Within.__setitem__ = original_get, original_set
