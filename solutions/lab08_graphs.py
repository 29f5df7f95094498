"""Lab 08: CUDA Graphs: many kernel launches for the price of one.

What you will learn
- What a CUDA graph is: the launches a piece of code makes, captured once and replayed with
  one driver call, so the host's cost per kernel (Lab 01 measures it for a Numba launch)
  becomes a small share of one submission.
- How to capture Numba kernels (`capture`, from kernellab.lab; underneath, numba-cuda takes a
  cuda.core GraphBuilder as the launch stream) and why capture itself runs nothing.
- What a graph bakes in: addresses, scalars, shapes. Hence static buffers, and one graph per
  batch size built on first use (the seed article's advice), behind a dispatcher.
- What breaks capture (Numba's cuMemAlloc allocation, NumPy host arrays, synchronization) and
  the error each gives.
- The seed article's metric, idle gaps between kernels over kernel time (target < 5%),
  measured before and after capture, and drawn as a timeline.

Exercises (each stub says `Lab 08.M`):
  08.1  affine_step_kernel      x[i] = a * x[i] + b in place     1 global read, 1 write per thread
  08.2  pipeline                one affine_step_kernel launch per (a, b), all on `stream`
                                (k steps: k reads + k writes of x; Lab 02 fuses them into one)
  08.3  BatchedPipeline.build   a static buffer and its graph for one batch size
  08.4  BatchedPipeline.__call__  pick the batch size's graph, fill its buffer, replay
  08.5  idle_gap_fraction       (total - kernels x kernel time) / (kernels x kernel time)
  08.6  reconstructed_timeline  where each kernel ran, from kernel time and total time

Convention: `pipeline` works in place (the chain needs no second buffer) and, like every
function a graph captures, takes the `stream` to launch on.

Tolerance: x after pipeline, a replay or BatchedPipeline within a relative error of 1e-5 (one
step: 1e-6) of chain_reference (float64), measured against |a| |x| + |b| carried through every
step: each step's float32 multiply and add round to under 1.2e-7 of those magnitudes, and the
tests chain at most 8 steps. idle_gap_fraction and reconstructed_timeline within 1e-9 relative
(float64 arithmetic on the host).

Graded files may import only kernellab.lab, numba (numba.cuda), numpy and math;
the grader scores 0 for a lab whose file imports anything else or reaches around imports (importlib,
__import__, exec, eval, open, dunder attributes, getattr with a computed name).
"""

# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported
from kernellab.lab import GraphCache, capture
from numba import cuda

import numpy as np


DEFAULT_BLOCK = 128


def chain_reference(x, coeffs, times=1):
    """The spec in float64 NumPy (given): `times` passes of x = a * x + b for each (a, b)."""
    out = np.asarray(x, dtype=np.float64)
    for _ in range(times):
        for a, b in coeffs:
            out = a * out + b
    return out


# --- 08.1: one step of the chain -----------------------------------------------------------------

@cuda.jit
def affine_step_kernel(x, a, b):
    i = cuda.grid(1)          # like blockIdx.x * blockDim.x + threadIdx.x in CUDA C
    if i < x.size:            # the guard: the last block has threads past the end
        x[i] = a * x[i] + b   # 1 read and 1 write of x[i], in place
    # per thread: 1 global read + 1 global write = 8 bytes for float32


# --- 08.2: the pipeline: one launch per step -----------------------------------------------------

def pipeline(x, coeffs, stream=0, block=DEFAULT_BLOCK):
    """x = a_k * (... (a_1 * x + b_1) ...) + b_k in place, one launch per (a, b); returns x."""
    grid = (x.size + block - 1) // block          # one thread per element
    for a, b in coeffs:
        affine_step_kernel[grid, block, stream](x, a, b)  # on `stream`: what capture records
    return x


# --- 08.3 / 08.4: one graph per batch size -------------------------------------------------------

