"""Timing on the GPU with CUDA events: warm-up, many repetitions, the median and its spread.

Every event window holds GPU work only: `time_gpu` puts a hold kernel ahead of each sample so the
host's submit happens while the GPU is busy, and counts the samples where it was not hidden.
`ceilings()` measures the run's ceilings once per process (copy, stream kernels at other read:write
mixes, FP32 FMA, launch floor, with torch's/CuPy's copy beside them); `ceiling_for_mix` picks the
bandwidth ceiling of a kernel's own read:write mix from them. The simulator has no clock worth reading (its events return
-1), so every function here raises `NoTiming` there; callers say so in their output instead of
printing a made-up figure.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import statistics
import time
from typing import Callable

import numpy as np

from kernellab.gpu import device

cuda = device.cuda()


class NoTiming(RuntimeError):
    """Raised in simulator mode: there is no GPU clock to read."""

    def __init__(self, what: str = "timing"):
        super().__init__(f"{what}: the CUDA simulator runs each thread in Python and has no GPU "
                         "clock; no timing exists in simulator mode (see data/reference/ for "
                         "recorded H200 measurements)")


@dataclasses.dataclass(frozen=True)
class Timing:
    """Per-repetition times in milliseconds, and how many samples had host time inside them."""

    samples_ms: tuple[float, ...]
    host_exposed: int = 0          # samples whose host submit outlasted the hold (see time_gpu)
    settle_ms: tuple[float, ...] = ()   # per sample, its settling calls' time (see time_host_in_turn)
    settle_calls: int = 0               # how many settling calls each sample made

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples_ms)

    @property
    def p10_ms(self) -> float:
        return float(np.percentile(self.samples_ms, 10))

    @property
    def p90_ms(self) -> float:
        return float(np.percentile(self.samples_ms, 90))

    @property
    def spread(self) -> float:
        """(p90 - p10) / median: the run-to-run noise a difference must beat."""
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms else float("nan")

    def as_dict(self) -> dict:
        return {"median_ms": self.median_ms, "p10_ms": self.p10_ms, "p90_ms": self.p90_ms,
                "reps": len(self.samples_ms), "host_exposed": self.host_exposed}

    def __str__(self) -> str:
        exposed = f", host submit inside {self.host_exposed} samples" if self.host_exposed else ""
        return (f"{self.median_ms:.4f} ms (p10-p90 {self.p10_ms:.4f}-{self.p90_ms:.4f}, "
                f"n={len(self.samples_ms)}{exposed})")


def require_gpu(what: str = "timing"):
    if device.is_simulator():
        raise NoTiming(what)


HOLD_MAX_MS = 50.0      # the longest hold put ahead of one sample
HOLD_MARGIN = 1.5       # a hold lasts this many times the host's submit time of one sample


def time_gpu(fn, *, warmup: int = 5, reps: int = 50, inner: int = 1, stream=0,
             setup=None, hide_host: bool = True) -> Timing:
    """Time `fn()` with CUDA events on `stream`; each sample is the mean of `inner` back-to-back calls.

    Host submit stays outside the window: before each sample a hold kernel on `stream` keeps the
    GPU busy while the host submits the start event, the `inner` calls and the stop event, so the
    start event fires when the hold ends and the GPU then finds the calls already queued. (Without
    it, `inner=1` put ~18 us of Numba launch cost inside every sample.) The hold lasts
    HOLD_MARGIN x the host's submit time measured in the warm-up; a sample whose submission took
    longer than its hold is counted in `host_exposed`, never hidden. Work on other blocking
    streams waits for a hold on the default stream too. `hide_host=False` leaves the hold out,
    for the measurements whose subject is the host's pacing (eager launches, whose gaps are the
    host's submit time): the window then runs from the first submit to the last kernel's end.
    `setup(rep)` runs before each sample, outside the timed region (e.g. to rotate input sets).
    """
    require_gpu("time_gpu")
    submit_ms = []
    for rep in range(warmup):
        if setup:
            setup(rep)
        cuda.synchronize()
        started = time.perf_counter()
        fn()
        submit_ms.append((time.perf_counter() - started) * 1e3)
    cuda.synchronize()
    per_call = statistics.median(submit_ms) if submit_ms else 0.05
    hold_ms = min(HOLD_MAX_MS, HOLD_MARGIN * inner * per_call + 0.02)
    hold = hold_gpu(hold_ms, stream) if hide_host else (lambda: None)
    start, stop = cuda.event(timing=True), cuda.event(timing=True)
    samples, exposed = [], 0
    for rep in range(reps):
        if setup:
            setup(rep)
        hold()
        started = time.perf_counter()
        start.record(stream)
        for _ in range(inner):
            fn()
        stop.record(stream)
        submitted = (time.perf_counter() - started) * 1e3
        stop.synchronize()
        elapsed = cuda.event_elapsed_time(start, stop)
        exposed += hide_host and submitted > hold_ms + elapsed * (inner - 1) / inner
        samples.append(elapsed / inner)
    return Timing(tuple(samples), exposed)


@functools.cache
def _hold():

    @cuda.jit
    def hold_kernel(iterations, sink):
        value = sink[0]
        for _ in range(iterations):
            value = value * 0.999999 + 1e-6    # a dependent chain: each step waits for the last
        sink[0] = value

    return hold_kernel


_HOLD_PROBE = 1 << 20


@functools.cache
def _hold_iterations_per_ms() -> float:
    """The hold kernel's speed, timed once per process with plain events (it outlasts its submit)."""
    kernel, sink = _hold(), _hold_sink()
    kernel[1, 1](_HOLD_PROBE, sink)
    start, stop = cuda.event(timing=True), cuda.event(timing=True)
    samples = []
    for _ in range(3):
        start.record()
        kernel[1, 1](_HOLD_PROBE, sink)
        stop.record()
        stop.synchronize()
        samples.append(cuda.event_elapsed_time(start, stop))
    return _HOLD_PROBE / statistics.median(samples)


