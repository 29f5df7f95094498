"""Lab 07: streams and events.

What you will learn
- Work on one stream runs in order. Independent work on separate streams may overlap wherever an
  SM has room: blocks of concurrent kernels share an SM whenever its warp slots, registers and
  shared memory allow. Kernels of 8 small blocks fit side by side on a 132-SM H200 (this lab runs
  up to 16 at once; a cc 9.0 device runs at most 128 kernels at once); kernels that each fill every
  SM's resources run one after another whatever the number of streams.
- Launching a kernel from Python costs the host tens of microseconds (Lab 01 measures it). Many
  short kernels on many streams are then spaced out by the host, not by the GPU. Holding the
  streams behind one event (`hold`) takes the host's pace out of a measurement; submitting less
  (a CUDA graph, Lab 08) is the fix.
- Cross-stream dependencies with events: record on the producer's stream, wait on the
  consumer's. A device-wide `cuda.synchronize()` instead stops the host and waits for every
  stream, related or not.
- Copy/compute overlap: asynchronous copies from pinned (page-locked) host memory, in chunks
  spread over streams, so one chunk's copy runs while another chunk computes.
- The blocking default stream: a launch with no stream argument (the Lab 00 way) goes to the
  legacy default stream, which waits for every stream made by `cuda.stream()`, and they for it.
  The per-thread default stream does not: with numba-cuda's NVIDIA bindings, set
  `CUDA_PYTHON_CUDA_PER_THREAD_DEFAULT_STREAM=1` before numba.cuda is imported
  (`NUMBA_CUDA_PER_THREAD_DEFAULT_STREAM` has no effect in numba-cuda 0.30.4).
- To reason before measuring: `kernellab.scheduler` models the block scheduler on the CPU, and
  `kernellab.gpu.timeline` records what ran where and draws it (a small Nsight Systems).

Exercises (each stub says `Lab 07.M`):
  07.1  run_independent     kernel k on streams[k % S]; never the default stream, no host waits
  07.2  diamond             A -> (B || C) -> D over two streams, ordered by events only
  07.3  chunk_bounds        split n elements into chunks whose sizes differ by at most one
  07.4  pipeline            chunks over streams, each copied in, computed and copied back on its own
  07.5  predicted_speedup   K kernels on S streams vs on one, predicted by the block-scheduler model
  07.6  speedup_bound       the closed-form ceiling on that speed-up

Memory budget: busy_kernel reads each element once and writes it once (1 global read + 1 global
write per thread) and spends `iters` dependent FMAs in registers in between, so its time is set by
`iters` and its block count, not by memory. add_kernel: 2 reads + 1 write per thread.

Convention: inputs are device arrays, `out=None` allocates the output on the device, launchers
return it (still on the device) and take a `stream` (0 is the legacy default stream).
Tolerances: results within a relative error of 1e-5 of busy_reference or diamond_reference
(float64; the norm of the difference over the norm of the reference), since the tests' chains of
at most 9 float32 FMAs and an add round to under 1e-6; predicted_speedup within 1e-6 relative of
the model's ratio (pytest.approx), whatever order you divide in; speedup_bound exactly (integers).

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import is_simulator, scheduler
from numba import cuda

import weakref

import numpy as np


DEFAULT_BLOCK = 256
BUSY_A = np.float32(0.75)   # v -> a*v + b contracts to b / (1 - a) = 1: no overflow for any iters
BUSY_B = np.float32(0.25)


# --- the kernels: given ------------------------------------------------------------------------

@cuda.jit
def busy_kernel(x, iters, out):
    i = cuda.grid(1)
    if i < out.size:
        v = x[i]                          # 1 global read
        for _ in range(iters):            # dependent FMAs: each waits for the last (latency-bound)
            v = BUSY_A * v + BUSY_B       # registers only
        out[i] = v                        # 1 global write
    # per thread: 1 read + 1 write, and `iters` FMAs that no other thread can help with


def busy(x, iters, out=None, stream=0, block=DEFAULT_BLOCK):
    """out = f^iters(x) with f(v) = a*v + b: a kernel whose run time `iters` sets."""
    if out is None:
        out = cuda.device_array_like(x)
    grid = (x.size + block - 1) // block           # one thread per element
    busy_kernel[grid, block, stream](x, iters, out)  # the stream is the 3rd launch parameter
    return out


def busy_reference(x, iters):
    """f^iters(x) in float64, in closed form: 1 + a^iters * (x - 1)."""
    return 1.0 + float(BUSY_A) ** iters * (np.asarray(x, dtype=np.float64) - 1.0)


def diamond_reference(x, iters):
    """What `diamond` computes, in float64 (given): B(y) + C(y) with y = A(x), B = busy(iters),
    C = busy(2 * iters)."""
    y = busy_reference(x, iters)
    return busy_reference(y, iters) + busy_reference(y, 2 * iters)


@cuda.jit
def add_kernel(p, q, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = p[i] + q[i]              # 2 reads, 1 write


def add(p, q, out=None, stream=0, block=DEFAULT_BLOCK):
    """out = p + q."""
    if out is None:
        out = cuda.device_array_like(p)
    add_kernel[(p.size + block - 1) // block, block, stream](p, q, out)
    return out


@cuda.jit
def count_kernel(counter):
    if cuda.grid(1) == 0:
        counter[0] += 1                   # 1 read, 1 write, by one thread


# --- 07.1: independent kernels on streams ------------------------------------------------------

def run_independent(xs, iters, streams, outs=None):
    """busy(xs[k]) for every k, kernel k on streams[k % len(streams)] (queued in any order):
    independent work that may overlap. Asynchronous: returns the outputs without waiting for them."""
    if not streams:
        raise ValueError("run_independent needs at least one stream")
    if outs is None:
        outs = [cuda.device_array_like(x) for x in xs]
    for k, (x, out) in enumerate(zip(xs, outs)):
        busy(x, iters, out=out, stream=streams[k % len(streams)])   # round-robin over the streams
    return outs


def run_independent_with_bookkeeping(xs, iters, streams, counter, outs=None):
    """The pitfall: run_independent plus a one-thread bookkeeping launch with no stream argument
    after each kernel. Each goes to the legacy default stream, which waits for every blocking
    stream and makes them wait for it: the streams run one kernel at a time."""
    if outs is None:
        outs = [cuda.device_array_like(x) for x in xs]
    for k, (x, out) in enumerate(zip(xs, outs)):
        busy(x, iters, out=out, stream=streams[k % len(streams)])
        count_kernel[1, 32](counter)      # no stream: the legacy default stream, a barrier
    return outs


def hold(streams, iters, scratch):
    """Pre-enqueue: hold every stream behind one busy kernel on a gate stream, so the host can
    queue all the work before any of it starts. Returns the gate stream. The gate must outlast
    the host's enqueueing (`iters` large enough); `scratch` is a small device array it rewrites."""
    gate = cuda.stream()
    busy(scratch, iters, out=scratch, stream=gate)   # runs while the host enqueues the rest
    opened = cuda.event()
    opened.record(gate)                              # fires when the gate kernel is done
    for stream in streams:
        opened.wait(stream)                          # nothing on `stream` starts before that
    return gate


