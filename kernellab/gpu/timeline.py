"""Stream timelines: which work ran on which stream, when, and how much of it overlapped.

    with Timeline() as tl:
        lab.run_independent(xs, iters, streams, outs)
    print(tl.report())        # makespan, concurrency, idle gaps; in the simulator: no timing exists
    plot_gantt(tl.data)       # one row per stream, a small Nsight Systems

Inside the block, every kernel launch, host<->device copy, event record and wait, and
synchronization is noted in order: that is the trace (`tl.trace`), in both device modes, and it
knows what must finish before what (`Trace.happens_before`). On a GPU each launch and copy is
also bracketed by two CUDA events on its own stream, which gives the timing (`tl.data`).

In the simulator, `Timeline(record_uses=True)` also notes what each launch and copy read and wrote
(`tl.uses`: byte ranges of allocations, a kernel's from the traffic meter run on that launch):
`tl.races()` then names every pair of operations on different streams that touch the same bytes,
one of them writing, with no event or synchronization ordering them (a race only a GPU shows: the
simulator runs everything in order), and `tl.pageable_copies(pinned)` every copy whose host side is
not page-locked, which makes the host wait for the copy (the pipeline stops at each chunk).

What events can see: a span starts when its stream reaches the work (the start event fires) and
ends when the work is done. A kernel that waits for free SMs behind another stream's kernel
shows as running while it waits; Nsight Systems sees the blocks, events do not. Recording
costs the host time per launch and copy, which the measurement includes: `kernellab bench 07`
measures it against its floor, one event recorded after the call (`recorder_cost`), and the
pipeline's time inside the recorder against bare. On the H200 timing each copy slowed a copy-bound
pipeline (Lab 07's, +15-17%) where the trace alone and the events around kernels barely did. The
host's time is not why (15 us of spinning before each copy cost nothing). A timing event recorded
on a stream that is idle while other streams' copies are in flight is: one before each stream's
first op made the pipeline over 10% slower in 89 of 300 reps, where the same events recorded before
the work, untimed ones, and events after each op (+1.3-1.9%) did not (2026-12-02; docs/measuring.md,
Recorder and hook costs). So `Timeline(infer_starts=True, streams=...)` records one event
after each op and one on each stream as it opens, and no start event while the work runs;
`Timeline(timed=("kernel",))` times the kernels only; and `Makespan()` times a whole block from
the GPU's side with one event before its first op and one per stream after its last.

The simulator runs everything serially and has no clock: there the trace exists, the timing
does not, and `tl.data` raises `timing.NoTiming`. Timelines predicted by `kernellab.scheduler` and
recorded H200 timelines (`TimelineData.from_dict`) are the same type and draw the same way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import time
import typing
from pathlib import Path

import numpy as np

from kernellab.gpu import device, hooks, timing, traffic
from kernellab.gpu.timing import NoTiming

TIMED_KINDS = ("kernel", "h2d", "d2h", "d2d")
SYNC_KINDS = ("device_sync", "stream_sync", "event_sync")
KIND_COLORS = {"kernel": "tab:blue", "h2d": "tab:orange", "d2h": "tab:green", "d2d": "tab:purple"}
SHARED_AXIS_RATIO = 2.0   # timelines side by side share one time axis only while their makespans are this close
DEFAULT_ROW = "default stream"
_SPECIAL_HANDLES = {1: DEFAULT_ROW, 2: "per-thread default stream"}  # CU_STREAM_LEGACY, _PER_THREAD
_SPECIAL_ROWS = {0: DEFAULT_ROW, **_SPECIAL_HANDLES}


# --- the trace: what was submitted, in order -----------------------------------------------------

class Op(typing.NamedTuple):
    """One thing the host submitted: a launch, a copy, an event record/wait, or a synchronization
    (a tuple: one is made for every op the recorder notes, on the host's path)."""

    index: int
    kind: str                    # TIMED_KINDS, "record", "wait", or SYNC_KINDS
    label: str
    row: str | None              # the stream's row; None for a device-wide synchronize
    submit_ms: float             # host time of the submission, from the timeline's start
    event: int | None = None     # which event (record, wait, event_sync)
    grid: tuple | None = None
    block: tuple | None = None
    nbytes: int = 0

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2] if self.grid else 0


_NO_ROW = object()        # a noted op's stream where it has none (a device-wide synchronize)


class Trace(list):
    """The ops in submission order, with the ordering the CUDA rules guarantee between them.

    Streams are taken to be blocking (what `cuda.stream()` makes): work on the legacy default
    stream waits for all of them, and they all wait for it.
    """

    def timed(self) -> list[Op]:
        return [op for op in self if op.kind in TIMED_KINDS]

    def kernels(self, name: str | None = None) -> list[Op]:
        return [op for op in self if op.kind == "kernel" and (name is None or op.label == name)]

    def of_kind(self, *kinds: str) -> list[Op]:
        return [op for op in self if op.kind in kinds]

    def rows(self) -> list[str]:
        return list(dict.fromkeys(op.row for op in self.timed()))

    def dependencies(self) -> list[int]:
        """For each op, a bitmask of the ops guaranteed finished before it starts."""
        return self._ordering()[0]

    def host_dependencies(self) -> list[int]:
        """For each op, a bitmask of the ops the host had waited for before submitting it."""
        return self._ordering()[1]

    def _ordering(self) -> tuple[list[int], list[int]]:
        deps, host, row_state, event_state, host_done = [], [], {}, {}, 0
        for op in self:
            bit = 1 << op.index
            before = row_state.get(op.row, 0) | host_done
            if op.row is not None:      # blocking streams wait for earlier default-stream work...
                before |= row_state.get(DEFAULT_ROW, 0)
            if op.row == DEFAULT_ROW and op.kind in (*TIMED_KINDS, "record"):
                for state in row_state.values():     # ...and default-stream work waits for theirs
                    before |= state
            deps.append(before)
            host.append(host_done)
            if op.kind in TIMED_KINDS:
                row_state[op.row] = before | bit
            elif op.kind == "record":
                event_state[op.event] = before
            elif op.kind == "wait":
                row_state[op.row] = before | event_state.get(op.event, 0)
            elif op.kind == "device_sync":
                host_done = (bit << 1) - 1
            elif op.kind == "stream_sync":
                host_done |= row_state.get(op.row, 0)
            elif op.kind == "event_sync":
                host_done |= event_state.get(op.event, 0)
        return deps, host

    def happens_before(self, first: Op | int, then: Op | int) -> bool:
        """True when the CUDA ordering rules make `first` finish before `then` starts."""
        a = first.index if isinstance(first, Op) else first
        b = then.index if isinstance(then, Op) else then
        return bool(self.dependencies()[b] >> a & 1)

    def host_waits(self) -> list[Op]:
        """The synchronizations: each one stops the host until the GPU catches up."""
        return self.of_kind(*SYNC_KINDS)


# --- what each op touched: races and host waits (simulator) ---------------------------------------