@functools.cache
def _hold_sink():
    return cuda.to_device(np.ones(1, dtype=np.float32))


def hold_gpu(milliseconds: float, stream=0) -> Callable[[], None]:
    """A function that keeps the GPU busy for about `milliseconds` on `stream`."""
    require_gpu("hold_gpu")
    kernel, sink = _hold(), _hold_sink()
    iterations = max(1, int(_hold_iterations_per_ms() * milliseconds))
    return lambda: kernel[1, 1, stream](iterations, sink)


def time_host(submit: Callable[[], None], *, inner: int = 100, reps: int = 30,
              warmup: int = 3) -> Timing:
    """Host time per `submit()` call (e.g. a launch), each sample starting from an idle GPU.

    Every sample starts after a synchronize, so work queued by earlier samples cannot fill the
    launch queue and make the host wait: what is timed is submission. Keep the GPU work of
    `inner` calls short enough to queue without blocking. GPU only.
    """
    require_gpu("time_host")
    for _ in range(warmup):
        submit()
    samples = []
    for _ in range(reps):
        cuda.synchronize()
        started = time.perf_counter()
        for _ in range(inner):
            submit()
        samples.append((time.perf_counter() - started) * 1e3 / inner)
    cuda.synchronize()
    return Timing(tuple(samples))


def time_host_beyond(whole: Callable[[], None], part: Callable[[], None], *, inner: int = 20,
                     reps: int = 30, warmup: int = 3) -> dict[str, Timing]:
    """Host time per call of `whole`, of `part` (what `whole` does besides something else: its
    launches, say), and of the rest, `whole` minus `part`, from paired samples.

    Each rep times `inner` calls of each, back to back, each block from an idle GPU (as
    `time_host`), in alternating order; the rest's sample is the difference within the pair, so
    drift between reps cancels and its p10-p90 is the spread of the difference itself (a
    difference of two medians would have none). GPU only; keep the GPU work of `inner` calls
    short enough to queue without blocking."""
    require_gpu("time_host_beyond")
    for _ in range(warmup):
        whole()
        part()

    def per_call(fn) -> float:
        cuda.synchronize()
        started = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - started) * 1e3 / inner

    wholes, parts = [], []
    for rep in range(reps):
        if rep % 2:
            parts.append(per_call(part))
            wholes.append(per_call(whole))
        else:
            wholes.append(per_call(whole))
            parts.append(per_call(part))
    cuda.synchronize()
    return {"whole": Timing(tuple(wholes)), "part": Timing(tuple(parts)),
            "rest": Timing(tuple(w - p for w, p in zip(wholes, parts)))}


IN_TURN_SEED = 18


def in_turn(names: list, reps: int, seed: int = IN_TURN_SEED):
    """(rep, name) for every rep, each rep taking every name once, in an order shuffled rep by rep
    (a seeded permutation, the same on every run): no way always follows the same one. A rotation
    did that, and a way's place then moved its figure: on the lent H200 a bare launch taken right
    after a closed Timeline read +0.4-1.2 us per call (a copy +1.2-2.7) over the bare one taken
    first, and -0.8 to +0.5 in shuffled orders (docs/measuring.md): what a closed Timeline leaves
    behind is paid by the sample after it, whichever way that is (its first ~20 calls, timed call by
    call; `time_host_in_turn`'s `settle` keeps them off a sample's clock)."""
    order = random.Random(seed)
    for rep in range(reps):
        for name in order.sample(names, len(names)):
            yield rep, name


def time_host_in_turn(ways: dict, *, inner: int = 100, reps: int = 30, warmup: int = 1,
                      settle: int = 0) -> dict[str, Timing]:
    """Host time per call of each way, the ways taken in turn within every rep, in an order shuffled
    rep by rep (`in_turn`): a host whose speed drifts during the run (the H200's lent host did,
    26-48 us per launch in one process) moves every way alike, so samples of one rep compare like with like
    (`paired`). `ways`: name -> (a context opened around each sample, outside its clock; the call).
    Each sample is `inner` calls from an idle GPU (as `time_host`). GPU only.

    `settle`: calls each sample makes inside its context before its clock starts, timed apart
    (`Timing.settle_ms`, their total per sample). Opening a hook, or closing the one of the sample
    before, sets an attribute of a class, which throws away what the interpreter had specialized for
    that type, and the first calls after it run slower: in the simulator on this project's 2-core
    machine the first copy of a sample inside a Timeline took ~14 us against ~8 us for the rest, a
    bare one after a closed Timeline ~11 us, and re-setting the copy method on its class, and nothing
    else, cost the next 100 copies ~6 us in all. Spread over a sample's calls, that cost
    of the opening reads as a cost per call, larger the fewer calls a sample has."""
    require_gpu("time_host_in_turn")
    names = list(ways)

    def per_call(name: str, calls: int) -> tuple[float, float]:
        opened, call = ways[name]
        with opened():
            cuda.synchronize()
            started = time.perf_counter()
            for _ in range(settle):
                call()
            settled = time.perf_counter()
            for _ in range(calls):
                call()
            elapsed = time.perf_counter() - settled
        return elapsed * 1e3 / calls, (settled - started) * 1e3

    for name in names:
        for _ in range(warmup):
            per_call(name, inner)
    samples = {name: [] for name in names}
    for _, name in in_turn(names, reps):
        samples[name].append(per_call(name, inner))
    cuda.synchronize()
    return {name: Timing(tuple(t for t, _ in taken), settle_ms=tuple(s for _, s in taken) if settle else (),
                         settle_calls=settle)
            for name, taken in samples.items()}


def paired(numerator: Timing, denominator: Timing, *, ratio: bool = False) -> list[float]:
    """Per rep, one way's sample minus (or over) another's, from `time_host_in_turn`."""
    return [a / b if ratio else a - b for a, b in zip(numerator.samples_ms, denominator.samples_ms)]


