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
simulator and never pass through the hook (shared memory is traced for bank conflicts, below,
never counted). An atomic (`cuda.atomic.add`, `cas`, `max`, ...) on a
global array counts as 1 read and 1 write, the one read-modify-write a GPU does, whatever the
simulator's Python does inside it (its `add` reads the element twice). Arrays not named in `meter(...)` (intermediates a
launcher allocates) are reported under a generated name with their shape and dtype; a ledger
marks such arrays `temporary=True` and they are matched by their counts.
Counting needs the simulator; on a GPU `meter` raises, since no hardware counter is read.

Asked to, the meter also traces what a warp asks of the memory system, on the same launch:

    with meter(x=d_x, out=d_out, trace=("global", "shared")) as traffic: ...
    traffic.coalescing      # per (array, load or store site): SiteSectors, sectors per request
    traffic.bank_conflicts  # per (shared array, site): SiteBanks, wavefronts per request

and, with "accesses" in `trace`, every traced access itself, in the order the threads made them
(`traffic.accesses`: [Access], block, thread, warp, lane, element and byte offset each), which
kernellab.course.pictures draws.

(Tracing costs a few microseconds per access, several times the count alone on a kernel that
loops over shared memory, so it is off unless asked for.)

- Sectors per request (global memory): the distinct 32-byte sectors that one load or store
  instruction of a warp touches across its 32 lanes; Nsight Compute's
  l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / ..._requests_... on a GPU. The ideal for a
  full warp is 32 lanes x the access width / 32 B: 4, 8 and 16 sectors for 4-, 8- and 16-byte
  lanes (`ideal_sectors`). A request's *fewest* sectors are those its lanes' distinct bytes would
  touch as one run from the lowest of them, per row of the block where a warp spans several
  (blockDim.x < 32): a partial warp, a row that starts mid-sector and a broadcast need fewer or
  one more than the ideal. A site is coalesced when its sectors stay within COALESCED_SLACK of its
  fewest. Offsets are taken from the start of the allocation, which cudaMalloc aligns to 256 bytes.
- Bank conflicts (shared memory): 32 banks of 4 bytes. A warp's access is served in phases of
  128 bytes (32 lanes of 4 bytes, 16 of 8, 8 of 16); each phase needs as many wavefronts as the
  most distinct 4-byte words that fall in one bank, and lanes that read the same word share it
  (a broadcast). Conflict-free: one wavefront per phase.