@dataclasses.dataclass(frozen=True)
class Use:
    """A byte range of one allocation that an op read or wrote."""

    buffer: int          # the allocation's start (traffic.buffer_address)
    start: int           # bytes from the allocation's start...
    end: int             # ...to one past the last byte
    writes: bool
    host: bool           # host memory (a copy's host side)
    what: str            # which operand: "argument 2", "destination", "source"
    where: str           # the line of course code that submitted the op ("" when none)

    def overlaps(self, other: Use) -> bool:
        return self.buffer == other.buffer and self.start < other.end and other.start < self.end


@dataclasses.dataclass(frozen=True)
class Race:
    """Two ops on different streams that touch the same bytes, one writing, unordered."""

    first: Op
    then: Op
    first_use: Use
    then_use: Use

    def describe(self) -> str:
        def one(op: Op, use: Use) -> str:
            verb = "writes" if use.writes else "reads"
            at = f" ({use.where})" if use.where else ""
            return f"{op.label} on {op.row}{at} {verb} its {use.what}"
        memory = "host" if self.first_use.host else "device"
        return (f"{one(self.first, self.first_use)}, and {one(self.then, self.then_use)}: the same "
                f"{memory} bytes {self.then_use.start}-{self.then_use.end} of one buffer, and no event "
                f"or synchronization orders the two (on a GPU they may run at the same time)")


_KERNELLAB = str(Path(__file__).resolve().parent.parent)
_TESTS = str(Path(_KERNELLAB).parent / "tests")


def _submitted_at(frame) -> str:
    """file:line of the outermost frame of course code (a lab, a solution, an experiment) in the
    chain of calls that reached `frame`: the student's line that asked for the launch or copy,
    not the given launcher inside it."""
    found = None
    while frame is not None:
        path = frame.f_code.co_filename
        course = not (path.startswith((_KERNELLAB, _TESTS, sys.prefix, sys.base_prefix, "<"))
                      or "site-packages" in path)
        if course:
            found = frame
        elif found is not None:
            break
        frame = frame.f_back
    return f"{Path(found.f_code.co_filename).name}:{found.f_lineno}" if found is not None else ""


def _use(array, writes: bool, what: str, where: str) -> Use:
    host = getattr(array, "_ary", array)
    low, high = np.lib.array_utils.byte_bounds(np.asarray(host))
    base = traffic.buffer_address(array)
    return Use(base, low - base, high - base, writes, not hasattr(array, "copy_to_host"), what, where)


# --- spans and their metrics -----------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Span:
    """One piece of work on one stream, in ms from the timeline's start."""

    label: str
    row: str
    kind: str
    start_ms: float
    end_ms: float
    first_block_ms: float | None = None   # models only: when the first block (or byte) moved
    submit_ms: float | None = None        # host time of the submission
    start_uncertain_ms: float | None = None   # an inferred start: it may have begun up to this much earlier

    @property
    def duration_ms(self) -> float:
        return self.end_ms - self.start_ms


def _union_intervals(intervals) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def _length(intervals) -> float:
    return sum(b - a for a, b in intervals)


def _intersection_length(xs, ys) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(xs) and j < len(ys):
        total += max(0.0, min(xs[i][1], ys[j][1]) - max(xs[i][0], ys[j][0]))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


@dataclasses.dataclass(frozen=True)
class TimelineData:
    """Spans on rows (streams), measured, predicted or recorded; `source` says which."""

    spans: tuple[Span, ...]
    rows: tuple[str, ...]
    source: str

    @property
    def start_ms(self) -> float:
        return min(s.start_ms for s in self.spans)

    @property
    def end_ms(self) -> float:
        return max(s.end_ms for s in self.spans)

    @property
    def makespan_ms(self) -> float:
        """From the first span's start to the last one's end."""
        return self.end_ms - self.start_ms if self.spans else 0.0

    @property
    def busy_ms(self) -> float:
        """The sum of the spans' durations: what one stream would take with no gaps."""
        return sum(s.duration_ms for s in self.spans)

    @property
    def concurrency(self) -> float:
        """Spans open at once, on average: busy time / makespan (1.0 = nothing overlapped)."""
        return self.busy_ms / self.makespan_ms if self.makespan_ms else 0.0

    def _covered(self, spans) -> list[tuple[float, float]]:
        return _union_intervals((s.start_ms, s.end_ms) for s in spans)

    def covered_ms(self, *kinds: str) -> float:
        """The time at least one span of these kinds was in flight (their overlaps counted once)."""
        return _length(self._covered(s for s in self.spans if s.kind in kinds))

    @property
    def idle_fraction(self) -> float:
        """Share of the makespan with no span open on any stream."""
        if not self.makespan_ms:
            return 0.0
        return 1.0 - _length(self._covered(self.spans)) / self.makespan_ms

    def row_idle_fractions(self) -> dict[str, float]:
        """Per stream: share of the makespan with nothing open on that stream."""
        return {row: 1.0 - _length(self._covered(s for s in self.spans if s.row == row))
                / self.makespan_ms for row in self.rows} if self.makespan_ms else {}

    @property
    def gap_ratio(self) -> float:
        """Idle time between consecutive spans of each stream / busy time (the seed article's
        'kernel gaps < 5% of compute' is this ratio)."""
        gaps = 0.0
        for row in self.rows:
            covered = self._covered(s for s in self.spans if s.row == row)
            gaps += sum(b[0] - a[1] for a, b in zip(covered, covered[1:]))
        return gaps / self.busy_ms if self.busy_ms else 0.0

    def hidden_fraction(self, kinds_a=("h2d", "d2h"), kinds_b=("kernel",)) -> float:
        """Time both kinds were in flight / the smaller one's total: 1.0 hides the smaller fully."""
        a = self._covered(s for s in self.spans if s.kind in kinds_a)
        b = self._covered(s for s in self.spans if s.kind in kinds_b)
        smaller = min(_length(a), _length(b))
        return _intersection_length(a, b) / smaller if smaller else 0.0

    def summary(self) -> str:
        idle = ", ".join(f"{row} {frac:.0%}" for row, frac in self.row_idle_fractions().items())
        return (f"{len(self.spans)} spans on {len(self.rows)} stream(s) [{self.source}]\n"
                f"  makespan {self.makespan_ms:.3f} ms, busy {self.busy_ms:.3f} ms, "
                f"concurrency {self.concurrency:.2f}x\n"
                f"  idle {self.idle_fraction:.1%} of the makespan; gaps {self.gap_ratio:.1%} of busy "
                f"time\n  idle per stream: {idle}")

    def as_dict(self) -> dict:
        return {"source": self.source, "rows": list(self.rows),
                "spans": [dataclasses.asdict(s) for s in self.spans]}

    @classmethod
    def from_dict(cls, record: dict, source: str | None = None) -> TimelineData:
        return cls(tuple(Span(**s) for s in record["spans"]), tuple(record["rows"]),
                   source or record.get("source", "recorded"))