# Settling calls a sample makes before its clock starts, where an instrument is opened around each
# sample (time_host_in_turn's `settle`, which says why): on a lent H100, timed call by call, the first
# copy of a sample after a closed recorder took ~130 us against ~86 after a bare sample, and from the
# 20th call on the calls were level (2026-12-05, commit b992b3c; docs/measuring.md, Settling launches).
SETTLE_CALLS = 20


def opening_paired(way: Timing, bare: Timing) -> list[float]:
    """Per rep, what opening `way`'s context cost the calls right after it, ms per opening: its
    settling calls' time beyond as many of its sample's later calls, less the bare way's likewise (so
    the per-call cost is not counted twice). Empty where the samples did not settle."""
    def beyond(taken: Timing) -> list[float]:
        return [s - taken.settle_calls * t for s, t in zip(taken.settle_ms, taken.samples_ms)]
    return [a - b for a, b in zip(beyond(way), beyond(bare))]


CEILING_L2_MULTIPLE = 8      # copy buffers are at least this many times the L2: no copy is served by it
FMA_TRIPS = 2048             # the FMA chain's trip count, a compile-time constant
FMA_CHAINS = 8               # independent chains per thread: enough in flight to fill the FMA pipes
FMA_TRIPS_INT32 = np.int32(FMA_TRIPS)   # the int32-counter form's trip count (frozen into the kernel)
FMA_A, FMA_B = np.float32(0.999), np.float32(1e-3)   # immediate operands of that form
COPY_BLOCK = 256
CHECKED = 1024               # elements compared at the head, middle and tail of a ceiling's output