class BatchedPipeline:
    """The pipeline on batches of rows, through one graph per batch size, built once and reused.

    A graph bakes in the addresses and the shape it saw, so each batch size gets a static
    (batch, features) buffer and a graph of the pipeline on that buffer. A call copies the batch
    into the buffer and replays. The result is the static buffer itself: valid until the next
    call with the same batch size (copy it if you need to keep it).
    """

    def __init__(self, features, coeffs, block=DEFAULT_BLOCK):
        if features <= 0:
            raise ValueError(f"features must be positive, got {features}")
        self.features = features
        self.coeffs = [(np.float32(a), np.float32(b)) for a, b in coeffs]  # float32, as declared
        self.block = block
        self.graphs = GraphCache(self.build)   # batch size -> (static buffer, graph)

    def build(self, batch):
        """The static buffer for `batch` rows and the graph of the pipeline on it."""
        static = cuda.device_array((batch, self.features), dtype=np.float32)  # before capture
        flat = static.reshape(batch * self.features)  # a view: the kernel sees one long vector
        return static, capture(pipeline, flat, self.coeffs, block=self.block)

    def __call__(self, x, stream=0):
        """The pipeline applied to x (batch, features); returns the batch size's static buffer."""
        if len(x.shape) != 2 or x.shape[1] != self.features or x.shape[0] == 0:
            raise ValueError(f"expected a (batch, {self.features}) array with batch >= 1, "
                             f"got shape {tuple(x.shape)}")
        static, graph = self.graphs[x.shape[0]]       # built on the first call with this size
        static.copy_to_device(x, stream=stream)       # the graph reads only its own buffer
        graph.replay(stream)
        return static


# --- 08.5 / 08.6: idle gaps ----------------------------------------------------------------------

def idle_gap_fraction(total_ms, kernel_ms, kernels):
    """Idle time between kernels over kernel time: the seed article's metric (target < 5%).

    Signed: a total below the sum of the kernel times gives a negative fraction, returned as it
    is. It is a measurement problem to report (the kernel time or the total is wrong), never a
    gap of 0: a metric clamped to 0 would hide it.
    """
    if kernels < 1 or kernel_ms <= 0:
        raise ValueError(f"need kernels >= 1 and kernel_ms > 0, got {kernels} and {kernel_ms}")
    busy = kernels * kernel_ms
    return (total_ms - busy) / busy


def reconstructed_timeline(kernel_ms, total_ms, kernels):
    """(start, end) in ms of each kernel, if they ran `kernel_ms` each with equal gaps in `total_ms`:
    the last one ends at `total_ms`. A lone kernel has no gap to stretch: it runs from 0 to
    `kernel_ms`. A total below the kernels' sum gives negative gaps, so the bars overlap: the
    measurement problem shows in the picture instead of being hidden."""
    if kernels < 1 or kernel_ms <= 0:
        raise ValueError(f"need kernels >= 1 and kernel_ms > 0, got {kernels} and {kernel_ms}")
    idle = total_ms - kernels * kernel_ms             # signed: negative gaps overlap the bars
    gap = idle / (kernels - 1) if kernels > 1 else 0.0   # between kernels, none before or after
    return [(i * (kernel_ms + gap), i * (kernel_ms + gap) + kernel_ms) for i in range(kernels)]


# --- What breaks capture (given: run them in the notebook and read the errors) -------------------

def pipeline_with_scratch(x, coeffs, stream=0, block=DEFAULT_BLOCK):
    """Breaks capture: allocates a scratch buffer inside the captured code. Numba allocates with
    cuMemAlloc, which runs at once rather than being recorded; stream-ordered allocation
    (cuMemAllocAsync) could be captured as a memory node, but numba-cuda's default memory
    manager does not use it (an external memory manager could)."""
    scratch = cuda.device_array_like(x)
    scratch.copy_to_device(x, stream=stream)
    pipeline(scratch, coeffs, stream=stream, block=block)
    x.copy_to_device(scratch, stream=stream)
    return x


def pipeline_with_nan_check(x, coeffs, stream=0, block=DEFAULT_BLOCK):
    """Breaks capture: reads x back to the host after each step to look for NaN."""
    for step in coeffs:
        pipeline(x, [step], stream=stream, block=block)
        if np.isnan(x.copy_to_host()).any():
            raise FloatingPointError(f"NaN after step {step}")
    return x


def capture_breakers(x, coeffs):
    """Three captures that fail, each with an error that names the cause."""
    return {
        "allocation": lambda: capture(pipeline_with_scratch, x, coeffs),
        "host array": lambda: capture(pipeline, x.copy_to_host(), coeffs),
        "synchronization": lambda: capture(pipeline_with_nan_check, x, coeffs),
    }


# The ways to run the pipeline, each with the reason it exists; the tour and the benchmark
# read this table. Each takes (x, coeffs) and leaves the result in x.
VARIANTS = {
    "eager": (pipeline, "one Numba launch per step: the host pays a launch for each (Lab 01)"),
    "graph": (lambda x, coeffs: capture(pipeline, x, coeffs).replay(),
              "captured once, replayed as one submission"),
}


# Argument types for compiling the kernels without launching them (`kernellab occupancy`,
# the resources-vs-driver check).
SIGNATURES = {
    "affine_step_kernel": "void(float32[::1], float32, float32)",
}