def no_timing_message(trace: Trace | None = None) -> str:
    what = (f"{len(trace.timed())} launches and copies on {len(trace.rows())} stream(s) ran "
            "serially and were checked; ") if trace is not None else ""
    return (f"no timing exists in the simulator: {what}its streams are accepted and ignored and "
            "it has no clock. Use kernellab.scheduler to predict the timeline, and the recorded "
            "H200 timelines in data/reference/h200/lab07.json")


INSIDE_CAPTURE = ("this timeline was opened inside a graph capture: the launches were captured, not "
                  "run, so nothing was timed (time the graph's replay() instead)")


# --- the recorder ----------------------------------------------------------------------------------

# What the recorder costs the host on an H200 (2026-12-02, docs/measuring.md): creating a
# timing event ~9 us; recording one ~1.3-2.5 us; a plain launch 18-48 us (the host there is slow,
# ~4-5x a laptop-class CPU on this path). So the recorder keeps the events of closed timelines for
# the next one (creating them only when it has none spare, or in `reserve_events`, outside the
# measured work), records them with the driver's cuEventRecord directly, keeps one tuple of plain
# values per op, and reaches each op through the hooks' one-subscription short way.
SPARE_EVENTS_KEPT = 1 << 15
_spare_events: list = []      # (event, its handle as an int), ready for the next timeline


def _new_event(cuda) -> tuple:
    event = cuda.event(timing=True)
    return event, int(getattr(event, "handle", 0) or 0)   # the simulator's events have no handle


def _spare_event(cuda) -> tuple:
    """A spare event, or a new one if none is left (off the per-op path, which inlines this)."""
    return _spare_events.pop() if _spare_events else _new_event(cuda)


def reserve_events(ops: int) -> None:
    """Create the timing events `ops` timed launches or copies will need, now, so that a Timeline
    opened afterwards creates none while the measured code runs."""
    cuda = device.cuda()
    while len(_spare_events) < min(2 * ops + 1, SPARE_EVENTS_KEPT):
        _spare_events.append(_new_event(cuda))


@functools.cache
def _event_recorder():
    """record(event handle, stream handle), both ints, returning the driver's CUresult: the
    recorder's per-op path. cuEventRecord through ctypes, or cuda.bindings' wrapper where ctypes
    cannot load the driver. Stream 0 is the legacy default stream, as in numba-cuda."""
    import ctypes
    try:
        record = ctypes.CDLL("libcuda.so.1").cuEventRecord
        record.argtypes, record.restype = (ctypes.c_void_p, ctypes.c_void_p), ctypes.c_int
        return record
    except (OSError, AttributeError):
        from cuda.bindings import driver
        return lambda event, stream: int(driver.cuEventRecord(event, stream)[0])


def events_around(call, stream, before: bool = True):
    """`call` bracketed by two of the recorder's pooled events on `stream` (`before=False`: only the
    one after it, as the pipeline's recorder times an op whose start it infers), recorded as the
    recorder records them, with no hook and no trace: what the events alone add to an op, the part
    of the recorder's cost that timing itself needs, its floor (`kernellab bench 07` measures it
    beside the whole)."""
    record, key = _event_recorder(), Timeline._key(stream)
    cuda = device.cuda()

    def bracketed():
        start = _spare_events.pop() if _spare_events else _new_event(cuda)
        end = _spare_events.pop() if _spare_events else _new_event(cuda)
        record(start[1], key)
        call()
        record(end[1], key)
        _spare_events.extend((start, end))

    def followed():
        end = _spare_events.pop() if _spare_events else _new_event(cuda)
        call()
        record(end[1], key)
        _spare_events.append(end)
    return bracketed if before else followed


class _StreamKeys(dict):
    """id(stream) -> its key (`Timeline._key`), worked out once per stream object, so that on the hot
    path a stream's key is one look-up (by id: a stream need not be hashable). The streams are kept
    (`held`), so an id cannot be reused while the dict lives."""

    def __init__(self):
        super().__init__()
        self.held = []

    def of(self, stream):
        key = self.get(id(stream))
        return key if key is not None else self.remember(stream)

    def remember(self, stream):
        self.held.append(stream)
        key = self[id(stream)] = Timeline._key(stream)
        return key


