"""A block-scheduler model of one GPU: predict a multi-stream timeline on the CPU, before measuring.

    work = round_robin(16, streams=4, blocks=8, block_ms=1.0, blocks_per_sm=8)
    simulate(work, Machine(sm_count=132)).makespan_ms      # 4.0: 4 kernels per stream, all fit

The model, in full:
- The host submits the work in list order, one item every `host_launch_ms` (a Numba launch costs
  the host tens of microseconds: Lab 01); a synchronization stops it until the awaited work is done (`host_after`).
- An item's stream reaches it (its span starts: what a CUDA event sees) once it is submitted,
  the previous item on its stream is done and the items it waits for through events (`after`)
  are done. Its blocks may go to the SMs `launch_latency_ms` later.
- Each of `sm_count` SMs holds blocks up to each kernel's `blocks_per_sm` (from
  `kernellab.occupancy`; a kernel's block takes 1/blocks_per_sm of an SM). Ready kernels queue in
  the order they became ready; the head kernel's blocks go one per SM in turn to the SMs with
  the most room, and the next kernel gets SMs only once every block of the head is placed
  (in-order dispatch, as for streams of one priority).
- A block runs `block_ms` whatever shares its SM: true for latency-bound blocks such as a chain
  of dependent arithmetic, false for bandwidth-bound ones, which slow each other down.
- A copy holds one copy engine of its direction (`copy_engines` each) for its `block_ms`.
- Streams reach the GPU through `hardware_queues` in-order work queues (the driver's
  CUDA_DEVICE_MAX_CONNECTIONS, 8 by default): stream k (in order of first use) shares queue
  k % hardware_queues, and an item waits for the item before it in its queue, whichever stream
  that came from. None means one queue per stream. Lab 07 measures 16 small kernels on 16 streams
  at 8 connections and at 32 (its claims streams_4_8 and sixteen_streams_at_32).

`simulate` returns a `kernellab.gpu.timeline.TimelineData`, so a prediction is drawn and measured
(makespan, concurrency, idle gaps) exactly like a recorded timeline. `from_trace` turns the trace a
`Timeline` recorded (in the simulator too) into work for the model.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import math
import statistics

from kernellab.gpu import device
from kernellab import occupancy
from kernellab.gpu.timeline import TIMED_KINDS, Span, TimelineData, Trace

KINDS = TIMED_KINDS          # "kernel" and the copies "h2d", "d2h", "d2d"
CAPACITY = math.lcm(*range(1, 33))  # one SM, in units every blocks_per_sm up to 32 divides exactly


@dataclasses.dataclass(frozen=True)
class Work:
    """One kernel or copy for the model; `after`/`host_after` index earlier items in the list."""

    name: str
    row: str                       # the stream
    kind: str = "kernel"
    blocks: int = 1
    block_ms: float = 0.0          # a kernel's block, or a whole copy
    blocks_per_sm: int = 1
    after: tuple[int, ...] = ()    # waited for through events, beyond stream order
    host_after: tuple[int, ...] = ()  # the host synchronizes on these before submitting this


@dataclasses.dataclass(frozen=True)
class Machine:
    sm_count: int
    host_launch_ms: float = 0.0    # host time to submit one item
    launch_latency_ms: float = 0.0  # from an item's stream reaching it to its first block
    copy_engines: int = 1          # per direction
    hardware_queues: int | None = None  # CUDA_DEVICE_MAX_CONNECTIONS; None: one per stream


def blocks_per_sm(block_size: int, registers_per_thread: int, static_shared: int = 0,
                  dynamic_shared: int = 0, cc=None) -> int:
    """Resident blocks per SM for a kernel shape, from the occupancy calculator."""
    return occupancy.occupancy(cc or device.facts().cc, block_size, registers_per_thread,
                               static_shared, dynamic_shared).active_blocks


def round_robin(count: int, streams: int, name: str = "k", **fields) -> list[Work]:
    """`count` independent kernels, kernel k on stream k % streams (rows 'stream 1', ...)."""
    if count < 1 or streams < 1:
        raise ValueError(f"need count >= 1 and streams >= 1, got count={count}, streams={streams}")
    return [Work(f"{name}{k}", f"stream {k % streams + 1}", **fields) for k in range(count)]


def from_trace(trace: Trace, cost) -> list[Work]:
    """Work for the model from a recorded trace; `cost(op)` gives each item's Work fields
    (block_ms, blocks_per_sm, ...; blocks default to the launch's grid)."""
    timed = trace.timed()
    position = {op.index: i for i, op in enumerate(timed)}
    deps, host = trace.dependencies(), trace.host_dependencies()
    work = []
    for op in timed:
        fields = {"blocks": max(op.blocks, 1), **cost(op)}
        waited = [position[j.index] for j in timed if j.index < op.index and host[op.index] >> j.index & 1]
        after = [position[j.index] for j in timed if j.index < op.index and deps[op.index] >> j.index & 1
                 and j.row != op.row and position[j.index] not in waited]   # stream order is implied
        work.append(Work(op.label, op.row, op.kind, after=tuple(after), host_after=tuple(waited),
                         **fields))
    return work


def _check(work: list[Work], machine: Machine):
    if machine.sm_count < 1 or machine.copy_engines < 1:
        raise ValueError(f"a machine needs sm_count >= 1 and copy_engines >= 1: {machine}")
    if machine.hardware_queues is not None and machine.hardware_queues < 1:
        raise ValueError(f"a machine needs hardware_queues >= 1 (or None): {machine}")
    if machine.host_launch_ms < 0 or machine.launch_latency_ms < 0:
        raise ValueError(f"host_launch_ms and launch_latency_ms must be >= 0: {machine}")
    for i, w in enumerate(work):
        if w.kind not in KINDS:
            raise ValueError(f"work {i} ({w.name}): kind must be one of {KINDS}, not {w.kind!r}")
        if w.block_ms < 0 or w.blocks < 1:
            raise ValueError(f"work {i} ({w.name}): need blocks >= 1 and block_ms >= 0")
        if w.kind == "kernel" and not 1 <= w.blocks_per_sm <= 32:
            raise ValueError(f"work {i} ({w.name}): blocks_per_sm is {w.blocks_per_sm}; a kernel "
                             "with 0 blocks per SM cannot run (check its occupancy), and no SM "
                             "holds more than 32")
        if any(not 0 <= j < i for j in (*w.after, *w.host_after)):
            raise ValueError(f"work {i} ({w.name}): after/host_after must name earlier work")


def simulate(work, machine: Machine, source: str = "block-scheduler model") -> TimelineData:
    """Predict when each item starts and ends; see the module docstring for the rules."""
    work = list(work)
    _check(work, machine)
    n = len(work)
    streams = list(dict.fromkeys(w.row for w in work))
    queue_of = {row: k % machine.hardware_queues if machine.hardware_queues else k
                for k, row in enumerate(streams)}
    previous, last_in_queue = [None] * n, {}
    for i, w in enumerate(work):
        previous[i] = last_in_queue.get(queue_of[w.row])
        last_in_queue[queue_of[w.row]] = i
    waits_for = [tuple(j for j in (previous[i], *w.after) if j is not None) for i, w in enumerate(work)]

    submit, start, first, end = [None] * n, [None] * n, [None] * n, [None] * n
    undispatched = [w.blocks for w in work]
    in_flight = [0] * n
    free = [CAPACITY] * machine.sm_count
    engines = collections.defaultdict(lambda: [0.0] * machine.copy_engines)  # when each frees up
    kernel_queue, copy_queue = [], collections.defaultdict(list)
    completions, sequence = [], 0          # heap of (time, seq, item, {sm: blocks} or None)
    host_time, host_next, waiting = 0.0, 0, set(range(n))
    now = 0.0

    def place(count: int, cost: int) -> dict:
        """Blocks to SMs one at a time, the roomiest SMs first (breadth-first, as the hardware)."""
        placed = collections.Counter()
        while count:
            fits = sorted((j for j in range(machine.sm_count) if free[j] >= cost),
                          key=lambda j: (-free[j], j))[:count]
            if not fits:
                break
            for j in fits:
                free[j] -= cost
                placed[j] += 1
            count -= len(fits)
        return placed

    while any(e is None for e in end):
        # the host submits what it can; it runs ahead of the GPU unless it synchronizes
        while host_next < n and all(end[j] is not None for j in work[host_next].host_after):
            submit[host_next] = max([host_time] + [end[j] for j in work[host_next].host_after])
            host_time = submit[host_next] + machine.host_launch_ms
            host_next += 1
        # items whose stream reaches them now join the kernel queue or a copy engine's queue
        upcoming = []
        for i in sorted(waiting):
            if submit[i] is None or any(end[j] is None for j in waits_for[i]):
                continue
            reached = max([submit[i]] + [end[j] for j in waits_for[i]])
            dispatchable = reached + machine.launch_latency_ms
            if dispatchable > now:
                upcoming.append(dispatchable)
                continue
            waiting.discard(i)
            start[i] = reached
            (kernel_queue if work[i].kind == "kernel" else copy_queue[work[i].kind]).append(i)
        for kind, queue in copy_queue.items():
            free_at = engines[kind]
            while queue and min(free_at) <= now:
                i, engine = queue.pop(0), free_at.index(min(free_at))
                first[i] = now
                free_at[engine] = now + work[i].block_ms
                heapq.heappush(completions, (free_at[engine], sequence := sequence + 1, i, None))
        while kernel_queue:
            i = kernel_queue[0]
            placed = place(undispatched[i], CAPACITY // work[i].blocks_per_sm)
            if placed:
                first[i] = now if first[i] is None else first[i]
                undispatched[i] -= sum(placed.values())
                in_flight[i] += sum(placed.values())
                heapq.heappush(completions, (now + work[i].block_ms, sequence := sequence + 1, i, placed))
            if undispatched[i]:
                break                                      # in-order dispatch: the head blocks the rest
            kernel_queue.pop(0)
        times = ([completions[0][0]] if completions else []) + upcoming
        if not times:
            if any(e is None for e in end):
                raise RuntimeError("the model is stuck: work waits for something that never ends")
            break
        now = min(times)
        while completions and completions[0][0] <= now:
            _, _, i, placed = heapq.heappop(completions)
            if placed is None:
                end[i] = now
                continue
            for j, count in placed.items():
                free[j] += count * (CAPACITY // work[i].blocks_per_sm)
            in_flight[i] -= sum(placed.values())
            if not in_flight[i] and not undispatched[i]:
                end[i] = now

    spans = tuple(Span(w.name, w.row, w.kind, start[i], end[i], first_block_ms=first[i],
                       submit_ms=submit[i]) for i, w in enumerate(work))
    return TimelineData(spans, tuple(dict.fromkeys(w.row for w in work)), source)


def stream_gap_ms(data: TimelineData) -> float:
    """Median idle time between consecutive spans of one stream: the GPU's per-launch gap, the
    model's `launch_latency_ms` (signed: a negative one means the events overlap, a measurement
    problem the record keeps)."""
    spans = sorted(data.spans, key=lambda s: s.start_ms)
    gaps = [b.start_ms - a.end_ms for a, b in zip(spans, spans[1:])]
    return float(statistics.median(gaps)) if gaps else 0.0


# --- a chunked copy/compute pipeline, issued in an order -------------------------------------------

ISSUE_ORDERS = ("depth_first", "breadth_first")


def issue_in_order(order: str, bounds, streams, *submits) -> None:
    """Each of `submits` (lo, hi, stream) for every chunk, chunk c on streams[c % S]: depth first, chunk
    after chunk; breadth first, the first submit for every chunk, then the second, and so on."""
    chunks = [(lo, hi, streams[c % len(streams)]) for c, (lo, hi) in enumerate(bounds)]
    if order not in ISSUE_ORDERS:
        raise ValueError(f"no issue order {order!r} (orders: {', '.join(ISSUE_ORDERS)})")
    for submit, chunk in ([(f, c) for c in chunks for f in submits] if order == "depth_first"
                          else [(f, c) for f in submits for c in chunks]):
        submit(*chunk)


def pipeline_ms(order: str, streams: int, chunks: int, copy_ms: float, kernel_ms: float, sm_count: int) -> float:
    """The model's time for a chunked pipeline (each chunk's copy in, kernel and copy out) issued in
    `order` (issue_in_order) with a host that costs nothing: each copy `copy_ms` on its direction's
    one engine, each kernel `kernel_ms` on every SM, so only each stream's order and the engines decide."""
    work = []
    rows = [f"stream {s + 1}" for s in range(streams)]
    issue_in_order(order, [(c, c + 1) for c in range(chunks)], rows,
                   lambda c, _, row: work.append(Work(f"copy in {c}", row, "h2d", block_ms=copy_ms)),
                   lambda c, _, row: work.append(Work(f"kernel {c}", row, blocks=sm_count, block_ms=kernel_ms)),
                   lambda c, _, row: work.append(Work(f"copy out {c}", row, "d2h", block_ms=copy_ms)))
    return simulate(work, Machine(sm_count)).makespan_ms