The model's limits. The simulator runs each CUDA thread as its own Python thread, one after
another, so no warp ever issues anything: the meter groups lanes into a request by the
instruction (its source line and columns) and by how many times each lane has executed
that instruction. That is the grouping a GPU makes for code whose lanes run the same number of
iterations; where lanes diverge inside a loop it is an approximation. Requests are requested
traffic: no cache is modelled, so nothing here is a DRAM byte. Atomics and stores through a slice
are counted (above) but not traced; shared-memory atomics are neither. Numba may merge two loads of the
same element into one, or widen neighbouring loads into one vector load; the simulator runs the
Python as written, so the meter sees every scalar access.
"""

from __future__ import annotations

import contextlib
import dataclasses
import linecache
import re
import sys
import threading
import typing
from pathlib import Path

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
    """{array name: ArrayTraffic}, with totals; after a meter's block, also what its warps asked
    of the memory system: `coalescing` (global, per array and site) and `bank_conflicts`
    (shared, per array and site)."""

    coalescing: list | None = None        # [SiteSectors]; None unless trace has "global"
    bank_conflicts: list | None = None    # [SiteBanks]; None unless trace has "shared"
    accesses: list | None = None          # [Access]; None unless trace has "accesses"
    addresses: dict | None = None         # {array name: buffer_address}, after the block

    def traced(self, kind: str) -> list:
        """The traced sites of `kind` ("global" or "shared"); a clear error if not traced."""
        sites = self.coalescing if kind == "global" else self.bank_conflicts
        if sites is None:
            raise RuntimeError(f"the meter traced no {kind} requests: open it with "
                               f"meter(..., trace=({kind!r},))")
        return sites

    def sites(self, name: str) -> list:
        """The global load and store sites of array `name`."""
        return [s for s in self.traced("global") if s.array == name]

    def uncoalesced(self, *names: str) -> list:
        """The sites of the named arrays (all arrays when none is named) beyond COALESCED_SLACK."""
        return [s for s in self.traced("global") if (not names or s.array in names) and not s.coalesced]

    def conflicted(self) -> list:
        """The shared-memory sites that need more wavefronts than their phases."""
        return [s for s in self.traced("shared") if not s.conflict_free]

    def requests_table(self) -> str:
        """One line per traced site: sectors per request (global), wavefronts (shared)."""
        lines = [s.describe() for s in (*(self.coalescing or ()), *(self.bank_conflicts or ()))]
        return "\n".join(lines) or "no warp requests traced"

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


# --- What a warp asks of the memory system: sectors per request, bank conflicts -----------------

GENERATED_NAME = re.compile(r"temp\d+ \(")   # the meter's name for an array meter() was not given
WARP = 32
SECTOR_BYTES = 32
BANKS = 32
BANK_BYTES = 4
PHASE_BYTES = BANKS * BANK_BYTES   # the bytes one shared-memory wavefront serves
COALESCED_SLACK = 1.5              # a site is coalesced within 1.5x of its fewest sectors: a
                                   # stride of 2 elements is 2x, a thread-major loop 3x or more


def ideal_sectors(width: int) -> float:
    """Sectors per request for a full warp of `width`-byte lanes on consecutive addresses:
    32 x width / 32 B, so 4, 8 and 16 for 4-, 8- and 16-byte lanes (1 at least)."""
    return max(1.0, WARP * width / SECTOR_BYTES)


def byte_offset(array: np.ndarray, idx) -> int | None:
    """The byte offset of element `idx` of `array` from the start of its allocation (None for a
    slice or a fancy index)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    if len(idx) != array.ndim or not all(isinstance(i, (int, np.integer)) for i in idx):
        return None
    start = array.__array_interface__["data"][0] - buffer_address(array)
    return start + sum(int(i) % n * stride for i, n, stride in zip(idx, array.shape, array.strides))


@dataclasses.dataclass(frozen=True)
class Site:
    """One load or store instruction of a kernel: where it is in the source."""

    path: str
    line: int
    columns: tuple     # where the expression starts and ends on the line: two subscripts on
                       # one line are two instructions
    kind: str          # "load" or "store"

    @property
    def expression(self) -> str:
        """The subscript itself (`x[i]`), or the whole line where the span is unknown."""
        text = linecache.getline(self.path, self.line)
        start, end = self.columns
        return (text[start:end] if start is not None and end is not None else text).strip()

    def __str__(self) -> str:
        return f"{Path(self.path).name}:{self.line} ({self.kind} `{self.expression}`)"


@dataclasses.dataclass
class SiteSectors:
    """The warp requests of one global load or store site to one array, and their sectors."""

    array: str
    site: Site
    width: int            # bytes per lane
    requests: int = 0
    sectors: int = 0
    fewest: int = 0       # the sectors the same bytes need as one run (see the module docstring)

    @property
    def per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ideal(self) -> float:
        return ideal_sectors(self.width)

    @property
    def coalesced(self) -> bool:
        return self.sectors <= COALESCED_SLACK * self.fewest

    def describe(self) -> str:
        return (f"{self.array} at {self.site}: {self.per_request:.1f} sectors per request over "
                f"{self.requests} warp requests, ideal {self.ideal:g} for {self.width}-byte lanes")


@dataclasses.dataclass
class SiteBanks:
    """The warp requests of one shared-memory load or store site, and their wavefronts."""

    array: str            # where the shared array was declared
    site: Site
    width: int
    requests: int = 0
    wavefronts: int = 0
    ideal: int = 0        # one per phase: what the same requests cost without a conflict

    @property
    def conflict_free(self) -> bool:
        return self.wavefronts <= self.ideal

    @property
    def ways(self) -> float:
        """Wavefronts per ideal wavefront: 1 when conflict-free, 32 for a column of a 32-wide tile."""
        return self.wavefronts / self.ideal if self.ideal else 0.0

    def describe(self) -> str:
        return (f"shared {self.array} at {self.site}: {self.wavefronts} wavefronts for "
                f"{self.requests} warp requests where {self.ideal} serve them without a conflict "
                f"({self.ways:.1f}-way)")