def nonblocking_stream():
    """A stream that does not synchronize with the legacy default stream (CU_STREAM_NON_BLOCKING).
    cuda.stream() makes blocking streams; this one comes from the driver through cuda.bindings."""
    if is_simulator():
        return cuda.stream()              # the simulator runs everything in order anyway
    from cuda.bindings import driver
    cuda.current_context()                # the stream belongs to Numba's context
    err, handle = driver.cuStreamCreate(driver.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuStreamCreate(CU_STREAM_NON_BLOCKING) failed: {err}")
    stream = cuda.external_stream(int(handle))
    weakref.finalize(stream, driver.cuStreamDestroy, handle)
    return stream


# --- 07.2: a cross-stream dependency with events -----------------------------------------------

def diamond(x, iters, s1, s2, out=None):
    """out = B(y) + C(y), y = A(x): A, B, D on s1, C on s2 beside B; events order s1 and s2.

    B and C must stay unordered: neither may wait for the other, by an event or by sharing a
    stream (the tests check it)."""
    y = busy(x, iters, stream=s1)                 # A on s1
    a_done = cuda.event()
    a_done.record(s1)                             # fires when s1 reaches this point: A is done
    a_done.wait(s2)                               # s2 waits on the GPU; the host goes on
    b = busy(y, iters, stream=s1)                 # B on s1, after A by stream order
    c = busy(y, 2 * iters, stream=s2)             # C on s2, after A by the event, beside B
    c_done = cuda.event()
    c_done.record(s2)
    c_done.wait(s1)                               # D waits for C (and for B, by stream order)
    return add(b, c, out=out, stream=s1)          # D


def diamond_synchronized(x, iters, s1, s2, out=None):
    """The same diamond ordered by device-wide barriers: the host stops twice, and each barrier
    waits for everything on the GPU, unrelated streams included."""
    y = busy(x, iters, stream=s1)                 # A
    cuda.synchronize()                            # host waits for the whole device
    b = busy(y, iters, stream=s1)                 # B
    c = busy(y, 2 * iters, stream=s2)             # C
    cuda.synchronize()                            # and again
    return add(b, c, out=out, stream=s1)          # D


# --- 07.3 / 07.4: copy/compute overlap -----------------------------------------------------------

def chunk_bounds(n, chunks):
    """[(lo, hi), ...] covering range(n) in `chunks` pieces whose sizes differ by at most one.

    Which chunks take the n % chunks extra elements (the first, the last, or spread out) is
    yours: the tests check the coverage, the order and the sizes only."""
    if chunks < 1 or n < chunks:
        raise ValueError(f"need 1 <= chunks <= n, got n={n}, chunks={chunks}")
    size, extra = divmod(n, chunks)
    bounds, lo = [], 0
    for c in range(chunks):
        hi = lo + size + (c < extra)              # the first `extra` chunks take one more
        bounds.append((lo, hi))
        lo = hi
    return bounds


def pipeline(host_x, iters, streams, chunks, host_out=None, device_buffers=None):
    """busy(host_x) back to the host, chunk c on streams[c % S]: its H2D copy, kernel and D2H copy
    in order on that stream (the chunks queued in any order), so other chunks' copies overlap with
    its kernel. host_x should be
    pinned (cuda.pinned_array): a copy from pageable memory holds the host until the driver has
    staged it, so the chunks do not overlap. device_buffers: an
    optional (d_in, d_out) pair shaped like host_x. Waits for the result before returning it:
    `synchronize()` on every stream, on the streams that carry a chunk, or one `cuda.synchronize()`,
    each after the last chunk is queued, all pass (the tests check only that every D2H copy is done
    when pipeline returns, and that the host did not wait earlier)."""
    if not streams:
        raise ValueError("pipeline needs at least one stream")
    if host_out is None:
        host_out = cuda.pinned_array_like(host_x)              # page-locked: async D2H can target it
    d_in, d_out = device_buffers or (cuda.device_array_like(host_x), cuda.device_array_like(host_x))
    for c, (lo, hi) in enumerate(chunk_bounds(host_x.size, chunks)):
        stream = streams[c % len(streams)]
        d_in[lo:hi].copy_to_device(host_x[lo:hi], stream=stream)    # async H2D: returns at once
        busy(d_in[lo:hi], iters, out=d_out[lo:hi], stream=stream)    # after its copy, same stream
        d_out[lo:hi].copy_to_host(host_out[lo:hi], stream=stream)   # async D2H after the kernel
    for stream in streams:
        stream.synchronize()                                     # only now is host_out complete
    return host_out


# --- 07.5 / 07.6: predict before measuring ----------------------------------------------------------

def predicted_speedup(kernels, streams, blocks, block_ms, blocks_per_sm, machine):
    """Makespan of `kernels` identical independent kernels on one stream / on `streams` streams
    (round-robin), both predicted by kernellab.scheduler on `machine`."""
    shape = dict(blocks=blocks, block_ms=block_ms, blocks_per_sm=blocks_per_sm)
    one = scheduler.simulate(scheduler.round_robin(kernels, 1, **shape), machine)
    many = scheduler.simulate(scheduler.round_robin(kernels, streams, **shape), machine)
    return one.makespan_ms / many.makespan_ms


def speedup_bound(kernels, streams, blocks, blocks_per_sm, sm_count):
    """The most that `streams` streams can gain over one for identical independent kernels, when
    launching is free: serial time / max(the busiest stream's time, all blocks through the SMs)."""
    if min(kernels, streams, blocks, blocks_per_sm, sm_count) < 1:
        raise ValueError("kernels, streams, blocks, blocks_per_sm and sm_count must all be >= 1 "
                         "(a kernel with 0 blocks per SM cannot run at all)")
    slots = sm_count * blocks_per_sm              # blocks resident at once on the whole GPU
    waves = -(-blocks // slots)                   # one kernel alone: ceil(blocks / slots) rounds
    busiest_stream = -(-kernels // streams) * waves   # its kernels run one after another
    all_blocks = -(-(kernels * blocks) // slots)  # every block of every kernel through the slots
    return kernels * waves / max(busiest_stream, all_blocks)


# The ways to run the same work, each with why it exists; the tour and the benchmark read this.
VARIANTS = {
    "independent_on_streams": (run_independent, "kernel k on stream k % S: overlaps where SMs are free"),
    "independent_with_default_stream_launches": (
        run_independent_with_bookkeeping,
        "the pitfall: a stream-less launch after each kernel serializes every blocking stream"),
    "diamond_events": (diamond, "cross-stream order by events: the GPU waits, the host runs on"),
    "diamond_synchronized": (diamond_synchronized,
                             "device-wide barriers: the host stops, and waits for every stream"),
}


# Argument types for compiling the kernels without launching them (`kernellab occupancy`,
# the resources-vs-driver check).
SIGNATURES = {
    "busy_kernel": "void(float32[::1], int64, float32[::1])",
    "add_kernel": "void(float32[::1], float32[::1], float32[::1])",
    "count_kernel": "void(int32[::1])",
}
