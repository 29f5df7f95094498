"""Timing on the GPU with CUDA events: warm-up, many repetitions, the median and its spread.

The simulator has no clock worth reading (its events return -1), so every function here raises
`NoTiming` there; callers say so in their output instead of printing a made-up figure.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import time
from typing import Callable

import numpy as np

from . import device


class NoTiming(RuntimeError):
    """Raised in simulator mode: there is no GPU clock to read."""

    def __init__(self, what: str = "timing"):
        super().__init__(f"{what}: the CUDA simulator runs each thread in Python and has no GPU "
                         "clock; no timing exists in simulator mode (see data/reference/ for "
                         "recorded H200 measurements)")


@dataclasses.dataclass(frozen=True)
class Timing:
    """Per-repetition times in milliseconds."""

    samples_ms: tuple[float, ...]

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
                "reps": len(self.samples_ms)}

    def __str__(self) -> str:
        return f"{self.median_ms:.4f} ms (p10-p90 {self.p10_ms:.4f}-{self.p90_ms:.4f}, n={len(self.samples_ms)})"


def require_gpu(what: str = "timing"):
    if device.is_simulator():
        raise NoTiming(what)


def time_gpu(fn, *, warmup: int = 5, reps: int = 50, inner: int = 1, stream=0,
             setup=None) -> Timing:
    """Time `fn()` with CUDA events on `stream`; each sample is the mean of `inner` back-to-back calls.

    `setup(rep)` runs before each sample, outside the timed region (e.g. to rotate input sets).
    """
    require_gpu("time_gpu")
    cuda = device.cuda()
    for rep in range(warmup):
        if setup:
            setup(rep)
        fn()
    cuda.synchronize()
    start, stop = cuda.event(timing=True), cuda.event(timing=True)
    samples = []
    for rep in range(reps):
        if setup:
            setup(rep)
        start.record(stream)
        for _ in range(inner):
            fn()
        stop.record(stream)
        stop.synchronize()
        samples.append(cuda.event_elapsed_time(start, stop) / inner)
    return Timing(tuple(samples))


@functools.cache
def _hold():
    cuda = device.cuda()

    @cuda.jit
    def hold_kernel(iterations, sink):
        value = sink[0]
        for _ in range(iterations):
            value = value * 0.999999 + 1e-6    # a dependent chain: each step waits for the last
        sink[0] = value

    return hold_kernel


_HOLD_PROBE = 1 << 20


def hold_gpu(milliseconds: float) -> Callable[[], None]:
    """A function that keeps the GPU busy for about `milliseconds` on the default stream."""
    require_gpu("hold_gpu")
    cuda = device.cuda()
    kernel = _hold()
    sink = cuda.to_device(np.ones(1, dtype=np.float32))
    probe = time_gpu(lambda: kernel[1, 1](_HOLD_PROBE, sink), warmup=1, reps=3)
    iterations = max(1, int(_HOLD_PROBE * milliseconds / probe.median_ms))
    return lambda: kernel[1, 1](iterations, sink)


def gpu_time_per_launch(launch: Callable[[], None], *, count: int = 100,
                        reps: int = 20) -> Timing:
    """GPU time per `launch()` when the GPU never waits for the host (default stream; GPU only).

    A hold kernel keeps the GPU busy while `count` launches queue up behind it, so the events
    around them time the GPU's own work (kernel run time plus the hardware's gap between
    kernels) without the host's submit time. The sum of kernel times that idle gaps are
    measured against.
    """
    hold = hold_gpu(max(2.0, 0.1 * count))  # outlasts queueing `count` launches at up to 100 us each
    return time_gpu(launch, warmup=1, reps=reps, inner=count, setup=lambda _rep: hold())


def time_host(submit: Callable[[], None], *, inner: int = 100, reps: int = 30,
              warmup: int = 3) -> Timing:
    """Host time per `submit()` call (e.g. a launch), each sample starting from an idle GPU.

    Every sample starts after a synchronize, so work queued by earlier samples cannot fill the
    launch queue and make the host wait: what is timed is submission. Keep the GPU work of
    `inner` calls short enough to queue without blocking. GPU only.
    """
    require_gpu("time_host")
    cuda = device.cuda()
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


def copy_bandwidth(nbytes: int = 1 << 30, reps: int = 20) -> dict:
    """The device copy ceiling in GB/s (bytes read + bytes written), measured now.

    The best of three copies: the driver's device-to-device memcpy, a Numba kernel copying one
    element per thread, and one copying 4 elements per thread with all 4 loads issued before
    any store. On an H200 one 4-byte load per thread does not keep enough bytes in flight to
    fill the memory system; a kernel's "% of copy bandwidth" compares it with the best copy.
    """
    require_gpu("copy_bandwidth")
    cuda = device.cuda()
    n = nbytes // 4
    src = cuda.to_device(np.ones(n, dtype=np.float32))
    dst = cuda.device_array(n, dtype=np.float32)
    one, four = _copy_kernels()
    block = 256
    results = {
        "memcpy": time_gpu(lambda: dst.copy_to_device(src), warmup=3, reps=reps),
        "copy_kernel": time_gpu(lambda: one[(n + block - 1) // block, block](src, dst),
                                warmup=3, reps=reps),
        "copy_kernel_4_per_thread": time_gpu(
            lambda: four[(n + 4 * block - 1) // (4 * block), block](src, dst), warmup=3, reps=reps),
    }
    best = min(results, key=lambda k: results[k].median_ms)
    moved = 2 * n * 4
    return {"bytes": moved, "method": best,
            "gbps": moved / (results[best].median_ms * 1e-3) / 1e9,
            "by_method_gbps": {k: moved / (t.median_ms * 1e-3) / 1e9 for k, t in results.items()},
            **results[best].as_dict()}


def _copy_kernels():
    cuda = device.cuda()

    @cuda.jit
    def copy_kernel(src, dst):
        i = cuda.grid(1)
        if i < dst.size:
            dst[i] = src[i]

    @cuda.jit
    def copy_4_per_thread_kernel(src, dst):
        i = cuda.grid(1)
        step = cuda.gridsize(1)           # elements i, i + step, ...: each warp stays coalesced
        if i + 3 * step < dst.size:
            v0, v1, v2, v3 = src[i], src[i + step], src[i + 2 * step], src[i + 3 * step]
            dst[i], dst[i + step], dst[i + 2 * step], dst[i + 3 * step] = v0, v1, v2, v3
        else:
            for k in range(4):
                if i + k * step < dst.size:
                    dst[i + k * step] = src[i + k * step]

    return copy_kernel, copy_4_per_thread_kernel