class Access(typing.NamedTuple):
    """One load or store of one thread, as the meter traced it (trace=(..., "accesses"))."""

    order: int            # its place among all traced accesses of the meter's block
    space: str            # "global" or "shared"
    array: str            # the meter's name for the array (a shared one: where it was declared)
    kind: str             # "load" or "store"
    block: tuple          # blockIdx (x, y, z)
    thread: tuple         # threadIdx (x, y, z)
    warp: int             # the warp of the block it belongs to
    lane: int             # its lane in that warp
    index: tuple          # the element, one int per dimension
    offset: int           # its byte offset from the start of the allocation
    width: int            # bytes per element
    site: Site
    occurrence: int       # how many times this thread had run this site before


def element_index(array: np.ndarray, idx) -> tuple:
    """The element `idx` names, one non-negative int per dimension (an int idx of a 1-D array too)."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    return tuple(int(i) % n for i, n in zip(idx, array.shape))


def request_sectors(lanes: dict, width: int, row_lanes: int = WARP) -> tuple[int, int]:
    """(sectors touched, fewest sectors) of a request, {lane: byte offset}. The fewest: for each
    row of the block in the warp (`row_lanes` lanes share a threadIdx.y), the sectors its
    distinct bytes need as one run from the lowest of them."""
    touched = {sector for offset in lanes.values()
               for sector in range(offset // SECTOR_BYTES, (offset + width - 1) // SECTOR_BYTES + 1)}
    rows: dict[int, set] = {}
    for lane, offset in lanes.items():
        rows.setdefault(lane // row_lanes, set()).add(offset)
    fewest = sum((min(row) + len(row) * width - 1) // SECTOR_BYTES - min(row) // SECTOR_BYTES + 1
                 for row in rows.values())
    return len(touched), fewest


def request_wavefronts(lanes: dict, width: int) -> tuple[int, int]:
    """(wavefronts, conflict-free wavefronts) of a shared-memory request, {lane: byte offset}."""
    per_phase = max(1, PHASE_BYTES // max(width, BANK_BYTES))   # lanes one phase serves
    phases: dict[int, dict[int, set]] = {}                      # phase -> bank -> words
    for lane, offset in lanes.items():
        banks = phases.setdefault(lane // per_phase, {})
        for word in range(offset // BANK_BYTES, (offset + width - 1) // BANK_BYTES + 1):
            banks.setdefault(word % BANKS, set()).add(word)
    return sum(max(map(len, banks.values())) for banks in phases.values()), len(phases)


class WarpTrace:
    """The addresses each warp's lanes touch during a meter's launches, by instruction site and
    per-lane occurrence (the grouping the module docstring describes)."""

    def __init__(self):
        from numba.cuda.simulator.kernel import BlockThread
        self._thread_class = BlockThread
        self._lock = threading.Lock()
        self._issued: dict[tuple, int] = {}      # (thread, site) -> executions so far
        self._positions: dict = {}               # code object -> each instruction's source span
        # (space, array, width, site, block, lanes in a row of the block, warp, occurrence)
        #   -> {lane: byte offset}
        self._requests: dict[tuple, dict[int, int]] = {}
        self.accesses: list[Access] | None = None   # a list: every access is kept too

    def note(self, space: str, array: str, width: int, offset: int | None, kind: str, frame,
             index: tuple = ()):
        thread = threading.current_thread()
        if offset is None or not isinstance(thread, self._thread_class):
            return
        code = frame.f_code
        positions = self._positions.get(code)
        if positions is None:
            positions = self._positions[code] = list(code.co_positions())
        # f_lasti moves into an instruction's inline cache once Python specialises it; the
        # source span of its 2-byte code unit stays the instruction's own
        line, _, start, end = positions[frame.f_lasti // 2]
        site = Site(code.co_filename, line or frame.f_lineno, (start, end), kind)
        block = (thread.blockIdx.x, thread.blockIdx.y, thread.blockIdx.z)
        with self._lock:
            occurrence = self._issued.get((thread, site), 0)
            self._issued[(thread, site)] = occurrence + 1
            key = (space, array, width, site, block, thread._manager._block_dim[0],
                   thread.thread_id // WARP, occurrence)
            self._requests.setdefault(key, {})[thread.thread_id % WARP] = offset
            if self.accesses is not None:
                self.accesses.append(Access(
                    len(self.accesses), space, array, kind, block,
                    (thread.threadIdx.x, thread.threadIdx.y, thread.threadIdx.z),
                    thread.thread_id // WARP, thread.thread_id % WARP, index, offset, width,
                    site, occurrence))

    def summaries(self) -> tuple[list[SiteSectors], list[SiteBanks]]:
        """Per site: the sectors of its global requests, the wavefronts of its shared ones."""
        sectors: dict[tuple, SiteSectors] = {}
        banks: dict[tuple, SiteBanks] = {}
        for (space, array, width, site, _, row_length, warp, _), lanes in self._requests.items():
            if space == "global":
                entry = sectors.setdefault((array, site), SiteSectors(array, site, width))
                # the lanes of this warp that share a row of the block (threadIdx.y), by lane
                first = (warp * WARP) % row_length if row_length < WARP else 0
                touched, fewest = request_sectors({lane + first: offset for lane, offset in lanes.items()},
                                                  width, min(row_length, WARP))
                entry.sectors, entry.fewest = entry.sectors + touched, entry.fewest + fewest
            else:
                entry = banks.setdefault((array, site), SiteBanks(array, site, width))
                wavefronts, ideal = request_wavefronts(lanes, width)
                entry.wavefronts, entry.ideal = entry.wavefronts + wavefronts, entry.ideal + ideal
            entry.requests += 1
        return list(sectors.values()), list(banks.values())


def _traced_shared_class(trace: WarpTrace, in_atomic: threading.local):
    """An ndarray view type for a shared array that tells `trace` each element a thread loads or
    stores (a view of a view keeps its allocation's name; offsets count from the allocation)."""

    class TracedShared(np.ndarray):
        def __array_finalize__(self, parent):
            self._kernellab_name = getattr(parent, "_kernellab_name", "")

        def _note(self, idx, kind):
            if not getattr(in_atomic, "active", False):
                offset = byte_offset(self, idx)
                trace.note("shared", self._kernellab_name, self.dtype.itemsize, offset, kind,
                           sys._getframe(2),
                           element_index(self, idx) if trace.accesses is not None and offset is not None else ())

        def __getitem__(self, idx):
            value = super().__getitem__(idx)
            if not isinstance(value, np.ndarray):
                self._note(idx, "load")
            return value

        def __setitem__(self, idx, value):
            super().__setitem__(idx, value)
            self._note(idx, "store")

    return TracedShared


@contextlib.contextmanager
def _tracing_shared_arrays(trace: WarpTrace, in_atomic: threading.local):
    """While the block runs, `cuda.shared.array` hands kernels traced views of the arrays the
    simulator (or stress mode) allocates. The simulator keys a static allocation by the line
    that asked for it, which inside this wrapper would be the wrapper's own line for every
    array: each new allocation is filed under the kernel's line instead."""
    from numba.cuda.simulator.kernelapi import FakeCUDAShared
    allocate = FakeCUDAShared.array
    traced_class = _traced_shared_class(trace, in_atomic)
    allocation_lock = threading.Lock()

    def traced_array(self, shape, dtype, alignment=None):
        caller = sys._getframe(1)
        key = (caller.f_code.co_filename, caller.f_lineno)
        with allocation_lock:
            array = self._allocations.get(key) if shape != 0 else None
            if array is None:
                before = set(self._allocations)
                array = allocate(self, shape, dtype, alignment)
                for wrong_key in set(self._allocations) - before:
                    self._allocations[key] = self._allocations.pop(wrong_key)
        view = array.view(traced_class)
        view._kernellab_name = f"{Path(key[0]).name}:{key[1]}" if shape != 0 else "dynamic"
        return view

    FakeCUDAShared.array = traced_array
    try:
        yield
    finally:
        FakeCUDAShared.array = allocate


_lock = threading.Lock()


@contextlib.contextmanager
def meter(trace: tuple = (), **named_arrays):
    """Count global loads and stores per array for the launches inside the block (simulator only);
    with `trace` ("global", "shared" or both), also each warp's requests (the module docstring),
    and with "accesses" too, every traced access (`accesses`)."""
    unknown = set(trace) - {"global", "shared", "accesses"}
    if unknown:
        raise ValueError(f"meter traces 'global' and 'shared' requests (and keeps their "
                         f"'accesses'), not {', '.join(sorted(unknown))}")
    if not device.is_simulator():
        raise RuntimeError("the traffic meter counts loads and stores in Numba's simulator; "
                           "on a GPU use the ledger's declared bytes (or a profiler such as ncu)")
    device.cuda()
    from numba.cuda.simulator.cudadrv.devicearray import FakeWithinKernelCUDAArray as Within
    from numba.cuda.simulator.kernelapi import FakeCUDAAtomic

    counts = TrafficCount()
    warps, tracing_global = WarpTrace(), "global" in trace
    if "accesses" in trace:
        warps.accesses = counts.accesses = []     # filled as the threads run
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
    # Threads already running when the block opens are an earlier launch's (a kernel that raised
    # leaves its block's other threads behind): what they touch is not this block's traffic.
    strays = frozenset(threading.enumerate()) - {threading.current_thread()}

    def traced(within, idx, kind, counted: ArrayTraffic):
        if tracing_global:
            array = within._item._ary
            offset = byte_offset(array, idx)
            warps.note("global", counted.name, array.dtype.itemsize, offset, kind, sys._getframe(2),
                       element_index(array, idx) if warps.accesses is not None and offset is not None else ())

    def counted_get(self, idx):
        value = original_get(self, idx)
        if not (isinstance(value, Within) or getattr(in_atomic, "active", False)
                or threading.current_thread() in strays):
            with _lock:  # taking a view (x[a:b]) loads nothing
                counted = entry(self._item)
                counted.reads += 1
            traced(self, idx, "load", counted)
        return value

    def counted_set(self, idx, value):
        original_set(self, idx, value)
        if not (getattr(in_atomic, "active", False) or threading.current_thread() in strays):
            with _lock:
                counted = entry(self._item)
                counted.writes += int(np.size(self._item._ary[idx]))
            traced(self, idx, "store", counted)

    def one_read_modify_write(atomic):
        def counted_atomic(self, array, *args):
            in_atomic.active = True
            try:
                result = atomic(self, array, *args)
            finally:
                in_atomic.active = False
            # a shared-memory atomic is not global traffic; a stray thread's is not this block's
            if isinstance(array, Within) and threading.current_thread() not in strays:
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
        with (_tracing_shared_arrays(warps, in_atomic) if "shared" in trace
              else contextlib.nullcontext()):
            yield counts
    finally:
        with _lock:
            for name, method in originals.items():
                setattr(Within, name, method)
            for name, method in atomics.items():
                setattr(FakeCUDAAtomic, name, method)
        coalescing, bank_conflicts = warps.summaries()
        counts.coalescing = coalescing if tracing_global else None
        counts.bank_conflicts = bank_conflicts if "shared" in trace else None
        counts.addresses = {name: address for address, name in names.items()}


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
        undeclared = {name: t for name, t in count.items() if name not in declared}
        unnamed = {name: t for name, t in undeclared.items() if GENERATED_NAME.match(name)}
        for name, got in undeclared.items():
            if name not in unnamed and (got.reads or got.writes):
                problems.append(f"{name}: the meter saw {got.reads} reads, {got.writes} writes; "
                                f"the ledger declares no array of that name")
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
