"""Diagnostics (not committed): tuned Lab 09 candidates at 8192^2."""
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

def make_scale_tiles(rows_per_thread, block_rows):
    TILE_ROWS = rows_per_thread * block_rows
    @cuda.jit
    def k(x, scale, out):      # block (32, block_rows) walks a 32 x TILE_ROWS tile, like the transpose
        rows, cols = out.shape
        c = cuda.blockIdx.x * 32 + cuda.threadIdx.x
        r0 = cuda.blockIdx.y * TILE_ROWS + cuda.threadIdx.y
        for k in range(rows_per_thread):
            r = r0 + k * block_rows
            if r < rows and c < cols:
                out[U(r), U(c)] = x[U(r), U(c)] * scale[U(r)]
    return k, TILE_ROWS
def make_scale_cols(per_thread, block):
    @cuda.jit
    def k(x, scale, out):      # block (block, 1) per row segment; per_thread columns a block apart
        rows, cols = out.shape
        r = cuda.blockIdx.y
        c0 = cuda.blockIdx.x * (block * per_thread) + cuda.threadIdx.x
        s = scale[U(r)]
        for k in range(per_thread):
            c = c0 + k * block
            if c < cols:
                out[U(r), U(c)] = x[U(r), U(c)] * s
    return k
@cuda.jit
def s_rowblock_u(x, scale, out):
    r = cuda.blockIdx.x
    s = scale[U(r)]
    for c in range(cuda.threadIdx.x, out.shape[1], cuda.blockDim.x):
        out[U(r), U(c)] = x[U(r), U(c)] * s

def make_transpose(block_rows, guarded=True):
    @cuda.jit
    def k(x, out):
        tile = cuda.shared.array((32, 33), float32)
        rows, cols = x.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        fr, fc = cuda.blockIdx.y * 32, cuda.blockIdx.x * 32
        for k in range(0, 32, block_rows):
            r, c = fr + ty + k, fc + tx
            if r < rows and c < cols:
                tile[U(ty + k), U(tx)] = x[U(r), U(c)]
        cuda.syncthreads()
        for k in range(0, 32, block_rows):
            r, c = fc + ty + k, fr + tx
            if r < cols and c < rows:
                out[U(r), U(c)] = tile[U(tx), U(ty + k)]
    return k
def make_transpose64(block_rows):
    @cuda.jit
    def k(x, out):     # a 64 x 64 tile, block (64, block_rows)
        tile = cuda.shared.array((64, 65), float32)
        rows, cols = x.shape
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        fr, fc = cuda.blockIdx.y * 64, cuda.blockIdx.x * 64
        for k in range(0, 64, block_rows):
            r, c = fr + ty + k, fc + tx
            if r < rows and c < cols:
                tile[U(ty + k), U(tx)] = x[U(r), U(c)]
        cuda.syncthreads()
        for k in range(0, 64, block_rows):
            r, c = fc + ty + k, fr + tx
            if r < cols and c < rows:
                out[U(r), U(c)] = tile[U(tx), U(ty + k)]
    return k
@cuda.jit
def copy_u4(x, out):
    rows, cols = out.shape
    c = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    r0 = cuda.blockIdx.y * 32 + cuda.threadIdx.y
    for k in range(4):
        r = r0 + k * 8
        if r < rows and c < cols:
            out[U(r), U(c)] = x[U(r), U(c)]

def time_it(fn, check):
    fn(); cuda.synchronize()
    assert np.array_equal(out.copy_to_host(), check.astype(np.float32)) or np.allclose(out.copy_to_host(), check), "wrong"
    return timing.time_gpu(fn, warmup=5, reps=30)
dram = 2 * R * C * 4
tgrid = ((C + 31) // 32, (R + 31) // 32)
cases = {"d2d memcpy": (lambda: out.copy_to_device(x), host_x),
         "copy u 4 rows/thread (32,8)": (lambda: copy_u4[tgrid, (32, 8)](x, out), host_x),
         "scale rowblock u 256": (lambda: s_rowblock_u[R, 256](x, scale, out), ref_scale),
         "scale rowblock u 512": (lambda: s_rowblock_u[R, 512](x, scale, out), ref_scale)}
for per, br in ((4, 8), (8, 4), (2, 16), (8, 8), (16, 4)):
    k, tr = make_scale_tiles(per, br)
    cases[f"scale tiles u {per} rows/thread (32,{br})"] = (lambda k=k, tr=tr, br=br: k[((C + 31) // 32, (R + tr - 1) // tr), (32, br)](x, scale, out), ref_scale)
for per, blk in ((4, 256), (8, 128), (4, 128), (2, 256), (8, 256), (16, 64)):
    k = make_scale_cols(per, blk)
    cases[f"scale cols u {per}/thread block {blk}"] = (lambda k=k, per=per, blk=blk: k[((C + blk * per - 1) // (blk * per), R), (blk, 1)](x, scale, out), ref_scale)
for br in (8, 4, 16, 2):
    k = make_transpose(br)
    cases[f"transpose u (32,{br})"] = (lambda k=k, br=br: k[tgrid, (32, br)](x, out), ref_t)
for br in (8, 16, 4):
    k = make_transpose64(br)
    cases[f"transpose64 u (64,{br})"] = (lambda k=k, br=br: k[((C + 63) // 64, (R + 63) // 64), (64, br)](x, out), ref_t)
for name, (fn, ref) in cases.items():
    try:
        t = time_it(fn, ref)
        print(f"{name:40s} {t.median_ms:8.4f} ms  {dram / (t.median_ms * 1e-3) / 1e9:7.0f} GB/s  (p10 {t.p10_ms:.4f} p90 {t.p90_ms:.4f})", flush=True)
    except Exception as exc:
        print(name, "FAILED", type(exc).__name__, str(exc)[:300], flush=True)
