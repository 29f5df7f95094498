"""Diagnostics (not committed): Lab 09 scale_rows and transpose variants at 8192^2 on the H200."""
import numpy as np
import kernellab.lab  # noqa
from numba import cuda, float32, uint32, uint64, int32
from solutions import lab09_roofline as lab
from kernellab.gpu import timing
R = C = 8192
x = cuda.to_device(np.random.default_rng(1).standard_normal((R, C), dtype=np.float32))
scale = cuda.to_device(np.random.default_rng(2).standard_normal(R, dtype=np.float32))
out = cuda.device_array((R, C), np.float32)
host_x = x.copy_to_host(); host_s = scale.copy_to_host()
ref_scale = host_x * host_s[:, None]; ref_t = host_x.T

@cuda.jit
def s_2d(x, scale, out):
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = x[r, c] * scale[r]
@cuda.jit
def s_1d_u32(x, scale, out):
    i = cuda.grid(1)
    rows, cols = out.shape
    if i < rows * cols:
        ui = uint32(i); ucols = uint32(cols)
        row = ui // ucols; col = ui - row * ucols
        out[uint64(row), uint64(col)] = x[uint64(row), uint64(col)] * scale[uint64(row)]
@cuda.jit
def s_flat(x, scale, out):       # flat views, division only
    i = cuda.grid(1)
    cols = out.shape[1]
    xf = x.reshape(x.size); of = out.reshape(out.size)
    if i < of.size:
        of[i] = xf[i] * scale[i // cols]
@cuda.jit
def s_rowblock(x, scale, out):   # one block per row, columns strided by the block
    r = cuda.blockIdx.x
    s = scale[r]
    for c in range(cuda.threadIdx.x, out.shape[1], cuda.blockDim.x):
        out[r, c] = x[r, c] * s
@cuda.jit
def s_2d_u(x, scale, out):
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[uint64(r), uint64(c)] = x[uint64(r), uint64(c)] * scale[uint64(r)]
@cuda.jit
def s_2d_4(x, scale, out):  # 4 columns per thread, a block-width apart
    c0, r = cuda.grid(2)
    if r < out.shape[0]:
        s = scale[r]
        stride = cuda.gridDim.x * cuda.blockDim.x
        for k in range(4):
            c = c0 + k * stride
            if c < out.shape[1]:
                out[r, c] = x[r, c] * s
@cuda.jit
def copy2d(x, out):
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = x[r, c]

T, BR = 32, 8
@cuda.jit
def t_u(x, out):
    tile = cuda.shared.array((32, 33), float32)
    rows, cols = x.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    fr, fc = cuda.blockIdx.y * 32, cuda.blockIdx.x * 32
    for k in range(0, 32, 8):
        r, c = fr + ty + k, fc + tx
        if r < rows and c < cols:
            tile[uint64(ty + k), uint64(tx)] = x[uint64(r), uint64(c)]
    cuda.syncthreads()
    for k in range(0, 32, 8):
        r, c = fc + ty + k, fr + tx
        if r < cols and c < rows:
            out[uint64(r), uint64(c)] = tile[uint64(tx), uint64(ty + k)]
@cuda.jit
def t_32x32(x, out):   # one element per thread, block (32, 32)
    tile = cuda.shared.array((32, 33), float32)
    rows, cols = x.shape
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    fr, fc = cuda.blockIdx.y * 32, cuda.blockIdx.x * 32
    r, c = fr + ty, fc + tx
    if r < rows and c < cols:
        tile[ty, tx] = x[r, c]
    cuda.syncthreads()
    r, c = fc + ty, fr + tx
    if r < cols and c < rows:
        out[r, c] = tile[tx, ty]
@cuda.jit
def t_i32(x, out):  # 32-bit arithmetic throughout
    tile = cuda.shared.array((32, 33), float32)
    rows, cols = int32(x.shape[0]), int32(x.shape[1])
    tx, ty = int32(cuda.threadIdx.x), int32(cuda.threadIdx.y)
    fr, fc = int32(cuda.blockIdx.y) * 32, int32(cuda.blockIdx.x) * 32
    for k in range(0, 32, 8):
        r, c = fr + ty + int32(k), fc + tx
        if r < rows and c < cols:
            tile[uint32(ty + k), uint32(tx)] = x[uint32(r), uint32(c)]
    cuda.syncthreads()
    for k in range(0, 32, 8):
        r, c = fc + ty + int32(k), fr + tx
        if r < cols and c < rows:
            out[uint32(r), uint32(c)] = tile[uint32(tx), uint32(ty + k)]

def gb(t, nbytes): return nbytes / (t.median_ms * 1e-3) / 1e9
def time_it(fn, check=None):
    fn(); cuda.synchronize()
    if check is not None:
        assert np.allclose(out.copy_to_host(), check), "wrong"
    return timing.time_gpu(fn, warmup=5, reps=30)
copy_ceiling = timing.copy_ceiling() if hasattr(timing, "copy_ceiling") else None
print("copy ceiling", copy_ceiling if copy_ceiling is None else getattr(copy_ceiling, "gbps", copy_ceiling))
dram = 2 * R * C * 4
def g2(block): return ((C + block[0] - 1) // block[0], (R + block[1] - 1) // block[1]), block
cases = {
    "copy2d (32,8)": (lambda: copy2d[g2((32, 8))](x, out), host_x),
    "d2d memcpy": (lambda: out.copy_to_device(x), host_x),
    "scale_rows 1d/128 (lab)": (lambda: lab.scale_rows(x, scale, out=out), ref_scale),
    "scale_rows 1d/256": (lambda: lab.scale_rows(x, scale, out=out, block=256), ref_scale),
    "scale 1d u32 /256": (lambda: s_1d_u32[(R * C + 255) // 256, 256](x, scale, out), ref_scale),
    "scale flat /256": (lambda: s_flat[(R * C + 255) // 256, 256](x, scale, out), ref_scale),
    "scale 2d (32,8)": (lambda: s_2d[g2((32, 8))](x, scale, out), ref_scale),
    "scale 2d (128,1)": (lambda: s_2d[g2((128, 1))](x, scale, out), ref_scale),
    "scale 2d (256,1)": (lambda: s_2d[g2((256, 1))](x, scale, out), ref_scale),
    "scale 2d u (32,8)": (lambda: s_2d_u[g2((32, 8))](x, scale, out), ref_scale),
    "scale 2d x4 (256,1)": (lambda: s_2d_4[((C // 4 + 255) // 256, R), (256, 1)](x, scale, out), ref_scale),
    "scale rowblock 256": (lambda: s_rowblock[R, 256](x, scale, out), ref_scale),
    "scale rowblock 1024": (lambda: s_rowblock[R, 1024](x, scale, out), ref_scale),
    "transpose naive": (lambda: lab.transpose_naive(x, out=out), ref_t),
    "transpose (lab)": (lambda: lab.transpose(x, out=out), ref_t),
    "transpose unsigned": (lambda: t_u[lab.transpose_grid(host_x), (32, 8)](x, out), ref_t),
    "transpose 32x32": (lambda: t_32x32[lab.transpose_grid(host_x), (32, 32)](x, out), ref_t),
    "transpose int32": (lambda: t_i32[lab.transpose_grid(host_x), (32, 8)](x, out), ref_t),
}
for name, (fn, ref) in cases.items():
    try:
        t = time_it(fn, ref)
        print(f"{name:28s} {t.median_ms:8.4f} ms  DRAM-pattern {gb(t, dram):7.0f} GB/s  (p10 {t.p10_ms:.4f} p90 {t.p90_ms:.4f})")
    except Exception as exc:
        print(name, "FAILED", type(exc).__name__, str(exc)[:200])
for name, k in (("scale_rows_kernel", lab.scale_rows_kernel), ("s_2d", s_2d), ("s_rowblock", s_rowblock), ("transpose_kernel", lab.transpose_kernel), ("t_u", t_u), ("t_i32", t_i32)):
    try:
        print(name, "regs", {str(sig): k.get_regs_per_thread(sig) for sig in k.signatures})
    except Exception as exc:
        print(name, "regs?", exc)
