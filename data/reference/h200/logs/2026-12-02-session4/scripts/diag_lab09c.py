"""Diagnostics (not committed): loads-first Lab 09 candidates at 8192^2."""
import numpy as np
import kernellab.lab  # noqa
from numba import cuda, float32, uint64
from kernellab.gpu import timing
U = uint64
R = C = 8192
x = cuda.to_device(np.random.default_rng(1).standard_normal((R, C), dtype=np.float32))
scale = cuda.to_device(np.random.default_rng(2).standard_normal(R, dtype=np.float32))
out = cuda.device_array((R, C), np.float32)
host_x = x.copy_to_host(); host_s = scale.copy_to_host()
ref_scale = host_x * host_s[:, None]; ref_t = np.ascontiguousarray(host_x.T)
def make_cols_first(per, block):
    @cuda.jit
    def k(x, scale, out):   # loads first: every load of the thread issued before any store
        rows, cols = out.shape
        r = cuda.blockIdx.y
        c0 = cuda.blockIdx.x * (block * per) + cuda.threadIdx.x
        v = cuda.local.array(per, float32)
        for k in range(per):
            c = c0 + k * block
            v[k] = x[U(r), U(c)] if c < cols else float32(0)
        s = scale[U(r)]
        for k in range(per):
            c = c0 + k * block
            if c < cols:
                out[U(r), U(c)] = v[k] * s
    return k
def make_tiles_first(per, block_rows):
    TR = per * block_rows
    @cuda.jit
    def k(x, scale, out):
        rows, cols = out.shape
        c = cuda.blockIdx.x * 32 + cuda.threadIdx.x
        r0 = cuda.blockIdx.y * TR + cuda.threadIdx.y
        v = cuda.local.array(per, float32)
        for k in range(per):
            r = r0 + k * block_rows
            v[k] = x[U(r), U(c)] * scale[U(r)] if r < rows and c < cols else float32(0)
        for k in range(per):
            r = r0 + k * block_rows
            if r < rows and c < cols:
                out[U(r), U(c)] = v[k]
    return k, TR
def make_cols_signed_first(per, block):
    @cuda.jit
    def k(x, scale, out):   # loads first, signed indices
        rows, cols = out.shape
        r = cuda.blockIdx.y
        c0 = cuda.blockIdx.x * (block * per) + cuda.threadIdx.x
        v = cuda.local.array(per, float32)
        for k in range(per):
            c = c0 + k * block
            v[k] = x[r, c] if c < cols else float32(0)
        s = scale[r]
        for k in range(per):
            c = c0 + k * block
            if c < cols:
                out[r, c] = v[k] * s
    return k
def time_it(fn, check):
    fn(); cuda.synchronize()
    assert np.allclose(out.copy_to_host(), check), "wrong"
    return timing.time_gpu(fn, warmup=5, reps=30)
dram = 2 * R * C * 4
cases = {"d2d memcpy": (lambda: out.copy_to_device(x), host_x)}
for per, blk in ((4, 256), (8, 128), (8, 256), (16, 128), (4, 128), (16, 64)):
    k = make_cols_first(per, blk)
    cases[f"scale cols first u {per}/thread block {blk}"] = (lambda k=k, per=per, blk=blk: k[((C + blk * per - 1) // (blk * per), R), (blk, 1)](x, scale, out), ref_scale)
for per, blk in ((8, 128), (4, 256)):
    k = make_cols_signed_first(per, blk)
    cases[f"scale cols first SIGNED {per}/thread block {blk}"] = (lambda k=k, per=per, blk=blk: k[((C + blk * per - 1) // (blk * per), R), (blk, 1)](x, scale, out), ref_scale)
for per, br in ((4, 8), (8, 4), (8, 8), (16, 4)):
    k, tr = make_tiles_first(per, br)
    cases[f"scale tiles first u {per} rows/thread (32,{br})"] = (lambda k=k, tr=tr, br=br: k[((C + 31) // 32, (R + tr - 1) // tr), (32, br)](x, scale, out), ref_scale)
for name, (fn, ref) in cases.items():
    try:
        t = time_it(fn, ref)
        print(f"{name:44s} {t.median_ms:8.4f} ms  {dram / (t.median_ms * 1e-3) / 1e9:7.0f} GB/s  (p10 {t.p10_ms:.4f} p90 {t.p90_ms:.4f})", flush=True)
    except Exception as exc:
        print(name, "FAILED", type(exc).__name__, str(exc)[:300], flush=True)