class Timeline:
    """Record what the code inside the block submits; on a GPU, time each launch and copy.

    `timed` names the kinds that are timed (default: every launch and copy); the others are still
    in the trace. Each timed op gets an event before it and one after it, on its stream.

    `infer_starts=True` records one event per op where it can: an op that follows a timed op on its
    stream, with nothing between them, gets no start event, and starts when the op before it ended
    or when it reached the GPU, whichever is later (a stream runs its work in order). Where the
    stream was busy, that is the op before's end (a start event there fired 1.3-7.5 us after it in
    recorded H200 pipelines, 2026-12-02); where it may have been idle, it starts when the host had
    finished submitting it (its host clock read against the timeline's origin event, which fired
    after the host recorded it), and may have begun as early as the op before's end: that much is
    its uncertainty (`Span.start_uncertain_ms`), and `start_sources()` counts such starts and their
    widest bound. It is for work whose host runs
    ahead of the GPU, as a pipeline's does, where the starts are sure and half the events and their
    host time are saved. Whether the op before is done is not asked of the driver on the way:
    cuEventQuery cost ~4.5 us on the H200's host, twice a record. Nor does it time through CUPTI's
    activity trace (GPU-side timestamps, no event on the stream): on the same host that cost +13.7
    us per launch and +13.9 us per copy, and made Lab 07's pipeline 21-23% slower (2026-12-02;
    docs/measuring.md, Recorder and hook costs).

    `streams` (with infer_starts): the timeline records an event on each of them as it opens, before
    the measured work, and each one's first op starts from it as from an op before, so no timing
    event is recorded on a stream that may be idle while the work runs. On the H200 such an event (a
    stream's first op's start event, submitted while other streams' copies were in flight) made Lab
    07's pipeline over 10% slower in 89 of 300 reps and under 5% in 180; the same events recorded
    as the timeline opened, untimed events there, and events after ops did not (2026-12-02).
    An idle stream's first op then starts when the host had submitted it, uncertain back to the
    opening event.
    `tl.events` says in words what was timed, for the record.
    """

    _active = None

    def __init__(self, source: str | None = None, record_uses: bool = False,
                 timed: tuple[str, ...] = TIMED_KINDS, infer_starts: bool = False, streams=()):
        if record_uses and not device.is_simulator():
            raise RuntimeError("record_uses meters each kernel, which needs Numba's simulator")
        unknown = set(timed) - set(TIMED_KINDS)
        if unknown:
            raise ValueError(f"timed: no kind {', '.join(sorted(unknown))} (kinds: {', '.join(TIMED_KINDS)})")
        if streams and not infer_starts:
            raise ValueError("streams: an event on each as the timeline opens is what their first ops' "
                             "starts are inferred from; give it with infer_starts=True")
        if any(self._key(stream) in _SPECIAL_ROWS for stream in streams):
            raise ValueError("streams: streams made with cuda.stream(), not the default stream (its work "
                             "orders the others', so no start is inferred across it)")
        self.timed_kinds = tuple(timed)
        self.infer_starts = infer_starts
        self.opening_streams = tuple(streams)
        self.record_uses = record_uses
        self.uses: dict[int, list[Use]] = {}   # op index -> what it read and wrote
        self.timed = not device.is_simulator()
        self.inside_capture = False   # set on entry: a capture records, runs nothing
        self.source = source
        self._trace = Trace()
        self._submitted: list = []    # (kind, label or bytes, stream key, host seconds, extra): the ops
        #                               noted per op, plain values only (see _timing_brackets)
        self._rows: dict = {}
        self._stream_keys = _StreamKeys()
        self._keep: list = []         # events seen, so their ids stay unique
        # On a GPU, each event an (event, its handle): per timed op that returned, in order, (its index,
        # its end event, host seconds when its submission returned: what bounds an inferred start); op
        # index -> its start event, where it has one of its own (an inferred start has none: see
        # _collect); stream key -> its opening event (`streams`); stream key -> True while its next
        # op's start can be inferred (its latest op was timed and nothing else was submitted on it
        # since, or it was opened).
        self._ended: list = []
        self._own_starts: dict = {}
        self._opened: dict = {}
        self._ready: dict = {}
        self._starts: dict = {}       # once it has run: start_sources()
        self._timing: tuple = ()      # the kinds bracketed by events: none until it runs on a GPU
        self._data: TimelineData | None = None

    # rows ---------------------------------------------------------------------------------------
    @staticmethod
    def _key(stream):
        """A stream's identity: its handle (0 for the default; an int is one), or in the simulator
        the stream object itself (whose streams have no handle; the trace keeps it alive)."""
        if type(stream) is int:
            return stream
        if stream is None:
            return 0
        protocol = getattr(stream, "__cuda_stream__", None)   # numba-cuda's and cuda.core's streams
        if protocol is not None:     # (cuda.core's `handle` builds a CUstream object: ~1 us here, ~5 on the H200's host)
            return int(protocol()[1])
        handle = getattr(stream, "handle", None)
        return int(handle) if handle is not None else stream

    def row(self, stream) -> str:
        """The row (stream name) a stream gets: its name if given, else 'stream 1', 'stream 2', ...
        in order of first use; 'default stream' for 0 and the legacy default stream."""
        self._take_submitted()          # the streams used so far get their rows first, in order
        return self._row_of(self._key(stream))

    def _row_of(self, key) -> str:
        return self._rows.get(key) or _SPECIAL_ROWS.get(key) or self._new_row(key)

    def _new_row(self, key) -> str:
        row = self._rows[key] = f"stream {len(self._rows) + 1}"
        return row

    def name(self, stream, label: str) -> Timeline:
        """Call the stream's row `label` instead of 'stream N' (before its first use)."""
        if self.row(stream) in (DEFAULT_ROW, *_SPECIAL_HANDLES.values()):
            raise ValueError("the default streams keep their names")
        self._rows[self._key(stream)] = label
        return self

    # recording ----------------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """Every op submitted so far, in order (one list, brought up to date when read)."""
        self._take_submitted()
        return self._trace

    def _take_submitted(self) -> None:
        """Turn the ops noted per op into the trace's Ops: their labels, rows and sizes
        are worked out here, once, not while the measured code submits them."""
        submitted, trace = self._submitted, self._trace
        for index in range(len(trace), len(submitted)):
            kind, what, key, seconds, extra = submitted[index]
            row = None if key is _NO_ROW else self._row_of(key)
            submit_ms = (seconds - self._t0) * 1e3
            if kind == "kernel":        # what: its name; extra: (grid, block)
                op = Op(index, kind, what, row, submit_ms, grid=extra[0], block=extra[1])
            elif kind in TIMED_KINDS:   # a copy; what: its bytes
                nbytes = int(what or 0)
                op = Op(index, kind, _size_label(kind.upper(), nbytes), row, submit_ms, nbytes=nbytes)
            else:                       # what: its label; extra: its event's key, if any
                op = Op(index, kind, what, row, submit_ms, event=extra)
            trace.append(op)

    def _note(self, kind, label, stream=None, event=None) -> None:
        """An op that is not timed (an event record or wait, a synchronization); `stream` None: no
        row (a device-wide or event synchronize). The next timed op on its stream gets its own start
        event (an event wait may hold it back past the end of the op before; after a synchronize
        its stream is idle), on every stream after a device-wide or event synchronize or default-
        stream work. An event record holds nothing back, on any stream (the window's events that
        `kernellab bench 07` records on the default stream around the call): it changes none."""
        key = _NO_ROW if stream is None else self._stream_keys.of(stream)
        self._submitted.append((kind, label, key, time.perf_counter(), event))
        if not self._ready or kind == "record":
            return
        if key is _NO_ROW or key in _SPECIAL_ROWS:
            self._ready.clear()
        else:
            self._ready.pop(key, None)

    @property
    def events(self) -> str:
        """What the timeline timed, in words (for a record that uses it)."""
        if not self.timed_kinds:
            return "no event per op: every op in the trace with its host submission time, none timed"
        kinds = "launches and copies" if self.timed_kinds == TIMED_KINDS else " and ".join(self.timed_kinds)
        if not self.infer_starts:
            return (f"a pair of CUDA events around each of its {kinds} (events reused and recorded "
                    f"through cuEventRecord); every op in the trace")
        opening = (f"; one on each of the {len(self.opening_streams)} stream(s) given, as it opened, which their "
                   f"first ops start from" if self.opening_streams else "")
        return (f"a CUDA event after each of its {kinds}, and one before it only where no timed op "
                f"came just before it on its stream (else it starts when that op ended or when it "
                f"reached the GPU, whichever is later; bounded by the host's clock){opening}; events "
                f"reused and recorded through cuEventRecord; every op in the trace")

    def _timing_brackets(self):
        """(start, end): the two halves of every timed launch and copy (a hooks.Bracket), the
        recorder's per-op path, with what they read bound once. What they cost over their floor, one
        event recorded after the call, is `kernellab bench 07`'s recorder_over_floor.

        start(kind, what, stream, dims, captured) notes the op (`what`: a kernel's name, a copy's
        bytes; `dims`: a kernel's (grid, block)) and returns its index, unless it is captured into a
        graph (not run: nothing to time yet) or its kind is not timed; it records a start event on
        the op's stream unless the op's start can be inferred (see the class). end(index) records
        the op's end event and notes when the host's submission returned (what bounds an inferred
        start).

        Per op, on the path a pipeline takes (a timed op whose start is inferred), that is all:
        start looks the stream's key up in one dict (its handle, worked out at the stream's first
        op), reads the host clock, appends one tuple of plain values to the trace's list and checks
        that the stream is ready; end takes a pooled event, records it with the driver's
        cuEventRecord directly (as the floor, `events_around`, does) and appends one tuple (the op's
        index, the event, the host clock) to a list. The hook around them (hooks' sole-Bracket way)
        reads its busy flag and describes the op. Everything else is left off this path:
        `_not_inferred` for an op whose start is not inferred (a stream's own start event, an untimed
        op), `_take_submitted` for the trace's Ops, labels and rows when it is read, `_collect` for
        which op an inferred start follows and when, once the block has ended. Each line here
        counts: a line of Python on this path cost ~0.1-0.2 us on the H200's host against ~0.02 us
        on this project's 2-core machine (2026-12-04: that host runs the driver's own work for the
        op between them). The tuples hold plain values only (no launch configuration, stream or
        array: holding those made the garbage collector's passes grow with the trace, ~1-2 us per op
        here)."""
        keys, remember = self._stream_keys, self._stream_keys.remember
        submitted, clock = self._submitted, time.perf_counter
        note, ready, timing = submitted.append, self._ready, self._timing
        spare, new_event, record = _spare_events, functools.partial(_new_event, self._cuda), self._record
        finished, not_inferred = self._ended.append, self._not_inferred

        def start(kind, what, stream, dims=None, captured=False):
            try:
                key = keys[id(stream)]
            except KeyError:
                key = remember(stream)
            index = len(submitted)
            note((kind, what, key, clock(), dims))
            if key in ready and kind in timing and not captured:
                return index
            return not_inferred(index, kind, key, captured)

        def end(index):
            if index is not None:
                ended = spare.pop() if spare else new_event()
                if record(ended[1], submitted[index][2]):
                    raise RuntimeError(f"cuEventRecord failed on stream handle {submitted[index][2]}")
                finished((index, ended, clock()))
        return start, end

    def _not_inferred(self, index: int, kind: str, key, captured: bool) -> int | None:
        """start's path for an op whose start is not inferred: one not timed (captured into a graph,
        or of a kind not timed: the op after it on its stream gets a start event of its own; None),
        or a timed op with a start event of its own, recorded here on its stream (its index)."""
        ready = self._ready
        if captured or kind not in self._timing:
            if ready and key in _SPECIAL_ROWS:
                ready.clear()
            elif ready:
                ready.pop(key, None)
            return None
        started = self._own_starts[index] = _spare_events.pop() if _spare_events else _new_event(self._cuda)
        if self._record(started[1], key):
            raise RuntimeError(f"cuEventRecord failed on stream handle {key}")
        if self.infer_starts:
            if key in _SPECIAL_ROWS:   # the default streams wait for the others, and they for
                ready.clear()          # them: no start is inferred across default-stream work
            else:
                ready[key] = True
        return index

    def _noting(self):
        """The trace-only per-op path (`timed=()`, or the simulator): the op noted and nothing else,
        with what that reads bound once."""
        keys, remember = self._stream_keys, self._stream_keys.remember
        append, clock = self._submitted.append, time.perf_counter

        def note(kind, what, stream, dims=None, captured=False):
            try:
                key = keys[id(stream)]
            except KeyError:
                key = remember(stream)
            append((kind, what, key, clock(), dims))
        return note

    def _event_key(self, event) -> int:
        self._keep.append(event)
        return id(event)

    def _handlers(self) -> dict:
        """What the timeline notes, per numba-cuda operation (see kernellab.gpu.hooks): launches and
        copies as Brackets (the per-op path), the rest around the call."""
        start, end = self._timing_brackets() if self._timing else (self._noting(), None)

        launch = functools.partial(start, "kernel")   # (name, stream, dims, captured): no frame of its own

        # A copy's bytes are noted as the array gives them (made an int when the trace is read); a
        # device array's copy comes described, (kind, bytes, stream): its Bracket's before is `start`.
        def to_device(obj, stream=0, copy=True, to=None):
            return start("h2d", getattr(obj, "nbytes", 0), stream) if copy else None

        def record(proceed, event, stream=0):
            self._note("record", "event record", stream or 0, self._event_key(event))
            return proceed()

        def wait(proceed, event, stream=0):
            self._note("wait", "event wait", stream or 0, self._event_key(event))
            return proceed()

        def event_sync(proceed, event):
            self._note("event_sync", "event synchronize", event=self._event_key(event))
            return proceed()

        def stream_sync(proceed, stream):
            self._note("stream_sync", "stream synchronize", stream)
            return proceed()

        def device_sync(proceed):
            self._note("device_sync", "cuda.synchronize")
            return proceed()

        timed = {hooks.LAUNCH: launch, "to_device": to_device, "copy_to_device": start, "copy_to_host": start}
        return {**{op: hooks.Bracket(before, end) for op, before in timed.items()},
                "event_record": record, "event_wait": wait, "event_synchronize": event_sync,
                "stream_synchronize": stream_sync, "synchronize": device_sync}

    def __enter__(self) -> Timeline:
        if Timeline._active is not None:
            raise RuntimeError("Timelines do not nest: close the open one first")
        Timeline._active = self
        self._t0 = time.perf_counter()
        self.inside_capture = hooks.launches_replaced()
        self.timed = self.timed and not self.inside_capture   # captured work does not run
        try:
            if self.timed:
                self._cuda = cuda = device.cuda()
                self._record = _event_recorder()
                self._timing = self.timed_kinds
                self._origin = _spare_event(cuda)
                origin_stream = cuda.stream()
                self._origin_host = time.perf_counter()   # the origin fires after this
                self._origin[0].record(origin_stream)
                self._open_streams(cuda)
            self._subscription = hooks.subscribe(**self._handlers())
            self._subscription.__enter__()
            if self.record_uses:   # inside the timeline's own: each op is noted before its uses
                self._use_subscription = hooks.subscribe(**self._use_handlers())
                self._use_subscription.__enter__()
        except BaseException:
            Timeline._active = None
            raise
        return self

    def _open_streams(self, cuda) -> None:
        """An event on each of `streams` now, before the measured work: the op before each one's
        first op (see the class)."""
        for stream in self.opening_streams:
            key = self._stream_keys.of(stream)
            if key in self._opened:     # given twice
                continue
            opened = self._opened[key] = _spare_event(cuda)
            if self._record(opened[1], key):
                raise RuntimeError(f"cuEventRecord failed on stream handle {key}")
            self._ready[key] = True

    def __exit__(self, *exc):
        try:
            if self.record_uses:
                self._use_subscription.__exit__(*exc)
            self._subscription.__exit__(*exc)
        finally:
            Timeline._active = None
        if self.timed:
            try:
                if exc[0] is None:
                    device.cuda().synchronize()
                    self._data = self._collect()
            finally:
                spare = [self._origin, *self._opened.values(), *self._own_starts.values(),
                         *(ended for _, ended, _ in self._ended)]
                for held in (self._opened, self._own_starts, self._ended, self._ready):
                    held.clear()
                _spare_events.extend(spare[:max(0, SPARE_EVENTS_KEPT - len(_spare_events))])
        return False

    def _collect(self) -> TimelineData:
        """The spans of the timed ops. An op with no start event of its own had, on its stream, a
        timed op just before it or the stream's opening event (the per-op path records one otherwise):
        it starts at that op's end, or when its submission returned if that was later."""
        elapsed = functools.partial(device.cuda().event_elapsed_time, self._origin[0])
        submitted, own_starts = self._submitted, self._own_starts
        latest_end = {key: elapsed(opened[0]) for key, opened in self._opened.items()}   # per stream, ms
        times, bounds = {}, {}    # bounds: per inferred start, how much earlier it may have been, ms
        for index, ended, returned in sorted(self._ended):     # in the order the ops were submitted
            key, end_ms = submitted[index][2], elapsed(ended[0])
            own = own_starts.get(index)
            if own is not None:
                times[index] = (elapsed(own[0]), end_ms)
            else:       # inferred: from the op before's end (no end if that op raised: from the origin)
                before = latest_end.get(key, 0.0)
                latest = min(end_ms, (returned - self._origin_host) * 1e3)
                bounds[index] = max(0.0, latest - before)
                times[index] = (before + bounds[index], end_ms)
            latest_end[key] = end_ms
        uncertain = [b for b in bounds.values() if b > 0]
        self._starts = {"own_event": len(times) - len(bounds), "inferred": len(bounds) - len(uncertain),
                        "uncertain": len(uncertain), "uncertain_max_us": 1e3 * max(uncertain, default=0.0)}
        zero = min((t[0] for t in times.values()), default=0.0)
        spans = tuple(Span(op.label, op.row, op.kind, times[op.index][0] - zero,
                           times[op.index][1] - zero, submit_ms=op.submit_ms,
                           start_uncertain_ms=bounds.get(op.index) or None)
                      for op in self.trace if op.index in times)
        source = self.source or f"measured on {device.facts().name}"
        return TimelineData(spans, tuple(dict.fromkeys(s.row for s in spans)), source)

    def _use_handlers(self) -> dict:
        """What each launch and copy read and wrote, for `races` and `pageable_copies`: a
        kernel's array arguments as the traffic meter saw that launch use them, a copy's two sides."""
        def use(array, writes: bool, what: str, where: str) -> Use:
            self._keep.append(array)   # alive to the end: a freed buffer's address is reused
            return _use(array, writes, what, where)

        def current(*kinds) -> Op | None:
            """The op the timeline just noted for this call (None where it noted none)."""
            op = self.trace[-1] if self.trace else None
            return op if op is not None and op.kind in kinds and op.index not in self.uses else None

        def launch(proceed, kernel: hooks.KernelLaunch):
            op = current("kernel")
            if op is None or kernel.captured:
                return proceed()
            where = _submitted_at(sys._getframe(1))
            arrays = [(i, a) for i, a in enumerate(kernel.args) if hasattr(a, "copy_to_host")]
            metered = {}          # allocation -> (its meter name, its first argument)
            for i, array in arrays:
                metered.setdefault(traffic.buffer_address(array), (f"argument {i}", array))
            with traffic.meter(**dict(metered.values())) as count:
                result = proceed()
            uses = []
            for i, array in arrays:
                seen = count[metered[traffic.buffer_address(array)][0]]
                if seen.reads or seen.writes:
                    uses.append(use(array, bool(seen.writes), f"argument {i}", where))
            self.uses[op.index] = uses
            return result

        def copy_to_device(proceed, array, source, stream=0):
            op = current("h2d", "d2d")
            if op is not None:
                where = _submitted_at(sys._getframe(1))
                self.uses[op.index] = [use(array, True, "destination", where),
                                       use(source, False, "source", where)]
            return proceed()

        def copy_to_host(proceed, array, ary=None, stream=0):
            op = current("d2h")
            result = proceed()
            if op is not None:
                where = _submitted_at(sys._getframe(1))
                self.uses[op.index] = [use(array, False, "source", where),
                                       use(result if ary is None else ary, True, "destination", where)]
            return result

        def to_device(proceed, obj, stream=0, copy=True, to=None):
            op = current("h2d") if copy else None
            result = proceed()
            if op is not None:
                where = _submitted_at(sys._getframe(1))
                self.uses[op.index] = [use(result, True, "destination", where),
                                       use(obj, False, "source", where)]
            return result

        return {hooks.LAUNCH: launch, "copy_to_device": copy_to_device,
                "copy_to_host": copy_to_host, "to_device": to_device}

    def _uses_recorded(self):
        if not self.record_uses:
            raise RuntimeError("open the timeline with record_uses=True (simulator) to check uses")

    def races(self) -> list[Race]:
        """Every pair of ops that touch the same bytes, one writing, that no stream order, event
        or synchronization orders (ops on one stream are always ordered)."""
        self._uses_recorded()
        dependencies = self.trace.dependencies()
        found = []
        ops = sorted(self.uses)
        for later_at, later in enumerate(ops):
            for earlier in ops[:later_at]:
                if dependencies[later] >> earlier & 1:
                    continue
                pair = next(((u, v) for u in self.uses[earlier] for v in self.uses[later]
                             if (u.writes or v.writes) and u.overlaps(v)), None)
                if pair:
                    found.append(Race(self.trace[earlier], self.trace[later], *pair))
        return found

    def pageable_copies(self, pinned=()) -> list[tuple[Op, Use]]:
        """The copies whose host side is not one of the page-locked arrays `pinned` (the
        simulator cannot tell page-locked memory from any other, so the caller names it): each
        makes the host wait until the copy is done, whatever stream it was given."""
        self._uses_recorded()
        locked = {traffic.buffer_address(array) for array in pinned}
        return [(self.trace[index], use) for index, uses in self.uses.items() for use in uses
                if use.host and use.buffer not in locked]

    # results ------------------------------------------------------------------------------------
    @property
    def data(self) -> TimelineData:
        """The measured spans; raises timing.NoTiming in the simulator."""
        if self.inside_capture:
            raise RuntimeError(INSIDE_CAPTURE)
        if not self.timed:
            raise NoTiming("Timeline.data")
        if self._data is None:
            raise RuntimeError("the timeline has no data until its `with` block has ended")
        return self._data

    def start_sources(self) -> dict:
        """How each timed op's start was taken: "own_event" (a start event before it), "inferred"
        (the end of the op before it on its stream, which ended after the host had submitted this
        one), "uncertain" (the op before may have ended before this one reached the GPU: it is shown
        starting when the host had submitted it, and may have begun earlier, back to the op before's
        end, by at most `uncertain_max_us` for the widest)."""
        self.data                      # raises where nothing was timed
        return dict(self._starts)

    def host_ms_per_launch(self) -> float:
        """Median host time between consecutive launch submissions (what launching costs here)."""
        submits = [op.submit_ms for op in self.trace.kernels()]
        steps = sorted(b - a for a, b in zip(submits, submits[1:]))
        return steps[len(steps) // 2] if steps else 0.0

    def report(self) -> str:
        waits = f"{len(self.trace.host_waits())} host synchronization(s)"
        if self.inside_capture:
            return f"{INSIDE_CAPTURE}\n  {len(self.trace.kernels())} kernels captured"
        if not self.timed:
            return f"{no_timing_message(self.trace)}\n  {waits}"
        return (f"{self.data.summary()}\n  host: {self.host_ms_per_launch() * 1e3:.1f} us between "
                f"launch submissions, {waits}")


class Makespan:
    """The GPU's makespan of the launches and copies made inside the block, from when the first
    op's stream reached it to when the last op ended, with one event before the block's first op
    and one per stream after its last (recorded just before the host synchronizes that stream or
    the device, or when the block ends), none per op. The host's time before the first op is left
    out, and copies run with no event between them: a Timeline's events around each copy slowed Lab
    07's pipeline by ~14% on the H200 (2026-12-02), and a window opened on the host
    before the call counts the host's first submission in each of the ways it compares (`kernellab
    bench 07`). Only the first op gets a start event, submitted while nothing of the block runs: a
    timing event on another stream's first op, submitted while the block's copies were in flight,
    held that stream's copy back in some reps (docs/measuring.md). An op on another stream starts
    after the host submitted it, after the first op; so the first op's start is the block's, unless
    its stream was still busy with work from before the block. GPU only: `makespan_ms` raises
    NoTiming in the simulator.

    `streams`: the streams the block's work runs on, declared, so that only its first op is
    watched: once that op is submitted the watch on launches and copies closes (numba-cuda's own
    calls are put back), and the ops after it run exactly as bare, with nothing of kernellab's on
    their path. Each declared stream then gets its end event when the host first synchronizes it
    (or the device) after the first op, or when the block ends: for blocks that synchronize each
    of their streams once, at their end, as Lab 07's pipelines do. Declare only streams the block
    uses: an end event on a stream with no work of the block fires when the host recorded it."""

    def __init__(self, streams=()):
        self.timed = not device.is_simulator()
        self._start = None            # (event, handle) before the block's first op, on its stream
        self._ends: dict = {}         # stream key -> its latest end event
        self._pending: set = set()    # streams with ops since their latest end event
        self._keys = _StreamKeys()
        self._declared = tuple(streams)
        self._op_watch = None         # with `streams`: the watch on launches and copies, until the first op
        self._outside_declared = None  # with `streams`: the first op's stream, if it was not declared
        self._makespan_ms: float | None = None

    def _recorded(self, key):
        event = _spare_event(self._cuda)
        if self._record(event[1], key):
            raise RuntimeError(f"cuEventRecord failed on stream handle {key}")
        return event

    def _close(self, keys) -> None:
        for key in [k for k in keys if k in self._pending]:
            self._pending.discard(key)
            if key in self._ends:
                _spare_events.append(self._ends[key])
            self._ends[key] = self._recorded(key)

    def _handlers(self) -> dict:
        """The op handlers (launch, copies) and the synchronize ones, in one dict."""
        keys, pending = self._keys, self._pending

        def op(stream) -> None:       # every op's one frame of its own: it is what the block costs per op
            key = keys.get(id(stream))                     # _StreamKeys.of, in this frame
            if key is None:
                key = keys.remember(stream)
            if self._start is None:
                self._start = self._recorded(key)
                if self._declared:    # every declared stream ends with the block; no op after this is seen
                    declared = {keys.of(s) for s in self._declared}
                    pending.update(declared)
                    if key not in declared:
                        self._outside_declared = stream
            pending.add(key)
        after = self._stop_watching_ops if self._declared else None

        def launch(name, stream, dims, captured):
            if not captured:            # recorded into a graph, not run
                op(stream)

        def to_device(obj, stream=0, copy=True, to=None):
            if copy:
                op(stream)

        def copy(kind, nbytes, stream):   # a device array's copy, described (hooks.described_copy)
            op(stream)

        def stream_sync(proceed, stream):
            self._close([self._keys.of(stream)])
            return proceed()

        def device_sync(proceed):
            self._close(list(self._pending))
            return proceed()
        return {hooks.LAUNCH: hooks.Bracket(launch, after), "to_device": hooks.Bracket(to_device, after),
                "copy_to_device": hooks.Bracket(copy, after), "copy_to_host": hooks.Bracket(copy, after),
                "stream_synchronize": stream_sync, "synchronize": device_sync}

    def _stop_watching_ops(self, _token=None) -> None:
        """With `streams`: once the first op is submitted, close the watch on launches and copies."""
        if self._start is not None and self._op_watch is not None:
            watch, self._op_watch = self._op_watch, None
            watch.__exit__(None, None, None)

    def __enter__(self) -> Makespan:
        if self.timed:
            self._cuda, self._record = device.cuda(), _event_recorder()
            handlers = self._handlers()
            syncs = {name: handlers.pop(name) for name in ("stream_synchronize", "synchronize")}
            self._subscription = hooks.subscribe(**syncs)
            self._subscription.__enter__()
            try:
                self._op_watch = hooks.subscribe(**handlers)
                self._op_watch.__enter__()
            except BaseException:
                self._subscription.__exit__(None, None, None)
                raise
        return self

    def __exit__(self, *exc):
        if not self.timed:
            return False
        if self._op_watch is not None:    # open still: no declared streams, or no op was submitted
            self._op_watch.__exit__(*exc)
        self._subscription.__exit__(*exc)
        try:
            if exc[0] is None and self._outside_declared is not None:
                raise ValueError(f"Makespan(streams=...): the block's first op ran on "
                                 f"{self._outside_declared!r}, which is not one of the streams given")
            if exc[0] is None and self._start is not None:
                self._close(list(self._pending))
                self._cuda.synchronize()
                self._makespan_ms = max(self._cuda.event_elapsed_time(self._start[0], e[0])
                                        for e in self._ends.values())
        finally:
            events = [*([self._start] if self._start else []), *self._ends.values()]
            _spare_events.extend(events[:max(0, SPARE_EVENTS_KEPT - len(_spare_events))])
        return False

    @property
    def streams(self) -> int:
        """How many streams got ops inside the block (with `streams` declared: how many were given)."""
        return len(self._pending.union(self._ends))

    @property
    def makespan_ms(self) -> float:
        if not self.timed:
            raise NoTiming("Makespan.makespan_ms")
        if self._makespan_ms is None:
            raise RuntimeError("the makespan exists once its `with` block has ended, with a launch or copy in it")
        return self._makespan_ms


# --- what the recorder costs: `kernellab bench 07` measures it (docs/measuring.md, Lab 07) ----------

COST_METHOD = ("per op, the median over the reps of (the way's host time per call - the bare call's in the same "
               "rep): the ways taken in turn within each rep, in an order shuffled rep by rep (timing.in_turn), "
               f"each sample's first {timing.SETTLE_CALLS} calls made inside its context before its clock starts; "
               "events reserved before")


def windows_in_turn(ways: dict, reps: int, warmup: int = 2) -> dict[str, dict[str, list[float]]]:
    """Each way's window in ms (two events on the default stream around its call) and, for a way
    opened in a Makespan, its makespan too; the ways taken in turn within every rep, in an order
    shuffled rep by rep (timing.in_turn), so a host whose speed drifts moves every way alike and a
    figure made from one rep's samples compares like with like. `ways`: name -> (a context opened
    around the window, the call). Warm-ups dropped. GPU only."""
    cuda = device.cuda()
    figures = {name: {"window": []} for name in ways}
    for rep, name in timing.in_turn(list(ways), warmup + reps):
        opened, call = ways[name]
        start, end = cuda.event(timing=True), cuda.event(timing=True)   # made outside the window
        cuda.synchronize()
        with opened() as instrument:
            start.record()
            call()
            end.record()
        end.synchronize()
        if rep >= warmup:
            figures[name]["window"].append(cuda.event_elapsed_time(start, end))
            if isinstance(instrument, Makespan):
                figures[name].setdefault("makespan", []).append(instrument.makespan_ms)
    return figures


def recorder_cost(calls: dict, stream, reps: int = 150, inner: int = 100) -> dict:
    """What a Timeline(infer_starts=True) on `stream` (one event after each op) costs the host per
    call over the call bare, and its floor: the call with one event recorded after it, as the
    recorder records it, with no hook and no trace (`events_around`). `calls`: name -> a
    call on `stream`. Per call: `bare_us` and, per way, `<way>_over_bare_us` (the median paired
    difference, COST_METHOD) and `<way>_over_bare_spread_us`. GPU only."""
    recorder = functools.partial(Timeline, infer_starts=True, streams=(stream,))
    ways = {"bare": (contextlib.nullcontext, None), "inferred_starts": (recorder, None),
            "event_after_only": (contextlib.nullcontext, lambda call: events_around(call, stream, before=False))}
    reserve_events(reps * (inner + timing.SETTLE_CALLS) + inner)

    def spread(values) -> dict:
        return {"median": float(np.median(values)), "p10": float(np.percentile(values, 10)),
                "p90": float(np.percentile(values, 90)), "reps": len(values)}
    result = {}
    for name, call in calls.items():
        made = {way: (opened, made_of(call) if made_of else call) for way, (opened, made_of) in ways.items()}
        taken = timing.time_host_in_turn(made, inner=inner, reps=reps, settle=timing.SETTLE_CALLS)
        over = {way: [1e3 * d for d in timing.paired(taken[way], taken["bare"])] for way in ways if way != "bare"}
        result[name] = {"bare_us": spread([1e3 * t for t in taken["bare"].samples_ms]),
                        **{f"{way}_over_bare_us": float(np.median(d)) for way, d in over.items()},
                        **{f"{way}_over_bare_spread_us": spread(d) for way, d in over.items()},
                        "method": COST_METHOD}
    return result


@functools.lru_cache(maxsize=256)
def _size_label(direction: str, nbytes: int) -> str:   # formatted once per size, not per op
    return f"{direction} {nbytes / 1e6:.3g} MB"


# --- the picture -----------------------------------------------------------------------------------

def plot_gantt(data: TimelineData, ax=None, title: str | None = None, label_spans: bool = True):
    """One row per stream, one bar per span, coloured by kind; a model's wait for SMs is hatched, and
    where a recorded start is uncertain (Timeline(infer_starts=True)) the time before it in which it
    may already have begun is dotted."""
    from kernellab.show import plots
    from matplotlib.patches import Patch

    if ax is None:
        _, ((ax,),) = plots.figure(plots.MIN_WIDTH_IN, 0.7 * len(data.rows) + 2.0)
    y = {row: i for i, row in enumerate(data.rows)}
    origin = data.start_ms if data.spans else 0.0
    for span in data.spans:
        colour = KIND_COLORS.get(span.kind, "tab:gray")
        running = span.first_block_ms if span.first_block_ms is not None else span.start_ms
        if span.start_uncertain_ms:       # it may have begun this much before its start
            earliest = max(span.start_ms - span.start_uncertain_ms, origin)
            ax.broken_barh([(earliest - origin, span.start_ms - earliest)], (y[span.row] - 0.35, 0.7),
                           facecolor="white", edgecolor=colour, hatch="...", linewidth=0.5)
        if running > span.start_ms:       # a model's wait for SMs
            ax.broken_barh([(span.start_ms - origin, running - span.start_ms)], (y[span.row] - 0.35, 0.7),
                           facecolor="white", edgecolor=colour, hatch="///", linewidth=0.5)
        ax.broken_barh([(running - origin, span.end_ms - running)], (y[span.row] - 0.35, 0.7),
                       facecolor=colour, edgecolor="white", linewidth=0.5)
        if label_spans and span.duration_ms > 0.08 * max(data.makespan_ms, 1e-12):
            ax.text((running + span.end_ms) / 2 - origin, y[span.row], span.label, ha="center",
                    va="center", fontsize="xx-small", color="white", clip_on=True)
    ax.set_yticks(range(len(data.rows)), data.rows)
    ax.set_ylim(len(data.rows) - 0.5, -0.5)
    ax.set_xlabel("time (ms)")
    kinds = dict.fromkeys(s.kind for s in data.spans)
    handles = [Patch(color=KIND_COLORS.get(k, "tab:gray"), label=k) for k in kinds]
    if any(s.start_uncertain_ms for s in data.spans):
        handles.append(Patch(facecolor="white", edgecolor="gray", hatch="...", label="start uncertain"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0))   # beside the bars, not over the last ones
    ax.set_title(title or f"{data.source}: {data.makespan_ms:.3g} ms")
    return ax


def plot_gantts(axes, timelines: list[TimelineData], titles: list[str | None] | None = None,
                label_spans: bool = False, shared: bool | None = None) -> None:
    """Timelines side by side, one per axes (`titles`: plot_gantt's, its makespan, by default).
    They share one time axis where their makespans are within SHARED_AXIS_RATIO of each other, so
    lengths compare at a glance; otherwise each has its own, and says so (a 7 ms pipeline drawn on
    the axis of an 87 ms one is a sliver). `shared=True`: one axis whatever their lengths, where
    the difference in length is the point."""
    longest = max(data.makespan_ms for data in timelines)
    if shared is None:
        shared = longest <= SHARED_AXIS_RATIO * min(data.makespan_ms for data in timelines)
    for ax, data, title in zip(axes, timelines, titles or [None] * len(timelines)):
        plot_gantt(data, ax, title=title, label_spans=label_spans)
        ax.set_xlim(0, (longest if shared else data.makespan_ms) * 1.02)
        if not shared:
            ax.set_xlabel("time (ms; this panel's own scale)")
