"""Small kernels whose resources tests/instruments/test_resources.py checks (compiled, never launched, except
`axpy`, which the simulator runs after the compile child has come and gone)."""

from kernellab.gpu import device  # first: chooses GPU or simulator before numba.cuda is imported
from kernellab.kernels.jit import jit
from numba import float32, int32

cuda = device.cuda()


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def reverse_block(x, out):
    """256 float32 of static shared memory: 1024 bytes."""
    tile = cuda.shared.array(256, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        tile[t] = x[i]
    cuda.syncthreads()
    if i < x.size:
        out[i] = tile[cuda.blockDim.x - 1 - t]


def _many_live_values(x, out):
    """Sixteen loads kept live across a chain of products: more than 32 registers unless capped."""
    i = cuda.grid(1)
    n = x.size
    if i + 15 * n // 16 < n:
        step = n // 16
        v0, v1, v2, v3 = x[i], x[i + step], x[i + 2 * step], x[i + 3 * step]
        v4, v5, v6, v7 = x[i + 4 * step], x[i + 5 * step], x[i + 6 * step], x[i + 7 * step]
        v8, v9, v10, v11 = x[i + 8 * step], x[i + 9 * step], x[i + 10 * step], x[i + 11 * step]
        v12, v13, v14, v15 = x[i + 12 * step], x[i + 13 * step], x[i + 14 * step], x[i + 15 * step]
        values = (v0, v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15)
        acc = 0.0
        for a in values:
            for b in values:
                acc += a * b + a / (b + 1.5)
        out[i] = acc + v0 * v15 - v7 * v8


heavy = cuda.jit(_many_live_values)
heavy_capped = jit(max_registers=32)(_many_live_values)


@cuda.jit
def local_scratch(x, out):
    """A local array indexed by data: it lives in the stack frame."""
    scratch = cuda.local.array(64, float32)
    i = cuda.grid(1)
    if i < x.size:
        for j in range(64):
            scratch[j] = x[(i + j) % x.size]
        out[i] = scratch[int32(x[i]) % 64]


@cuda.jit
def broken(x, out):
    """Runs in the simulator, but no GPU compiles a Python dict."""
    table = {}
    table[0] = x[0]
    out[0] = table[0]


@cuda.jit(device=True)
def _half_plus_zero(v):
    return v * 0.5 + 0.0  # PRECISION: bare literals make this float64 arithmetic


@cuda.jit
def float64_in_device_function(x, out):
    """float32 arguments, but its device function computes in float64."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _half_plus_zero(x[i])


@cuda.jit
def float64_accumulator(x, out):
    """`acc = 0.0` makes the sum a float64 one."""
    acc = 0.0  # START
    for j in range(x.size):
        acc += x[j]  # ACCUMULATE
    out[0] = acc


def not_a_kernel(x):
    return x


SIGNATURES = {
    "axpy": "void(float32, float32[::1], float32[::1], float32[::1])",
    "reverse_block": "void(float32[::1], float32[::1])",
    "heavy": "void(float64[::1], float64[::1])",
    "local_scratch": "void(float32[::1], float32[::1])",
}
