"""Memory traffic: the bytes a variant declares (the ledger) and what its kernels really did (the meter).

The ledger: each variant declares, per op and per array, the elements it reads and writes.
It gives the totals, unfused against fused, and the speed-up to expect when both are
memory-bound (`Ledger.ratio`); `kernellab.course.bench` turns its bytes into GB/s.

    unfused.ratio(fused)            # predicted speed-up: unfused bytes / fused bytes
    fused.check_against(traffic)    # AssertionError, with both tables, if the meter disagrees

The meter counts real global loads and stores per array, in the simulator, for the launches
inside its block:

    with meter(x=d_x, out=d_out) as traffic:
        lab.axpb(d_x, 2.0, 1.0, out=d_out)
    traffic["x"].reads == n and traffic["out"].writes == n

Only global memory is counted: shared and local arrays are plain NumPy arrays inside the
simulator and never pass through the hook. An atomic (`cuda.atomic.add`, `cas`, `max`, ...) on a
global array counts as 1 read and 1 write, the one read-modify-write a GPU does, whatever the
simulator's Python does inside it (its `add` reads the element twice). Arrays not named in `meter(...)` (intermediates a
launcher allocates) are reported under a generated name with their shape and dtype; a ledger
marks such arrays `temporary=True` and they are matched by their counts.
Counting needs the simulator; on a GPU `meter` raises, since no hardware counter is read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import numpy as np

from kernellab.gpu import device


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


def buffer_address(array) -> int:
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
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic

    counts = TrafficCount()
    names = {buffer_address(array): name for name, array in named_arrays.items()}
    for name, array in named_arrays.items():
        counts[name] = ArrayTraffic(name, array.dtype.itemsize)

    def entry(inner) -> ArrayTraffic:
        address = buffer_address(inner)
        name = names.get(address)
        if name is None:
            name = names[address] = f"temp{len(names)} {tuple(inner.shape)} {inner.dtype}"
            counts[name] = ArrayTraffic(name, inner.dtype.itemsize)
        return counts[name]

    original_get, original_set = Within.__getitem__, Within.__setitem__
    in_atomic = threading.local()   # inside an atomic, its own loads and stores are not counted

    def counted_get(self, idx):
        value = original_get(self, idx)
        if not (isinstance(value, Within) or getattr(in_atomic, "active", False)):
            with _lock:  # taking a view (x[a:b]) loads nothing
                entry(self._item).reads += 1
        return value

    def counted_set(self, idx, value):
        original_set(self, idx, value)
        if not getattr(in_atomic, "active", False):
            with _lock:
                entry(self._item).writes += int(np.size(self._item._ary[idx]))

    def one_read_modify_write(atomic):
        def counted_atomic(self, array, *args):
            in_atomic.active = True
            try:
                result = atomic(self, array, *args)
            finally:
                in_atomic.active = False
            if isinstance(array, Within):  # shared-memory atomics are not global traffic
                with _lock:
                    counted = entry(array._item)
                    counted.reads += 1
                    counted.writes += 1
            return result
        return counted_atomic

    originals = {"__getitem__": original_get, "__setitem__": original_set}
    replacements = {"__getitem__": counted_get, "__setitem__": counted_set}
    atomics = {name: method for name, method in vars(FakeCUDAAtomic).items()
               if not name.startswith("_") and callable(method)}
    with _lock:
        for name, method in replacements.items():
            setattr(Within, name, method)
        for name, method in atomics.items():
            setattr(FakeCUDAAtomic, name, one_read_modify_write(method))
    try:
        yield counts
    finally:
        with _lock:
            for name, method in originals.items():
                setattr(Within, name, method)
            for name, method in atomics.items():
                setattr(FakeCUDAAtomic, name, method)


# --- The ledger: the bytes each variant declares it moves ---------------------------------------

@dataclasses.dataclass(frozen=True)
class LedgerEntry:
    """One op's traffic on one array, in elements of `itemsize` bytes."""

    op: str
    array: str
    reads: int
    writes: int
    itemsize: int
    temporary: bool  # an intermediate the launcher allocates (the meter cannot know its name)
    distinct: int | None = None   # the distinct elements the reads touch, when fewer than the reads

    @property
    def bytes(self) -> int:
        return (self.reads + self.writes) * self.itemsize

    @property
    def cached_bytes(self) -> int:
        """Re-reads of elements already read: what a cache serves (0 where `distinct` is None)."""
        return 0 if self.distinct is None else max(0, self.reads - self.distinct) * self.itemsize