def _ceiling_buffer_bytes(facts) -> int:
    """Bytes of one ceiling buffer: at least CEILING_L2_MULTIPLE x the L2, a multiple of what every
    kernel's element count divides."""
    chunk = 16 * COPY_BLOCK * 4
    return -(-CEILING_L2_MULTIPLE * facts.l2_bytes // chunk) * chunk


def copy_bandwidth(reps: int = 20) -> dict:
    """The device copy ceiling in GB/s (bytes read + bytes written), measured now.

    The best of the driver's device-to-device memcpy (cuMemcpyDtoD) and copy kernels
    (`_copy_methods`): grid-stride ones that keep several loads in flight per thread (4 float32,
    4 float64 or 2 complex128 per thread and step, each a scalar load of 4 or 8 bytes, and 2
    float32x4 per thread and step, each one 16-byte load and store), and a flat one (one 16-byte
    load and store per thread over a grid that covers the buffer, as Triton's kernels run), on
    buffers at least CEILING_L2_MULTIPLE x the L2, so no copy runs from cache. Each method
    writes into a poisoned buffer and is checked after its timing. A kernel that measures above
    this is an instrument error, not a result: the ceiling (or that kernel's byte count) is
    wrong. On an H200, 2026-12-01, a ceiling of 4-per-thread float32 copies on 1 GiB read
    3.82-3.96 TB/s while torch's copy moved 4.15 TB/s; later the same day the grid-stride
    float32x4 copy read 3.90 TB/s and the flat one 4.26, as memcpy and torch's copy did.
    """
    require_gpu("copy_bandwidth")
    facts = device.facts()
    nbytes = _ceiling_buffer_bytes(facts)
    src = cuda.to_device(np.ones(nbytes // 4, dtype=np.float32))
    dst = cuda.device_array(nbytes // 4, dtype=np.float32)

    def launcher(kernel, view):
        a, b, blocks = src.view(view), dst.view(view), _blocks(kernel, nbytes)
        return lambda: kernel[blocks, COPY_BLOCK](a, b)

    calls = {"memcpy": lambda: dst.copy_to_device(src),
             **{name: launcher(*method) for name, method in _copy_methods().items()}}
    best = _best_of("copy", calls, poison=lambda: _poison(dst), check=lambda _name: _holds(dst, np.float32(1)),
                    read=nbytes, written=nbytes, reps=reps)
    return {"buffer_over_l2": nbytes / facts.l2_bytes, **best}


def framework_copy_gbps(nbytes: int, reps: int = 20) -> dict:
    """torch's and CuPy's device-to-device copy of `nbytes` (read + write), where importable: a
    cross-check of the ceiling from outside kernellab (no dependency). An absent or broken one is
    None, with `<name>_copy_note` saying why when it was importable but failed."""
    def torch_copy():
        import torch
        if not torch.cuda.is_available():
            raise ImportError("torch has no CUDA here")
        a = torch.ones(nbytes // 4, device="cuda")
        b = torch.empty_like(a)
        return lambda: b.copy_(a)

    def cupy_copy():
        import cupy
        a = cupy.ones(nbytes // 4, dtype=cupy.float32)
        b = cupy.empty_like(a)
        return lambda: cupy.copyto(b, a)

    found = {}
    for name, make in (("torch", torch_copy), ("cupy", cupy_copy)):
        found[f"{name}_copy_gbps"] = None
        try:
            t = time_gpu(make(), warmup=3, reps=reps, inner=4)
        except ImportError:
            continue
        except Exception as exc:  # importable but broken on this machine: say so, measure the rest
            found[f"{name}_copy_note"] = f"not measured: {type(exc).__name__}: {exc}"[:300]
            continue
        found[f"{name}_copy_gbps"] = 2 * nbytes / (t.median_ms * 1e-3) / 1e9
    return found


def fma_peak(reps: int = 20) -> dict:
    """FP32 FMA throughput in TFLOP/s (2 FLOPs per FMA) of kernels that do nothing else: the
    best of two forms, as the copy ceiling is the best of its methods (a kernel that beats the
    ceiling would show the ceiling wrong; Lab 06's probe did beat the first form alone).

    `chains`: FMA_CHAINS independent chains per thread, each FMA_TRIPS dependent `cuda.fma`s on
    operands in registers, a `range` loop. `int32`: four chains, an int32 counter and immediate
    operands, the form of Lab 06's compute probe. Both over a grid of 8 blocks of 256 per SM; one
    store per thread at the end."""
    require_gpu("fma_peak")
    threads = device.facts().sm_count * 8 * COPY_BLOCK
    seed = cuda.to_device(np.array([0.5, 0.999, 1e-3], dtype=np.float32))
    out = cuda.device_array(threads, dtype=np.float32)
    forms = {"chains": (_fma_kernel(), FMA_CHAINS), "int32": (_fma_int32_kernel(), 4)}
    by_form = {}
    for name, (kernel, chains) in forms.items():
        t = time_gpu(lambda: kernel[threads // COPY_BLOCK, COPY_BLOCK](seed, out), warmup=3,
                     reps=reps, inner=4)
        flops = 2.0 * chains * FMA_TRIPS * threads
        by_form[name] = {"flops": flops, "tflops": flops / (t.median_ms * 1e-3) / 1e12,
                         "chains": chains, **t.as_dict()}
    best = max(by_form, key=lambda name: by_form[name]["tflops"])
    return {**by_form[best], "method": best, "trips": FMA_TRIPS, "threads": threads,
            "by_method_tflops": {name: form["tflops"] for name, form in by_form.items()}}


def launch_floor_ms() -> float:
    """GPU time of one empty launch with one array argument, back to back: the small-size floor."""
    require_gpu("launch_floor_ms")
    a = cuda.device_array(1, dtype=np.float32)
    kernel = _empty_kernel()
    return time_gpu(lambda: kernel[1, 32](a), warmup=10, reps=20, inner=100).median_ms


READS_PER_WRITE = {"2:1": 2, "4:1": 4}     # the read-heavy stream kernels: inputs per output
MIX_MATCH = 0.005    # a write fraction this close to a measured mix takes that mix's ceiling as is


def stream_bandwidths(reps: int = 20) -> dict:
    """Bandwidth ceilings (GB/s, bytes read + written) of stream kernels at read:write mixes other
    than a copy's 1:1, measured now: 2:1 (out = a + b), 4:1 (out = (a + b) + (c + d)) and
    read-only (a sum into one partial per thread; those partials are its only writes, counted
    in its write fraction). Each is the best of its methods (`_stream_methods`: grid-stride, 2
    float32, float64 or complex128 per thread and step in scalar loads, or float32x4 in 16-byte
    loads; and flat, 16-byte loads over a grid that covers the buffer, READ_VECTORS per thread
    for the sum), every buffer at least CEILING_L2_MULTIPLE x the L2, each output poisoned before
    a method runs and checked after.

    Why not the copy alone: HBM turns the bus around between reads and writes, so a read-heavy
    stream moves more bytes per second than a 1:1 copy (on an H200, 2026-12-01, torch.compile's
    4:1 chain read 101.4% of the copy ceiling). Why flat kernels too: the grid-stride forms
    peaked at 4.23 TB/s on 4:1 while torch.compile's 4:1 kernel moved 4.44, and read 102% of
    that ceiling in Lab 02; the flat 16-byte form moved 4.42 (probe, same run). Each mix:
    {"write_fraction", "gbps", "method", "by_method_gbps", "bytes", timing of the best}.
    """
    require_gpu("stream_bandwidths")
    facts = device.facts()
    nbytes = _ceiling_buffer_bytes(facts)
    ones = np.ones(nbytes // 4, dtype=np.float32)
    inputs = [cuda.to_device(ones)]
    inputs += [cuda.device_array_like(inputs[0]) for _ in range(max(READS_PER_WRITE.values()) - 1)]
    for buffer in inputs[1:]:
        buffer.copy_to_device(inputs[0])
    dst = cuda.device_array_like(inputs[0])
    methods = _stream_methods()

    def partial_bytes(name):      # one partial per thread of the sum's grid, of its element type
        kernel, _view, partial = methods["read_only"][name]
        return _blocks(kernel, nbytes) * COPY_BLOCK * np.dtype(partial).itemsize

    partials = cuda.device_array(max(map(partial_bytes, methods["read_only"])) // 4, dtype=np.float32)
    mixes = {}
    for mix, reads in READS_PER_WRITE.items():
        def launcher(kernel, view, reads=reads):
            args, blocks = [a.view(view) for a in inputs[:reads]] + [dst.view(view)], _blocks(kernel, nbytes)
            return lambda: kernel[blocks, COPY_BLOCK](*args)

        def check(name, mix=mix, reads=reads):
            view = methods[mix][name][1]
            return _holds(dst.view(view), reads * _one(view))

        mixes[mix] = _best_of(mix, {name: launcher(*method) for name, method in methods[mix].items()},
                              poison=lambda: _poison(dst), check=check, read=reads * nbytes,
                              written=nbytes, reps=reps)

    def partials_of(name):
        kernel, _view, partial = methods["read_only"][name]
        return partials.view(partial)[:_blocks(kernel, nbytes) * COPY_BLOCK]

    def sum_launcher(name):
        kernel, view, _partial = methods["read_only"][name]
        src, out, blocks = inputs[0].view(view), partials_of(name), _blocks(kernel, nbytes)
        return lambda: kernel[blocks, COPY_BLOCK](src, out)

    def sum_check(name):
        view = methods["read_only"][name][1]
        found = partials_of(name).copy_to_host()
        total = found.sum(dtype=np.result_type(found.dtype, np.float64))     # exact for float32 too
        return np.isclose(total, nbytes // np.dtype(view).itemsize * _one(view), rtol=1e-6)

    widths = {}
    for name in methods["read_only"]:   # the partials' bytes depend on the method: one mix per method
        written = partial_bytes(name)
        widths[name] = _best_of("read_only", {name: sum_launcher(name)}, poison=lambda: _poison(partials),
                                check=sum_check, read=nbytes, written=written, reps=reps)
    best = max(widths.values(), key=lambda m: m["gbps"])
    mixes["read_only"] = {**best, "by_method_gbps": {name: m["gbps"] for name, m in widths.items()}}
    return mixes


def _best_of(mix: str, calls: dict, *, poison, check, read: int, written: int, reps: int) -> dict:
    """The fastest of `calls` for one mix: each writes into a poisoned output (`poison()`) and is
    checked by `check(name)` after its timing, so no method can win by skipping work."""
    results = {}
    for name, call in calls.items():
        poison()
        results[name] = time_gpu(call, warmup=3, reps=reps, inner=4)
        if not check(name):
            raise RuntimeError(f"{mix} ceiling: {name} did not compute over the whole buffer")
    best = min(results, key=lambda k: results[k].median_ms)
    moved = read + written
    return {"bytes": moved, "write_fraction": written / moved, "method": best,
            "gbps": moved / (results[best].median_ms * 1e-3) / 1e9,
            "by_method_gbps": {k: moved / (t.median_ms * 1e-3) / 1e9 for k, t in results.items()},
            **results[best].as_dict()}


def _poison(array):
    """Fill a float32 device buffer with NaN, so a check after a method sees only what it wrote."""
    _fill_kernel()[device.facts().sm_count * 8, COPY_BLOCK](array, np.float32(np.nan))


def _one(view) -> np.generic:
    """The buffers' float32 ones as one element of `view` (a float64 view reads two of them)."""
    return np.ones(4, dtype=np.float32).view(view)[0]


def _holds(array, value) -> bool:
    """Whether a device array holds `value` at its head, its middle and its tail (CHECKED
    elements each: a method that stops early, starts late or skips a step fails)."""
    return all(np.all(array[start:start + CHECKED].copy_to_host() == value)
               for start in (0, array.size // 2, max(0, array.size - CHECKED)))


def ceiling_for_mix(write_fraction: float, streams: dict) -> tuple[float, str]:
    """The bandwidth ceiling (GB/s) of a kernel whose bytes written / bytes moved is
    `write_fraction`, from the run's measured mixes (`streams`: name -> {"write_fraction", "gbps"}),
    and how it was chosen: a measured mix within MIX_MATCH as is; between two measured mixes,
    linear in the write fraction; beyond the measured range, the nearest mix (said so); and never
    below a measured mix with more writes."""
    if not 0.0 <= write_fraction <= 1.0:
        raise ValueError(f"write fraction {write_fraction} is outside [0, 1]")
    points = sorted((m["write_fraction"], name, m["gbps"]) for name, m in streams.items())
    gbps, how = _ceiling_from_points(write_fraction, points)
    # A mix with more writes that ran faster bounds this one from below: fewer writes never slow
    # HBM down, so such a measurement says the estimate (or a read-heavy ceiling kernel) fell short.
    # (2026-12-02: the read-only sum reached 4362 GB/s, the 4:1 stream 4420, and Lab 02's
    # vectorised chain, 4 / 21 of its bytes written, 4420: 100.1% of the interpolation.)
    faster = max((p for p in points if p[0] >= write_fraction and p[2] > gbps), key=lambda p: p[2], default=None)
    if faster is not None:
        return faster[2], (f"{faster[1]} (measured at write fraction {faster[0]:.3f}, more writes than "
                           f"this mix's {write_fraction:.3f}, and faster than {how})")
    return gbps, how


def _ceiling_from_points(write_fraction: float, points: list) -> tuple[float, str]:
    """The nearest measured mix, or the line between the two measured around it, or beyond the
    measured range the nearest (said so)."""
    nearest = min(points, key=lambda p: abs(p[0] - write_fraction))
    if abs(nearest[0] - write_fraction) <= MIX_MATCH:
        return nearest[2], f"{nearest[1]} (measured, write fraction {nearest[0]:.3f})"
    for (low_f, low, low_gbps), (high_f, high, high_gbps) in zip(points, points[1:]):
        if low_f < write_fraction < high_f:
            share = (write_fraction - low_f) / (high_f - low_f)
            return (low_gbps + share * (high_gbps - low_gbps),
                    f"interpolated between {low} and {high} at write fraction {write_fraction:.3f}")
    return nearest[2], (f"{nearest[1]}, the nearest measured mix (write fraction {write_fraction:.3f} "
                        f"is outside the measured {points[0][0]:.3f}-{points[-1][0]:.3f})")


def stream_ceilings(ceilings: dict) -> dict:
    """Every measured mix of a run's ceilings, the copy (1:1) included: name -> its measurement."""
    return {"copy": {**ceilings["copy"], "write_fraction": 0.5}, **ceilings["streams"]}


def memory_roof(ceilings: dict) -> tuple[float, str]:
    """The best bandwidth any measured mix reached (GB/s), and which: a roofline's memory roof."""
    name, best = max(stream_ceilings(ceilings).items(), key=lambda item: item[1]["gbps"])
    return best["gbps"], name


@functools.cache
def ceilings() -> dict:
    """One set of ceilings per process (a run), measured on first use and quoted by every record:
    copy GB/s, stream GB/s at the 2:1, 4:1 and read-only mixes (`streams`), FP32 FMA TFLOP/s,
    the launch floor, and torch's/CuPy's copy beside the copy."""
    copy = copy_bandwidth()
    fma = fma_peak()
    return {"copy_gbps": copy["gbps"], "fp32_fma_tflops": fma["tflops"],
            "launch_floor_ms": launch_floor_ms(), **framework_copy_gbps(copy["bytes"] // 2),
            "copy": copy, "streams": stream_bandwidths(), "fma": fma}


@functools.cache
def _empty_kernel():

    @cuda.jit
    def empty_kernel(a):
        """Does nothing: its time is the cost of a launch alone."""

    return empty_kernel


def fma_chain_kernel(seed, out):
    """FMA_CHAINS independent chains of FMA_TRIPS dependent FMAs per thread, one store at the end."""
    i = cuda.grid(1)
    b, c = seed[1], seed[2]
    x0 = seed[0] + np.float32(i & 7)
    x1, x2, x3 = x0 + np.float32(1), x0 + np.float32(2), x0 + np.float32(3)
    x4, x5, x6, x7 = x0 + np.float32(4), x0 + np.float32(5), x0 + np.float32(6), x0 + np.float32(7)
    for _ in range(FMA_TRIPS):
        x0, x1, x2, x3 = cuda.fma(x0, b, c), cuda.fma(x1, b, c), cuda.fma(x2, b, c), cuda.fma(x3, b, c)
        x4, x5, x6, x7 = cuda.fma(x4, b, c), cuda.fma(x5, b, c), cuda.fma(x6, b, c), cuda.fma(x7, b, c)
    out[i] = ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7))


def fma_int32_kernel(seed, out):
    """Four independent chains of FMA_TRIPS dependent FMAs per thread with an int32 counter and
    immediate operands (the form of Lab 06's compute probe); one store at the end."""
    i = cuda.grid(1)
    x0 = seed[0] + np.float32(i & 7)
    x1, x2, x3 = x0 + np.float32(1), x0 + np.float32(2), x0 + np.float32(3)
    done = np.int32(0)
    while done < FMA_TRIPS_INT32:
        x0, x1, x2, x3 = x0 * FMA_A + FMA_B, x1 * FMA_A + FMA_B, x2 * FMA_A + FMA_B, x3 * FMA_A + FMA_B
        done += np.int32(1)
    out[i] = (x0 + x1) + (x2 + x3)


def copy_4_per_thread_kernel(src, dst):
    """Grid-stride steps of 4 elements per thread, all 4 loads issued before any store; each warp's
    loads stay coalesced (elements i, i + grid, i + 2 grid, i + 3 grid)."""
    step = cuda.gridsize(1)
    i = cuda.grid(1)
    while i + 3 * step < dst.size:
        v0, v1, v2, v3 = src[i], src[i + step], src[i + 2 * step], src[i + 3 * step]
        dst[i], dst[i + step], dst[i + 2 * step], dst[i + 3 * step] = v0, v1, v2, v3
        i += 4 * step
    while i < dst.size:
        dst[i] = src[i]
        i += step


def copy_2_per_thread_kernel(src, dst):
    """The same with 2 elements per thread and step (complex128: 16 bytes, but Numba loads and
    stores it as two 8-byte halves, ld.global.f64)."""
    step = cuda.gridsize(1)
    i = cuda.grid(1)
    while i + step < dst.size:
        v0, v1 = src[i], src[i + step]
        dst[i], dst[i + step] = v0, v1
        i += 2 * step
    while i < dst.size:
        dst[i] = src[i]
        i += step


def add_2_to_1_kernel(a, b, dst):
    """dst = a + b, grid-stride steps of 2 elements per thread, all loads before the stores."""
    step = cuda.gridsize(1)
    i = cuda.grid(1)
    while i + step < dst.size:
        a0, a1, b0, b1 = a[i], a[i + step], b[i], b[i + step]
        dst[i], dst[i + step] = a0 + b0, a1 + b1
        i += 2 * step
    while i < dst.size:
        dst[i] = a[i] + b[i]
        i += step


def add_4_to_1_kernel(a, b, c, d, dst):
    """dst = (a + b) + (c + d), the same steps: 4 bytes read per byte written."""
    step = cuda.gridsize(1)
    i = cuda.grid(1)
    while i + step < dst.size:
        a0, a1, b0, b1 = a[i], a[i + step], b[i], b[i + step]
        c0, c1, d0, d1 = c[i], c[i + step], d[i], d[i + step]
        dst[i], dst[i + step] = (a0 + b0) + (c0 + d0), (a1 + b1) + (c1 + d1)
        i += 2 * step
    while i < dst.size:
        dst[i] = (a[i] + b[i]) + (c[i] + d[i])
        i += step


def read_sum_kernel(src, partials):
    """Each thread sums its grid-stride share of `src` (2 loads in flight) into partials[thread]:
    nothing is written but one partial per thread."""
    step = cuda.gridsize(1)
    i = cuda.grid(1)
    first = i
    total = src[0] - src[0]                      # a zero of src's type
    while i + step < src.size:
        total += src[i] + src[i + step]
        i += 2 * step
    while i < src.size:
        total += src[i]
        i += step
    partials[first] = total


# --- 16-byte accesses ------------------------------------------------------------------------------
# Numba loads a float32 array 4 bytes at a time and a complex128 one as two 8-byte halves (the
# compiler cannot prove a 16-byte alignment); Triton's kernels move 16 bytes per load and store,
# which takes fewer instructions per byte and keeps more bytes in flight. `load_float32x4(a, k)`
# reads the 4 float32 a[4k:4k + 4] in one ld.global.v4.f32, `store_float32x4(a, k, values)`
# writes 4 in one st.global.v4.f32 (tests/instruments/test_measured_truth.py reads the PTX).
# The array is C-contiguous float32 and starts 16-byte aligned (a whole device allocation does); of
# any rank, `k` counting 16-byte vectors from its first element (a 2-D matrix with a multiple of 4
# columns: row r's vector j is r * cols // 4 + j). In the simulator they are the same four element
# accesses in Python.
FLOAT32X4 = 4      # float32 lanes per 16-byte access


def _float32x4_intrinsics():
    """The GPU versions: LLVM vector loads and stores of <4 x float>, aligned to 16 bytes."""
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    vector = ir.VectorType(ir.FloatType(), FLOAT32X4)

    def address(context, builder, array_type, array, index_type, index):
        data = context.make_array(array_type)(context, builder, value=array).data
        first = builder.mul(context.cast(builder, index, index_type, types.intp),
                            ir.Constant(ir.IntType(64), FLOAT32X4))
        return builder.bitcast(builder.gep(data, [first]), vector.as_pointer())

    def float32_vector(array):       # contiguous: the 4 lanes are 4 neighbouring elements
        return isinstance(array, types.Array) and array.layout == "C" and array.dtype == types.float32

    @intrinsic
    def load_float32x4(typingctx, array, index):
        if not float32_vector(array):
            return None
        signature = types.UniTuple(types.float32, FLOAT32X4)(array, index)

        def codegen(context, builder, sig, args):
            loaded = builder.load(address(context, builder, sig.args[0], args[0], sig.args[1], args[1]),
                                  align=16)
            lanes = [builder.extract_element(loaded, ir.Constant(ir.IntType(32), k))
                     for k in range(FLOAT32X4)]
            return context.make_tuple(builder, sig.return_type, lanes)

        return signature, codegen

    @intrinsic
    def store_float32x4(typingctx, array, index, values):
        if not float32_vector(array) or values != types.UniTuple(types.float32, FLOAT32X4):
            return None
        signature = types.void(array, index, values)

        def codegen(context, builder, sig, args):
            packed = ir.Constant(vector, ir.Undefined)
            for k in range(FLOAT32X4):
                packed = builder.insert_element(packed, builder.extract_value(args[2], k),
                                                ir.Constant(ir.IntType(32), k))
            builder.store(packed, address(context, builder, sig.args[0], args[0], sig.args[1], args[1]),
                          align=16)
            return context.get_dummy_value()

        return signature, codegen

    return load_float32x4, store_float32x4


def _float32x4_python():
    """The simulator's versions: the same four element accesses, one at a time (an array of
    more than one dimension indexed at the elements its flat order puts there)."""
    def lanes(array, index):
        first = FLOAT32X4 * index
        flat = range(first, first + FLOAT32X4)
        return flat if len(array.shape) == 1 else [np.unravel_index(k, array.shape) for k in flat]

    def load_float32x4(array, index):
        return tuple(array[k] for k in lanes(array, index))

    def store_float32x4(array, index, values):
        for k, value in zip(lanes(array, index), values):
            array[k] = value

    return load_float32x4, store_float32x4


load_float32x4, store_float32x4 = (_float32x4_python() if device.is_simulator()
                                   else _float32x4_intrinsics())
# The float32x4 kernels are module-level dispatchers: `kernellab.course.audit.ptx` finds them by
# name to read their PTX without a GPU.


@cuda.jit
def copy_float32x4_kernel(src, dst):
    """dst = src in 16-byte accesses, grid-stride steps of 2 per thread, both loads before the
    stores (dst.size a multiple of 4)."""
    step = cuda.gridsize(1)
    k = cuda.grid(1)
    vectors = dst.size // FLOAT32X4
    while k + step < vectors:
        v0, v1 = load_float32x4(src, k), load_float32x4(src, k + step)
        store_float32x4(dst, k, v0)
        store_float32x4(dst, k + step, v1)
        k += 2 * step
    while k < vectors:
        store_float32x4(dst, k, load_float32x4(src, k))
        k += step


@cuda.jit
def add_2_to_1_float32x4_kernel(a, b, dst):
    """dst = a + b in 16-byte accesses, the same steps."""
    step = cuda.gridsize(1)
    k = cuda.grid(1)
    vectors = dst.size // FLOAT32X4
    while k < vectors:
        a0, b0 = load_float32x4(a, k), load_float32x4(b, k)
        store_float32x4(dst, k, (a0[0] + b0[0], a0[1] + b0[1], a0[2] + b0[2], a0[3] + b0[3]))
        k += step


@cuda.jit
def add_4_to_1_float32x4_kernel(a, b, c, d, dst):
    """dst = (a + b) + (c + d) in 16-byte accesses: 4 bytes read per byte written."""
    step = cuda.gridsize(1)
    k = cuda.grid(1)
    vectors = dst.size // FLOAT32X4
    while k < vectors:
        a0, b0, c0, d0 = load_float32x4(a, k), load_float32x4(b, k), load_float32x4(c, k), load_float32x4(d, k)
        store_float32x4(dst, k, ((a0[0] + b0[0]) + (c0[0] + d0[0]), (a0[1] + b0[1]) + (c0[1] + d0[1]),
                                 (a0[2] + b0[2]) + (c0[2] + d0[2]), (a0[3] + b0[3]) + (c0[3] + d0[3])))
        k += step


@cuda.jit
def read_sum_float32x4_kernel(src, partials):
    """Each thread sums its grid-stride share of `src` in 16-byte loads, 2 in flight, into
    partials[thread] (one float32 per thread written)."""
    step = cuda.gridsize(1)
    k = cuda.grid(1)
    first = k
    vectors = src.size // FLOAT32X4
    total = np.float32(0)
    while k + step < vectors:
        v0, v1 = load_float32x4(src, k), load_float32x4(src, k + step)
        total += ((v0[0] + v0[1]) + (v0[2] + v0[3])) + ((v1[0] + v1[1]) + (v1[2] + v1[3]))
        k += 2 * step
    while k < vectors:
        v0 = load_float32x4(src, k)
        total += (v0[0] + v0[1]) + (v0[2] + v0[3])
        k += step
    partials[first] = total


# The flat forms: no loop, a grid that covers the buffer, each thread's 16-byte loads issued before
# any use. Blocks start and retire as the hardware pleases and each reads one contiguous tile.
READ_VECTORS = 8   # 16-byte loads per thread of the flat sum: 128 bytes read per 4-byte partial


@cuda.jit(device=True)
def sum4(v):
    """The sum of a float32x4's lanes."""
    return (v[0] + v[1]) + (v[2] + v[3])


@cuda.jit
def copy_float32x4_flat_kernel(src, dst):
    """dst = src, one 16-byte load and store per thread (dst.size a multiple of 4)."""
    k = cuda.grid(1)
    if k < dst.size // FLOAT32X4:
        store_float32x4(dst, k, load_float32x4(src, k))


@cuda.jit
def add_2_to_1_float32x4_flat_kernel(a, b, dst):
    """dst = a + b, one 16-byte access per array and thread."""
    k = cuda.grid(1)
    if k < dst.size // FLOAT32X4:
        a0, b0 = load_float32x4(a, k), load_float32x4(b, k)
        store_float32x4(dst, k, (a0[0] + b0[0], a0[1] + b0[1], a0[2] + b0[2], a0[3] + b0[3]))


@cuda.jit
def add_4_to_1_float32x4_flat_kernel(a, b, c, d, dst):
    """dst = (a + b) + (c + d), one 16-byte access per array and thread."""
    k = cuda.grid(1)
    if k < dst.size // FLOAT32X4:
        a0, b0, c0, d0 = load_float32x4(a, k), load_float32x4(b, k), load_float32x4(c, k), load_float32x4(d, k)
        store_float32x4(dst, k, ((a0[0] + b0[0]) + (c0[0] + d0[0]), (a0[1] + b0[1]) + (c0[1] + d0[1]),
                                 (a0[2] + b0[2]) + (c0[2] + d0[2]), (a0[3] + b0[3]) + (c0[3] + d0[3])))


@cuda.jit
def read_sum_float32x4_flat_kernel(src, partials):
    """Each thread sums READ_VECTORS 16-byte vectors of its block's contiguous tile (vector
    tile + j x blockDim for j < READ_VECTORS, coalesced per warp), all loaded before the sum
    where the tile is whole, into partials[thread]."""
    step = cuda.blockDim.x
    k = cuda.blockIdx.x * step * READ_VECTORS + cuda.threadIdx.x
    vectors = src.size // FLOAT32X4
    if k + (READ_VECTORS - 1) * step < vectors:
        v0, v1, v2, v3 = (load_float32x4(src, k), load_float32x4(src, k + step),
                          load_float32x4(src, k + 2 * step), load_float32x4(src, k + 3 * step))
        v4, v5, v6, v7 = (load_float32x4(src, k + 4 * step), load_float32x4(src, k + 5 * step),
                          load_float32x4(src, k + 6 * step), load_float32x4(src, k + 7 * step))
        total = ((sum4(v0) + sum4(v1)) + (sum4(v2) + sum4(v3))) + ((sum4(v4) + sum4(v5)) + (sum4(v6) + sum4(v7)))
    else:                                       # the last, partial tile
        total = np.float32(0)
        for j in range(READ_VECTORS):
            if k + j * step < vectors:
                total += sum4(load_float32x4(src, k + j * step))
    partials[cuda.grid(1)] = total


FLAT_VECTORS = {copy_float32x4_flat_kernel: 1, add_2_to_1_float32x4_flat_kernel: 1,
                add_4_to_1_float32x4_flat_kernel: 1, read_sum_float32x4_flat_kernel: READ_VECTORS}


def _blocks(kernel, nbytes: int) -> int:
    """A ceiling kernel's grid over buffers of `nbytes`: 8 blocks of COPY_BLOCK per SM (a full
    SM) for a grid-stride kernel; for a flat one (FLAT_VECTORS: 16-byte vectors per thread),
    as many blocks as cover the buffer."""
    per_thread = FLAT_VECTORS.get(kernel)
    if per_thread is None:
        return device.facts().sm_count * 8
    return -(-(nbytes // 16) // (per_thread * COPY_BLOCK))


def fill_kernel(array, value):
    """array[:] = value, grid-stride (the ceilings poison their outputs with it)."""
    step = cuda.gridsize(1)
    i = cuda.grid(1)
    while i < array.size:
        array[i] = value
        i += step


@functools.cache
def _copy_methods() -> dict:
    """The copy kernels, by method name: (kernel, the element view of the float32 buffers)."""
    four, two = cuda.jit(copy_4_per_thread_kernel), cuda.jit(copy_2_per_thread_kernel)
    return {"copy_4xfloat32": (four, np.float32), "copy_4xfloat64": (four, np.float64),
            "copy_2xcomplex128": (two, np.complex128),
            "copy_2xfloat32x4": (copy_float32x4_kernel, np.float32),
            "copy_flat_float32x4": (copy_float32x4_flat_kernel, np.float32)}


@functools.cache
def _stream_methods() -> dict:
    """Per mix, its kernels by method name: (kernel, element view); read-only's also name the
    element type of the partials they write."""
    add2, add4, total = cuda.jit(add_2_to_1_kernel), cuda.jit(add_4_to_1_kernel), cuda.jit(read_sum_kernel)
    views = {"2xfloat32": np.float32, "2xfloat64": np.float64, "2xcomplex128": np.complex128}
    vector = {"2:1": add_2_to_1_float32x4_kernel, "4:1": add_4_to_1_float32x4_kernel}
    flat = {"2:1": add_2_to_1_float32x4_flat_kernel, "4:1": add_4_to_1_float32x4_flat_kernel}
    return {**{mix: {**{name: (kernel, view) for name, view in views.items()},
                     "float32x4": (vector[mix], np.float32), "flat_float32x4": (flat[mix], np.float32)}
               for mix, kernel in (("2:1", add2), ("4:1", add4))},
            "read_only": {**{name: (total, view, view) for name, view in views.items()},
                          "2xfloat32x4": (read_sum_float32x4_kernel, np.float32, np.float32),
                          "flat_8xfloat32x4": (read_sum_float32x4_flat_kernel, np.float32, np.float32)}}


@functools.cache
def _fill_kernel():
    return cuda.jit(fill_kernel)


@functools.cache
def _fma_kernel():
    return cuda.jit(fma_chain_kernel)


@functools.cache
def _fma_int32_kernel():
    return cuda.jit(fma_int32_kernel)