class Ledger:
    """What a variant says it reads and writes, per op and per array: the bytes a speed-up is predicted from.

        unfused = (Ledger("unfused")
                   .add("scale", "x", reads=n).add("scale", "t", writes=n, temporary=True)
                   .add("shift", "t", reads=n, temporary=True).add("shift", "out", writes=n))
        fused = Ledger("fused").add("scale+shift", "x", reads=n).add("scale+shift", "out", writes=n)
        unfused.ratio(fused)                 # 2.0: the predicted speed-up of fusing, if memory-bound
        unfused.check_against(traffic)       # the meter's count for one run must agree

    Arrays are named as the meter names them (the keyword names given to `meter`); intermediates
    a launcher allocates are marked `temporary=True` and matched to the meter's unnamed arrays
    by their counts.
    """

    def __init__(self, name: str = "", entries=()):
        self.name = name
        self.entries: list[LedgerEntry] = list(entries)

    def add(self, op: str, array: str, reads: int = 0, writes: int = 0, itemsize: int = 4,
            temporary: bool = False, distinct: int | None = None) -> "Ledger":
        """Declare that `op` loads `reads` and stores `writes` elements of `array`; returns self.
        `distinct`: how many different elements the reads touch, when a small array is re-read
        (layernorm's gamma, read by every row): the re-reads are requested bytes that a cache
        serves, not DRAM traffic (`compulsory_bytes` leaves them out)."""
        if reads < 0 or writes < 0 or itemsize <= 0 or (distinct is not None and not 0 <= distinct <= reads):
            raise ValueError(f"ledger entry {op}/{array}: need reads, writes >= 0, itemsize > 0 and "
                             f"0 <= distinct <= reads, got reads={reads}, writes={writes}, "
                             f"itemsize={itemsize}, distinct={distinct}")
        self.entries.append(LedgerEntry(op, array, int(reads), int(writes), int(itemsize),
                                        bool(temporary), None if distinct is None else int(distinct)))
        return self

    def with_distinct(self, array: str, distinct: int) -> "Ledger":
        """A copy in which every read of `array` touches only `distinct` different elements."""
        return Ledger(self.name, (dataclasses.replace(e, distinct=min(distinct, e.reads))
                                  if e.array == array and e.reads else e for e in self.entries))

    def by_array(self) -> TrafficCount:
        """Per array, summed over ops, in the meter's form (so the two print alike)."""
        totals = TrafficCount()
        for entry in self.entries:
            item = totals.get(entry.array) or ArrayTraffic(entry.array, entry.itemsize)
            if item.itemsize != entry.itemsize:
                raise ValueError(f"ledger {self.name!r}: array {entry.array!r} declared with "
                                 f"itemsize {item.itemsize} and {entry.itemsize}")
            item.reads += entry.reads
            item.writes += entry.writes
            totals[entry.array] = item
        return totals

    def by_op(self) -> dict[str, int]:
        """Bytes per op, in the order the ops were declared."""
        out: dict[str, int] = {}
        for entry in self.entries:
            out[entry.op] = out.get(entry.op, 0) + entry.bytes
        return out

    @property
    def bytes_read(self) -> int:
        return sum(e.reads * e.itemsize for e in self.entries)

    @property
    def bytes_written(self) -> int:
        return sum(e.writes * e.itemsize for e in self.entries)

    @property
    def total_bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def compulsory_bytes(self) -> int:
        """The requested bytes less the re-reads a cache serves (entries with `distinct`): the
        least DRAM traffic the variant can cause, which a DRAM ceiling bounds."""
        return self.total_bytes - sum(e.cached_bytes for e in self.entries)

    def ratio(self, other: "Ledger") -> float:
        """self's bytes / other's bytes: the speed-up of `other` over self when both are memory-bound."""
        if other.total_bytes == 0:
            raise ValueError(f"ledger {other.name!r} declares no bytes; nothing to divide by")
        return self.total_bytes / other.total_bytes

    def temporaries(self) -> set[str]:
        return {e.array for e in self.entries if e.temporary}

    def differences(self, count: TrafficCount) -> list[str]:
        """Where a meter count disagrees with this ledger, one readable line each (empty: agreed)."""
        declared = self.by_array()
        temporaries = self.temporaries()
        problems = []
        unnamed = {name: t for name, t in count.items() if name not in declared}
        for name, want in declared.items():
            if name in temporaries:
                continue
            got = count.get(name)
            if got is None:
                problems.append(f"{name}: declared {want.reads} reads, {want.writes} writes; "
                                f"the meter saw no array of that name")
            elif (got.reads, got.writes, got.itemsize) != (want.reads, want.writes, want.itemsize):
                problems.append(f"{name}: declared {want.reads} reads, {want.writes} writes of "
                                f"{want.itemsize} B; measured {got.reads} reads, {got.writes} "
                                f"writes of {got.itemsize} B")
        # Temporaries have no name the meter could know: match them by their counts.
        def signature(t):
            return (t.reads, t.writes, t.itemsize)
        want_temps = sorted(signature(declared[name]) for name in temporaries)
        seen_temps = sorted(signature(t) for t in unnamed.values() if t.reads or t.writes)
        if want_temps != seen_temps:
            problems.append(f"temporaries: declared {len(want_temps)} as (reads, writes, itemsize) "
                            f"{want_temps}; the meter saw {len(seen_temps)} unnamed arrays "
                            f"{seen_temps}")
        return problems

    def check_against(self, count: TrafficCount):
        """Raise AssertionError, with both tables, when the meter's count disagrees with the ledger."""
        problems = self.differences(count)
        if problems:
            raise AssertionError(
                f"ledger {self.name!r} disagrees with what the kernels did:\n  "
                + "\n  ".join(problems)
                + f"\ndeclared:\n{self.by_array().table()}\nmeasured:\n{count.table()}")

    def table(self) -> str:
        """Per op and array: elements read and written, and bytes."""
        lines = [f"{'op':<16} {'array':<12} {'reads':>10} {'writes':>10} {'bytes':>12}"]
        for e in self.entries:
            lines.append(f"{e.op:<16} {e.array:<12} {e.reads:>10} {e.writes:>10} {e.bytes:>12}")
        lines.append(f"{'total':<16} {'':<12} {'':>10} {'':>10} {self.total_bytes:>12}")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        return {"name": self.name, "total_bytes": self.total_bytes,
                "entries": [dataclasses.asdict(e) for e in self.entries]}

    @classmethod
    def from_dict(cls, data: dict) -> "Ledger":
        return cls(data.get("name", ""), (LedgerEntry(**e) for e in data["entries"]))

    def __eq__(self, other) -> bool:
        """Same traffic per array (op names and declaration order aside)."""
        if not isinstance(other, Ledger):
            return NotImplemented
        def key(ledger):
            return {n: (t.reads, t.writes, t.itemsize) for n, t in ledger.by_array().items()}
        return key(self) == key(other)

    __hash__ = None

    def __repr__(self) -> str:
        return f"Ledger({self.name!r}, {self.total_bytes} bytes in {len(self.entries)} entries)"
