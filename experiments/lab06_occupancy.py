"""Lab 06 experiments: the occupancy calculator drawn, checked against a driver, and put to the test.

- `plot_calculator` draws resident warps per SM against block size, registers per thread and
  shared memory per block, as NVIDIA's occupancy calculator does, and marks the current
  configuration and its limiter; `explorer()` redraws it from ipywidgets sliders (notebook 06).
- `article_rules()` turns the seed article's fusion caps (<= 64 registers per thread, <= 32 KB of
  shared memory per block) into occupancy, block size by block size.
- `bench(out_dir)` (on a GPU: `kernellab bench 06 --out DIR`) records in lab06.json, one record
  at a time (so a run cut short keeps what it finished):
  1. `calculator_vs_driver`: kernellab.occupancy against cuOccupancyMaxActiveBlocksPerMultiprocessor
     for real Numba kernels: registers 16-255 (kernels of growing size, some capped with
     max_registers), static shared memory 0-48 KiB, dynamic shared memory up to the opt-in limit
     (with the max-dynamic attribute at its default and raised), block sizes 1-1024, carveouts;
  2. `resources_vs_driver`: ptxas's figures (kernellab.kernels.resources, what a laptop computes) against
     the driver's attributes, for those kernels and every solutions/ kernel with declared SIGNATURES;
  3. `occupancy_vs_speed`: a memory-bound and a compute-bound kernel, each with one and with four
     independent elements in flight per thread, at 2 to 64 resident warps per SM (occupancy set by
     unused dynamic shared memory, so the code never changes), against the copy bandwidth and the
     FP32 peak; the seed article says memory-bound kernels need occupancy to keep requests in flight;
  4. `linear_relu_register_caps`: Lab 06.5's kernel under register caps: registers, spills,
     occupancy and TFLOP/s.
- `tour(figures_dir)` validates the lab against the calculator and the kernel on this device,
  then draws the calculator for TUNED and the measured figures (`measured(name)`: live on a GPU,
  the recorded H200 reference otherwise; the register-cap sweep only from the record).
"""

from __future__ import annotations

import functools

import dataclasses
import time
import types
from pathlib import Path

import numpy as np

from kernellab.gpu import checks, device, timing
from kernellab.show import plots
from kernellab.course import reference, target
from kernellab.kernels import driver, jit, resources
from kernellab import occupancy as occ
from kernellab.course.claims import Claim, Missing, need
from kernellab.show.progress import printing, progress_bar
from kernellab.course.protocol import TourResult
from numba import float32  # after kernellab, which chooses GPU or simulator before Numba loads

LAB = "06"
H200 = (9, 0)
cuda = device.cuda()

# --- the calculator, drawn -------------------------------------------------------------------------

CALCULATED = "calculated by kernellab.occupancy (the rules of cuda_occupancy.h), not measured"


def occupancy_at(cc, block_size, registers, shared_bytes, carveout=-1):
    """The calculator for `shared_bytes` of shared memory per block in all (allowed up to the opt-in
    limit, as if the kernel had raised its max-dynamic attribute)."""
    arch = occ.architecture(cc)
    return occ.occupancy(arch, block_size, registers, 0, shared_bytes,
                         max_dynamic_shared=arch.shared_per_block_optin, carveout=carveout)


def plot_calculator(cc, block_size, registers, shared_bytes, carveout=-1, title=""):
    """Three panels as NVIDIA's occupancy calculator draws them, the current configuration marked."""
    arch = occ.architecture(cc)
    now = occupancy_at(arch, block_size, registers, shared_bytes, carveout)
    step = 256
    panels = [
        ("threads per block", sorted({*range(arch.warp_size, arch.max_threads_per_block + 1,
                                             arch.warp_size), block_size}), block_size,
         lambda v: occupancy_at(arch, v, registers, shared_bytes, carveout), 1),
        ("registers per thread", range(0, arch.max_registers_per_thread + 1), registers,
         lambda v: occupancy_at(arch, block_size, v, shared_bytes, carveout), 1),
        ("shared memory per block (KiB)", range(0, arch.shared_per_block_optin + 1, step), shared_bytes,
         lambda v: occupancy_at(arch, block_size, registers, v, carveout), 1024),
    ]
    fig, axes = plots.plt.subplots(1, 3, figsize=(15, 4.2))
    head = f"{title}: " if title else ""
    fig.suptitle(f"{head}{arch.label}, block {block_size}, {registers} registers/thread, "
                 f"{shared_bytes} B shared/block -> {now.active_blocks} blocks, "
                 f"{now.active_warps}/{now.max_warps} warps ({now.occupancy:.0%}), limited by "
                 f"{' and '.join(now.limiters)}\n{CALCULATED}", fontsize=10)
    for ax, (label, values, current, at, unit) in zip(axes, panels):
        values = list(values)
        warps = [at(v).active_warps for v in values]
        style = dict(marker=".", ms=4) if label.startswith("threads") else dict(drawstyle="steps-post")
        ax.plot([v / unit for v in values], warps, color="C0", **style)
        ax.plot([current / unit], [now.active_warps], "o", color="C3", ms=9, zorder=3)
        ax.annotate(f"{now.occupancy:.0%}: {' + '.join(now.limiters)}", (current / unit, now.active_warps),
                    textcoords="offset points", xytext=(6, 8), color="C3", fontsize=9)
        ax.set_xlabel(label)
        ax.set_ylabel("resident warps per SM")
        ax.set_ylim(0, arch.max_warps_per_sm * 1.12)
        ax.grid(alpha=0.3)
        ax.secondary_yaxis("right", functions=(lambda w, m=arch.max_warps_per_sm: 100 * w / m,
                                               lambda p, m=arch.max_warps_per_sm: p * m / 100)
                           ).set_ylabel("occupancy (%)")
    fig.tight_layout()
    return fig


def explorer(cc=H200, block_size=128, registers=40, shared_bytes=12288):
    """Sliders for block size, registers and shared memory that redraw `plot_calculator` live."""
    import ipywidgets as widgets
    from IPython.display import display

    def draw(cc, block_size, registers, shared_kib):
        arch = occ.architecture(cc)
        shared = min(int(shared_kib * 1024), arch.shared_per_block_optin)  # the cc's opt-in limit
        now = occupancy_at(arch, block_size, registers, shared)
        print(f"occupancy {now.occupancy:.0%}: {now.active_warps} of {now.max_warps} warps per SM, "
              f"limited by {' and '.join(now.limiters)}")  # as text too, for readers and the browser test
        fig = plot_calculator(arch, block_size, registers, shared)
        display(fig)
        plots.plt.close(fig)

    choices = [(arch.label, f"{arch.cc[0]}.{arch.cc[1]}") for arch in occ.ARCHITECTURES.values()]
    cc_value = "{}.{}".format(*occ.parse_cc(cc))
    return widgets.interactive(
        draw,
        cc=widgets.Dropdown(options=choices, value=cc_value, description="cc"),
        block_size=widgets.IntSlider(value=block_size, min=32, max=1024, step=32,
                                     continuous_update=False, description="block"),
        registers=widgets.IntSlider(value=registers, min=0, max=255, continuous_update=False,
                                    description="registers"),
        shared_kib=widgets.FloatSlider(value=shared_bytes / 1024, min=0, max=227, step=0.5,
                                       continuous_update=False, description="shared KiB"))


# --- the seed article's fusion caps, in numbers ------------------------------------------------------

ARTICLE_REGISTERS = 64
ARTICLE_SHARED = 32 * 1024


def article_rules(cc=H200, block_sizes=(64, 128, 256, 512, 1024)) -> list[dict]:
    """Occupancy at the article's caps, per block size, and the most each resource may take for 100%."""
    arch = occ.architecture(cc)
    rows = []
    for block in block_sizes:
        def full(registers, shared):
            return occupancy_at(arch, block, registers, shared).occupancy == 1.0
        rows.append({
            "block": block,
            "at_64_registers": occupancy_at(arch, block, ARTICLE_REGISTERS, 0).occupancy,
            "at_32k_shared": occupancy_at(arch, block, 32, ARTICLE_SHARED).occupancy,
            "at_both": occupancy_at(arch, block, ARTICLE_REGISTERS, ARTICLE_SHARED).occupancy,
            "registers_for_100": max((r for r in range(arch.max_registers_per_thread + 1) if full(r, 0)),
                                     default=None),
            "shared_for_100": max((s for s in range(0, arch.shared_per_block_optin + 1, 128) if full(32, s)),
                                  default=None),
        })
    return rows


def format_rules(rows: list[dict], cc=H200) -> str:
    lines = [f"{occ.architecture(cc).label}: occupancy at the seed article's fusion caps",
             f"{'block':>6} {'64 regs':>8} {'32 KiB shared':>14} {'both':>6} {'regs for 100%':>14} "
             f"{'shared for 100%':>16}"]
    for r in rows:
        shared = f"{r['shared_for_100']} B" if r["shared_for_100"] is not None else "none"
        regs = r["registers_for_100"] if r["registers_for_100"] is not None else "none"
        lines.append(f"{r['block']:>6} {r['at_64_registers']:>8.0%} {r['at_32k_shared']:>14.0%} "
                     f"{r['at_both']:>6.0%} {regs:>14} {shared:>16}")
    return "\n".join(lines)


# --- validating the lab ------------------------------------------------------------------------------

def validate_lab(lab) -> int:
    """The lab's 06.1-06.4 against the calculator on a fixed grid of configurations; returns the count."""
    count = 0
    for arch in occ.ARCHITECTURES.values():
        for block in (1, 32, 33, 100, 256, 513, 1024):
            assert lab.blocks_limited_by_warps(arch, block) == occ.blocks_limited_by_warps(arch, block)
            for registers in (0, 16, 33, 40, 64, 65, 128, 255):
                expected = occ.blocks_limited_by_registers(arch, block, registers)
                assert lab.blocks_limited_by_registers(arch, block, registers) == expected, \
                    (arch.cc, block, registers)
                for shared in (0, 1, 4096, 30_000, 48 * 1024):
                    for carveout in (-1, 0, 50):
                        args = (arch.cc, block, registers, shared, 0, None, carveout)
                        mine, calc = lab.occupancy(*args), occ.occupancy(*args)
                        assert mine.active_blocks == calc.active_blocks, args
                        assert mine.limiters == calc.limiters, args
                        count += 1
        for shared in (0, 1, 1000, 48 * 1024, arch.shared_per_block_optin):
            assert (lab.blocks_limited_by_shared_memory(arch, shared)
                    == occ.blocks_limited_by_shared_memory(arch, shared)), (arch.cc, shared)
    return count


def validate_linear_relu(lab, configs=None, shape=(45, 37, 29), seed=0):
    """Every configuration in VARIANTS (or `configs`: name -> (config, kernel or None)) computes
    relu(x @ w + b) on an awkward shape."""
    m, k, n = shape
    rng = np.random.default_rng(seed)
    x, w, b = checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n)), checks.nonzero(rng, n)
    expected = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + b, 0.0)
    d_x, d_w, d_b = cuda.to_device(x), cuda.to_device(w), cuda.to_device(b)
    if configs is None:
        configs = {name: (config, None) for name, (config, _) in lab.VARIANTS.items()}
    for name, (config, kernel) in configs.items():
        out = checks.poisoned((m, n))
        lab.linear_relu(d_x, d_w, d_b, out=out, config=config, kernel=kernel)
        checks.assert_matches(out, expected, rtol=1e-5, what=f"linear_relu {name} {config}")
    return list(configs)


# --- occupancy against speed: the probes -------------------------------------------------------------

PROBE_BLOCK = 64                                       # 2 warps: fine steps of occupancy
PROBE_LEVELS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)      # blocks per SM: 2 .. 64 resident warps
STREAM_N = 1 << 26                                     # 3 x 256 MiB: far past the 60 MiB L2
FMA_N = 1 << 24
FMA_ROUNDS = 256                                       # 512 flops per 8 bytes: compute-bound
FMA_A, FMA_B = np.float32(0.999), np.float32(0.001)    # float32 constants keep the math in float32
STREAM_A = np.float32(1.5)
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64}   # others in ARCHITECTURES: 128
SIM_N, SIM_ROUNDS, SIM_BLOCKS = 300, 8, 2


@cuda.jit(shared_memory_carveout="MaxShared")
def stream_kernel(a, x, y, out):
    """Memory-bound: out = a * x + y, one element in flight per thread (12 bytes, 2 flops)."""
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = a * x[i] + y[i]                       # 2 reads, 1 write


@cuda.jit(shared_memory_carveout="MaxShared")
def stream_ilp4_kernel(a, x, y, out):
    """The same work with four independent elements in flight per thread: 8 loads before a store."""
    start, stride = cuda.grid(1), cuda.gridsize(1)
    n = out.size
    for i in range(start, n, 4 * stride):
        j, k, last = i + stride, i + 2 * stride, i + 3 * stride
        if last < n:
            xi, yi, xj, yj = x[i], y[i], x[j], y[j]
            xk, yk, xl, yl = x[k], y[k], x[last], y[last]
            out[i] = a * xi + yi
            out[j] = a * xj + yj
            out[k] = a * xk + yk
            out[last] = a * xl + yl
        else:                                          # the tail: whatever of the four exists
            for e in range(i, n, stride):
                out[e] = a * x[e] + y[e]


@functools.cache
def fma_probes(rounds: int) -> tuple:
    """The compute-bound probes with `rounds` FMAs per element fixed at compile time.

    The trip count is a constant of the closure and the counter an int32, so the compiler
    unrolls the chain and the loop costs one add, compare and branch per 64 FMAs (PTX, sm_90).
    A runtime `range(rounds)` instead puts a 64-bit compare, select and add beside every FMA:
    the FMA pipe then gets a quarter of the issue slots.
    """
    count = np.int32(rounds)

    @cuda.jit(shared_memory_carveout="MaxShared")
    def fma_kernel(x, out):
        """Compute-bound: `rounds` dependent FMAs per element, one chain per thread."""
        start, stride = cuda.grid(1), cuda.gridsize(1)
        for i in range(start, out.size, stride):
            v = x[i]
            done = np.int32(0)
            while done < count:
                v = v * FMA_A + FMA_B                  # waits for the previous FMA's result
                done += np.int32(1)
            out[i] = v

    @cuda.jit(shared_memory_carveout="MaxShared")
    def fma_ilp4_kernel(x, out):
        """The same work as four independent chains per thread: the FMA pipe fills with fewer warps."""
        start, stride = cuda.grid(1), cuda.gridsize(1)
        n = out.size
        for i in range(start, n, 4 * stride):
            j, k, last = i + stride, i + 2 * stride, i + 3 * stride
            v0 = x[i]
            v1 = x[j] if j < n else FMA_B
            v2 = x[k] if k < n else FMA_B
            v3 = x[last] if last < n else FMA_B
            done = np.int32(0)
            while done < count:
                v0 = v0 * FMA_A + FMA_B
                v1 = v1 * FMA_A + FMA_B
                v2 = v2 * FMA_A + FMA_B
                v3 = v3 * FMA_A + FMA_B
                done += np.int32(1)
            out[i] = v0
            if j < n:
                out[j] = v1
            if k < n:
                out[k] = v2
            if last < n:
                out[last] = v3

    return fma_kernel, fma_ilp4_kernel


def probes(rounds: int = FMA_ROUNDS) -> dict:
    """name: (kernel, kind, why); the compute-bound ones with `rounds` FMAs per element."""
    fma, fma_ilp4 = fma_probes(rounds)
    return {
        "memory_bound": (stream_kernel, "memory", "out = a*x + y, one element in flight per thread"),
        "memory_bound_ilp4": (stream_ilp4_kernel, "memory", "the same, four elements in flight per thread"),
        "compute_bound": (fma, "compute", "dependent FMAs per element, one chain per thread"),
        "compute_bound_ilp4": (fma_ilp4, "compute", "the same, four independent chains per thread"),
    }


def probe_inputs(kind: str, n: int, seed: int = 0) -> tuple[tuple, dict]:
    """(the kernel's device arguments, the host inputs) for one probe kind at size n; the output
    is the argument named `out` in the kernel, poisoned."""
    rng = np.random.default_rng(seed)
    host = {"x": checks.nonzero(rng, n)}
    out = checks.poisoned(n)
    if kind == "memory":
        host["y"] = checks.nonzero(rng, n)
        return (STREAM_A, cuda.to_device(host["x"]), cuda.to_device(host["y"]), out), host
    return (cuda.to_device(host["x"]), out), host


def probe_reference(kind: str, host: dict, rounds: int) -> np.ndarray:
    if kind == "memory":
        return float(STREAM_A) * host["x"].astype(np.float64) + host["y"]
    v = host["x"].astype(np.float64)
    for _ in range(rounds):
        v = v * float(FMA_A) + float(FMA_B)
    return v


def probe_work(kind: str, n: int, rounds: int) -> tuple[int, int]:
    """(bytes moved, flops) of one probe call."""
    return (12 * n, 2 * n) if kind == "memory" else (8 * n, 2 * rounds * n)


def validate_probes(n: int, rounds: int, blocks: int) -> list[str]:
    """Each probe on an awkward n with a small grid (the loops run several times per thread)."""
    for name, (kernel, kind, _) in probes(rounds).items():
        args, host = probe_inputs(kind, n)
        out = args[3] if kind == "memory" else args[1]
        kernel[blocks, PROBE_BLOCK](*args)
        checks.assert_matches(out, probe_reference(kind, host, rounds), rtol=1e-5, what=f"probe {name}")
    return list(probes(rounds))


def padding_for(blocks_per_sm: int, registers: int, static: int, carveout: int, cc) -> int | None:
    """The largest dynamic shared memory (unused padding) at which `blocks_per_sm` blocks of
    PROBE_BLOCK threads still fit, or None when no padding gives exactly that many."""
    arch = occ.architecture(cc)
    limit = arch.shared_per_block_optin - static

    def blocks(padding):
        return occ.occupancy(arch, PROBE_BLOCK, registers, static, padding, limit, carveout).active_blocks

    if blocks(0) < blocks_per_sm:
        return None
    low, high = 0, limit                      # blocks() never rises with padding: bisect
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if blocks(mid) >= blocks_per_sm else (low, mid - 1)
    return low if blocks(low) == blocks_per_sm else None


# --- talking to the driver (GPU only) ------------------------------------------------------------------

def cufunction(kernel, signature_or_args):
    """numba-cuda's loaded function for one overload (its `.handle` is the CUkernel launches use)."""
    return driver.compiled_overload(kernel, signature_or_args)._codelibrary.get_cufunc()


def get_attribute(cufunc, name: str) -> int:
    """A CU_FUNC_ATTRIBUTE_* of the kernel on this device."""
    from numba.cuda.cudadrv.driver import binding, driver
    attribute = getattr(binding.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
    return int(driver.cuKernelGetAttribute(attribute, cufunc.handle, cufunc.device.id))


def set_attribute(cufunc, name: str, value: int) -> int:
    """Set a CU_FUNC_ATTRIBUTE_* on the kernel for this device (as numba-cuda sets the carveout)
    and return the value the driver reads back."""
    from numba.cuda.cudadrv.driver import binding, driver
    attribute = getattr(binding.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
    driver.cuKernelSetAttribute(attribute, int(value), cufunc.handle, cufunc.device.id)
    return get_attribute(cufunc, name)


def driver_blocks(cufunc, block_size: int, dynamic_shared: int):
    """cuOccupancyMaxActiveBlocksPerMultiprocessor, or the error's name when the driver refuses."""
    from numba.cuda.cudadrv.driver import CudaAPIError
    try:
        return int(cuda.current_context().get_active_blocks_per_multiprocessor(
            cufunc, block_size, dynamic_shared))
    except CudaAPIError as exc:
        return f"error {getattr(exc.code, 'name', exc.code)}"


# --- 1. calculator against driver ----------------------------------------------------------------------

SWEEP_SIGNATURE = "void(float32[::1], float32[::1], int64)"
# (live floats, static shared bytes, max_registers): registers ~ live + 24 up to the 255 ceiling
SWEEP_KERNELS = (
    [(live, 0, None) for live in (1, 8, 24, 40, 56, 72, 104, 136, 200, 240)]
    + [(40, 0, cap) for cap in (16, 24, 32, 48, 56)]
    + [(8, shared, None) for shared in (1024, 10_000, 32 * 1024, 48 * 1024)]
    + [(72, 20 * 1024, None), (24, 40_000, 32)]
)
CARVEOUTS = (-1, 0, 10, 25, 50, 100)
EVERY_BLOCK = range(1, 1025)
SOME_BLOCKS = sorted({1, 2, 31, 32, 33, 48, 63, 64, 65, 96, 127, 128, 129, 160, 192, 224, 255, 256,
                      257, 288, 320, 352, 384, 416, 448, 480, 511, 512, 513, 544, 576, 608, 640,
                      672, 704, 736, 768, 800, 832, 864, 896, 928, 960, 992, 1000, 1023, 1024})


def sweep_kernel(live: int, shared_bytes: int = 0, max_registers: int | None = None):
    """(label, kernel) for a kernel that keeps `live` float32 values alive at once and declares
    `shared_bytes` of static shared memory. Written out as source: explicit scalars make the
    register count predictable (about live + 24), where a local array may stay in memory. Each
    gets its own name, which kernellab.kernels.resources' cache tells kernels apart by."""
    name = f"sweep_live{live}_shared{shared_bytes}_cap{max_registers or 'none'}"
    names = [f"v{j}" for j in range(live)]
    words = shared_bytes // 4
    lines = [f"def {name}(x, out, rounds):", "    i = cuda.grid(1)", "    n = x.size"]
    lines += [f"    {v} = x[(i + {j}) % n]" for j, v in enumerate(names)]
    lines += ["    for _ in range(rounds):"]
    lines += [f"        {v} = {v} * {names[(j + 1) % live]} + ONE" for j, v in enumerate(names)]
    if words:
        lines += [f"    tile = cuda.shared.array({words}, float32)",
                  f"    tile[cuda.threadIdx.x % {words}] = v0",
                  "    cuda.syncthreads()",
                  f"    v0 += tile[(cuda.threadIdx.x + 1) % {words}]"]
    lines += ["    if i < out.size:", f"        out[i] = {' + '.join(names)}"]
    namespace = {"cuda": cuda, "float32": float32, "ONE": np.float32(1.0)}
    exec("\n".join(lines), namespace)
    options = {} if max_registers is None else {"max_registers": max_registers}
    return name, jit.jit(**options)(namespace[name])


def dynamic_values(static: int, max_dynamic: int, arch) -> list[int]:
    """Dynamic shared sizes around every boundary that matters for this kernel."""
    values = {0, 1, 1000, 4096 + 5, 12_000, 30_000, max_dynamic - 1, max_dynamic, max_dynamic + 1,
              arch.shared_per_block - static + 1, 60_000, 100_000, 150_000, 200_000}
    return sorted(v for v in values if 0 <= v <= arch.shared_per_block_optin - static + 1)


def calculator_vs_driver(kernels, budget_s: float = 45.0) -> dict:
    """Every (kernel, carveout, max-dynamic attribute, dynamic shared, block size): the driver's
    active blocks per SM against the calculator fed the driver's registers and static shared."""
    arch = occ.architecture(device.facts().cc)
    started = time.perf_counter()
    total, agree, disagreements, per_kernel = 0, 0, [], []
    for label, kernel, signature in progress_bar(kernels, desc="calculator vs driver", unit="kernel"):
        try:
            summary, agreed, differ = sweep_one_kernel(label, kernel, signature, arch)
        except Exception as exc:  # one kernel that fails to build must not end the run
            per_kernel.append({"kernel": label, "error": f"{type(exc).__name__}: {exc}"})
            print(f"  {label}: ERROR {per_kernel[-1]['error'][:200]}")
            continue
        total, agree = total + summary["configurations"], agree + agreed
        disagreements += differ[:max(0, 200 - len(disagreements))]
        per_kernel.append(summary)
        if time.perf_counter() - started > budget_s:
            break
    seconds = time.perf_counter() - started
    print(f"calculator vs driver: {agree} of {total} configurations agree "
          f"({len(per_kernel)} kernels, {seconds:.0f} s)")
    for row in disagreements[:10]:
        print(f"  differs: {row}")
    return {"provenance": reference.provenance(), "configurations": total, "agree": agree,
            "kernels": per_kernel, "disagreements": disagreements, "seconds": seconds,
            "carveouts": list(CARVEOUTS), "complete": len(per_kernel) == len(kernels)}


def sweep_one_kernel(label, kernel, signature, arch) -> tuple[dict, int, list]:
    """One kernel's part of the sweep: (its summary, configurations agreeing, disagreements)."""
    found = resources.kernel_resources(kernel, signature, method="driver")
    cufunc = cufunction(kernel, signature)
    static, registers = found.static_shared_bytes, found.registers_per_thread
    original = {name: get_attribute(cufunc, name)
                for name in ("PREFERRED_SHARED_MEMORY_CARVEOUT", "MAX_DYNAMIC_SHARED_SIZE_BYTES")}
    checked, agree, disagreements = 0, 0, []
    for carveout in CARVEOUTS:
        carveout_read = set_attribute(cufunc, "PREFERRED_SHARED_MEMORY_CARVEOUT", carveout)
        for max_dynamic in sorted({arch.shared_per_block - static, arch.shared_per_block_optin - static}):
            max_read = set_attribute(cufunc, "MAX_DYNAMIC_SHARED_SIZE_BYTES", max_dynamic)
            for dynamic in dynamic_values(static, max_read, arch):
                full_sweep = carveout == -1 and dynamic in (0, max_read)
                for block in (EVERY_BLOCK if full_sweep else SOME_BLOCKS):
                    expected = occ.occupancy(arch, block, registers, static, dynamic, max_read,
                                             carveout).active_blocks
                    got = driver_blocks(cufunc, block, dynamic)
                    checked += 1
                    if got == expected:
                        agree += 1
                    else:
                        disagreements.append({
                            "kernel": label, "registers": registers, "static": static, "block": block,
                            "dynamic": dynamic, "max_dynamic": max_read, "carveout": carveout,
                            "carveout_read_back": carveout_read, "driver": got, "calculator": expected})
    for name, value in original.items():
        set_attribute(cufunc, name, value)
    summary = {"kernel": label, "registers": registers, "static_shared": static,
               "local_bytes": found.local_bytes, "configurations": checked, "agree": agree}
    return summary, agree, disagreements


# --- 2. resources against the driver ---------------------------------------------------------------------

def lab_kernels() -> tuple[list, list]:
    """(label, kernel, signature) for each kernel in solutions/lab*.py with a declared signature,
    and the labels of kernels that declare none (their resources need example arguments)."""
    found, undeclared, seen = [], [], set()
    for number in target.labs():
        module = target.load(number, "solutions")
        for name, value in sorted(vars(module).items()):
            try:
                signatures = jit.declared_signatures(value)
            except TypeError:                          # not a kernel, or a device function
                continue
            if id(value) in seen:
                continue
            seen.add(id(value))
            label = f"lab{number}.{name}"
            if signatures:
                found += [(label, value, sig) for sig in signatures]
            else:
                undeclared.append(label)
    return found, undeclared


def _figures(found: resources.Resources) -> dict:
    return {k: v for k, v in dataclasses.asdict(found).items() if k != "log"}


def resources_vs_driver(kernels, undeclared) -> dict:
    """ptxas's figures (what kernellab.kernels.resources computes on a laptop) against the driver's."""
    out = []
    for label, kernel, sig in kernels:
        try:
            (row,) = driver.driver_comparison([(kernel, sig)])
        except Exception as exc:  # one kernel that fails to build must not end the run
            out.append({"kernel": label, "signature": str(sig), "agree": False,
                        "error": f"{type(exc).__name__}: {exc}"})
            print(f"  {label:<44} ERROR {out[-1]['error'][:200]}")
            continue
        out.append({"kernel": label, "signature": str(sig), "agree": row["agree"],
                    "driver": _figures(row["driver"]), "ptxas": _figures(row["ptxas"]),
                    "ptxas_other_path": _figures(row["ptxas_other_path"]),
                    "active_blocks": {str(b): v for b, v in row["active_blocks"].items()}})
        print(f"  {label:<44} driver {row['driver'].registers_per_thread:>3} regs "
              f"{row['driver'].static_shared_bytes:>6} B  ptxas {row['ptxas'].registers_per_thread:>3} regs "
              f"{row['ptxas'].static_shared_bytes:>6} B  {'agree' if row['agree'] else 'DIFFER'}")
    agreeing = sum(r["agree"] for r in out)
    print(f"resources vs driver: {agreeing} of {len(out)} kernels agree; "
          f"{len(undeclared)} lab kernels declare no signature: {', '.join(undeclared) or 'none'}")
    return {"provenance": reference.provenance(), "kernels": out, "agree": agreeing,
            "undeclared": undeclared}


# --- 3. occupancy against speed ------------------------------------------------------------------------

def fp32_peak_gflops() -> float | None:
    """sm_count * FP32 lanes * 2 flops * clock, from the device's attributes (None if unknown)."""
    facts = device.facts()
    try:
        clock_khz = cuda.get_current_device().CLOCK_RATE
    except Exception:  # the attribute is informative only
        return None
    lanes = FP32_LANES_PER_SM.get(tuple(facts.cc), 128)
    return facts.sm_count * lanes * 2 * clock_khz * 1e3 / 1e9


def measure_occupancy_vs_speed(reps: int = 30) -> dict:
    """Each probe at each occupancy level: padding, resident warps (calculator and driver), speed."""
    facts = device.facts()
    copy = timing.ceilings()["copy"]
    peak = fp32_peak_gflops()
    rows = []
    for name, (kernel, kind, why) in probes().items():
        n, rounds = (STREAM_N, 0) if kind == "memory" else (FMA_N, FMA_ROUNDS)
        args, _ = probe_inputs(kind, n)
        moved, flops = probe_work(kind, n, rounds)
        found = resources.kernel_resources(kernel, args, method="driver")
        cufunc = cufunction(kernel, args)              # the overload these exact arguments launch
        carveout = set_attribute(cufunc, "PREFERRED_SHARED_MEMORY_CARVEOUT", 100)  # most shared memory
        set_attribute(cufunc, "MAX_DYNAMIC_SHARED_SIZE_BYTES",
                      occ.architecture(facts.cc).shared_per_block_optin - found.static_shared_bytes)
        for level in PROBE_LEVELS:
            padding = padding_for(level, found.registers_per_thread, found.static_shared_bytes,
                                  carveout, facts.cc)
            if padding is None:
                print(f"  {name}: {level} blocks/SM is out of reach "
                      f"({found.registers_per_thread} registers)")
                continue
            grid = level * facts.sm_count              # one full wave: every block resident at once
            launch = kernel[grid, PROBE_BLOCK, 0, padding]
            t = timing.time_gpu(lambda: launch(*args), warmup=3, reps=reps)
            seconds = t.median_ms * 1e-3
            row = {"probe": name, "kind": kind, "blocks_per_sm": level, "padding": padding,
                   "warps_per_sm": level * PROBE_BLOCK // 32,
                   "driver_blocks": driver_blocks(cufunc, PROBE_BLOCK, padding),
                   "registers": found.registers_per_thread, **t.as_dict(),
                   "gbps": moved / seconds / 1e9, "gflops": flops / seconds / 1e9}
            row["pct_of_ceiling"] = (100 * row["gbps"] / copy["gbps"] if kind == "memory" else
                                     100 * row["gflops"] / peak if peak else None)
            rows.append(row)
            figure = f"{row['gbps']:7.0f} GB/s" if kind == "memory" else f"{row['gflops']:8.0f} GFLOP/s"
            print(f"  {name:<20} {row['warps_per_sm']:>3} warps/SM (driver: {row['driver_blocks']} blocks) "
                  f"pad {padding:>6} B  {t}  {figure}")
    return {"provenance": reference.provenance(), "probe_block": PROBE_BLOCK, "stream_n": STREAM_N,
            "fma_n": FMA_N, "fma_rounds": FMA_ROUNDS, "copy_ceiling": copy, "fp32_peak_gflops": peak,
            "fma_loop": "compile-time trip count, int32 counter (fma_probes)",
            "why": {name: why for name, (_, _, why) in probes().items()}, "rows": rows}


# --- 4. linear_relu under register caps -------------------------------------------------------------------

CAPS = (None, 128, 80, 64, 48, 40, 32)
LINEAR_RELU_SIZE = 2048


def renamed_copy(kernel, name: str, **options):
    """The kernel's Python function compiled anew under another name, with `options`: each
    register cap is its own kernel in the figures and tables."""
    fn = kernel.py_func
    copy = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__qualname__ = name
    return jit.jit(**options)(copy)


def measure_register_caps(lab, reps: int = 20) -> dict:
    """Lab 06.5's kernel compiled with each register cap, at two tile depths: resources, occupancy, speed."""
    return measure_linear_relu(lab, [lab.LinearReluConfig(block_size=128, tile_k=tile_k, max_registers=cap)
                                     for cap in CAPS for tile_k in (32, 64)], reps)


# The article's "at most 32 KB of shared memory per block", measured: the tile depth sets the
# shared memory per block (384 B per unit of tile_k at 128 threads: 3 KB .. 48 KB), at a cap of
# 64 registers, where registers allow 8 blocks per SM, so that shared memory binds from ~27 KB on.
SHARED_SWEEP_TILE_K = (8, 16, 32, 48, 64, 96, 128)
SHARED_SWEEP_CAP = 64


def measure_shared_sweep(lab, reps: int = 20) -> dict:
    """Lab 06.5's kernel at each tile depth: shared memory per block against occupancy and speed."""
    return measure_linear_relu(lab, [lab.LinearReluConfig(block_size=128, tile_k=tile_k,
                                                          max_registers=SHARED_SWEEP_CAP)
                                     for tile_k in SHARED_SWEEP_TILE_K], reps)


def measure_linear_relu(lab, configs, reps: int = 20) -> dict:
    """Each configuration of linear_relu as its own kernel: resources, occupancy, speed."""
    facts = device.facts()
    size = LINEAR_RELU_SIZE
    rng = np.random.default_rng(0)
    x, w, b = (cuda.to_device(checks.nonzero(rng, shape)) for shape in ((size, size), (size, size), size))
    out = cuda.device_array((size, size), dtype=np.float32)
    flops = 2 * size ** 3
    rows = []
    for config in progress_bar(configs, desc="register caps", unit="config"):
        cap, tile_k = config.max_registers, config.tile_k
        kernel = renamed_copy(lab.linear_relu_kernel_for(config), f"linear_relu_k{tile_k}_cap{cap}",
                              **({} if cap is None else {"max_registers": cap}))
        validate_linear_relu(lab, {f"cap {cap}": (config, kernel)})
        sig = lab.SIGNATURES["linear_relu_kernel"]
        on_driver = resources.kernel_resources(kernel, sig, method="driver")
        on_ptxas = resources.kernel_resources(kernel, sig, method="ptxas")
        calc = occ.occupancy(facts.cc, config.block_size, on_driver.registers_per_thread,
                             on_driver.static_shared_bytes)
        t = timing.time_gpu(lambda: lab.linear_relu(x, w, b, out=out, config=config, kernel=kernel),
                            warmup=2, reps=reps)
        row = {"max_registers": cap, "tile_k": tile_k, "block_size": config.block_size,
               "shared_bytes": on_driver.static_shared_bytes,
               "registers": on_driver.registers_per_thread, "local_bytes": on_driver.local_bytes,
               "spill_stores": on_ptxas.spill_stores_bytes, "spill_loads": on_ptxas.spill_loads_bytes,
               "occupancy": calc.occupancy, "limiters": list(calc.limiters),
               "driver_blocks": driver.driver_active_blocks(kernel, sig, config.block_size),
               "calculator_blocks": calc.active_blocks, **t.as_dict(),
               "tflops": flops / (t.median_ms * 1e-3) / 1e12}
        rows.append(row)
        with printing():
            print(f"  cap {str(cap):>4} tile_k {tile_k:>3}: {row['registers']:>3} regs, "
                  f"{row['shared_bytes']:>6} B shared, spills {row['spill_stores']:>4} B, "
                  f"{calc.occupancy:4.0%} ({'+'.join(calc.limiters)}), "
                  f"{t.median_ms:7.3f} ms, {row['tflops']:5.2f} TFLOP/s")
    return {"provenance": reference.provenance(), "size": size, "rows": rows}


# --- figures from measurements ------------------------------------------------------------------------

def plot_occupancy_vs_speed(record: dict, figures_dir: Path) -> tuple[Path, str]:
    """Throughput against resident warps per SM, memory-bound beside compute-bound."""
    fig, (ax_mem, ax_fma) = plots.new_figure("Does occupancy buy speed? (occupancy set by unused "
                                             "dynamic shared memory; the code never changes)",
                                             record, ncols=2)
    max_warps = occ.architecture(record["provenance"]["cc"]).max_warps_per_sm
    panels = ((ax_mem, "memory", "gbps", "GB/s"), (ax_fma, "compute", "gflops", "GFLOP/s"))
    for ax, kind, field, unit in panels:
        for i, name in enumerate(n for n, (_, k, _) in probes().items() if k == kind):
            rows = [r for r in record["rows"] if r["probe"] == name]
            ax.plot([r["warps_per_sm"] for r in rows], [r[field] for r in rows], "o-", color=f"C{i}",
                    label=f"{name}: {record['why'][name]}")
        ceiling = (record["copy_ceiling"]["gbps"] if kind == "memory" else record.get("fp32_peak_gflops"))
        if ceiling:
            ax.axhline(ceiling, color="k", ls=":", label="copy ceiling (same run)" if kind == "memory"
                       else "FP32 peak (sm_count x lanes x 2 x clock)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(f"resident warps per SM (of {max_warps})")
        ax.set_ylabel(unit)
        ax.set_title(f"{kind}-bound", fontsize=10)
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    return plots.save(fig, "lab06_occupancy_vs_speed", figures_dir), occupancy_headline(record)


def occupancy_headline(record: dict) -> str:
    """The fewest warps per SM at which each probe reaches 90% of its own best."""
    max_warps = occ.architecture(record["provenance"]["cc"]).max_warps_per_sm
    parts = []
    for name, (_, kind, _) in probes().items():
        field = "gbps" if kind == "memory" else "gflops"
        rows = [r for r in record["rows"] if r["probe"] == name]
        if not rows:
            continue
        best = max(r[field] for r in rows)
        enough = min(r["warps_per_sm"] for r in rows if r[field] >= 0.9 * best)
        parts.append(f"{name} {enough / max_warps:.0%}")
    return "occupancy needed for 90% of best speed: " + ", ".join(parts)


def plot_register_caps(record: dict, figures_dir: Path) -> tuple[Path, str]:
    """TFLOP/s, occupancy and spills of linear_relu against its register cap."""
    fig, (ax_speed, ax_occ) = plots.new_figure(f"linear_relu {record['size']}^3 under register caps "
                                               "(Lab 06.5's kernel)", record, ncols=2)
    ax_spill = ax_occ.twinx()
    tiles = sorted({r["tile_k"] for r in record["rows"]})
    for i, tile_k in enumerate(tiles):
        rows = [r for r in record["rows"] if r["tile_k"] == tile_k]
        labels = [str(r["max_registers"] or "none") for r in rows]
        ax_speed.plot(labels, [r["tflops"] for r in rows], "o-", color=f"C{i}", label=f"tile_k {tile_k}")
        ax_occ.plot(labels, [100 * r["occupancy"] for r in rows], "o-", color=f"C{i}",
                    label=f"occupancy, tile_k {tile_k}")
    first = [r for r in record["rows"] if r["tile_k"] == tiles[0]]   # spills do not depend on tile_k
    ax_spill.bar([str(r["max_registers"] or "none") for r in first], [r["spill_stores"] or 0 for r in first],
                 alpha=0.2, color="k", label="spill stores")
    ax_speed.set_xlabel("max_registers")
    ax_speed.set_ylabel("TFLOP/s")
    ax_speed.legend(fontsize=8)
    ax_occ.set_xlabel("max_registers")
    ax_occ.set_ylabel("occupancy (%)")
    ax_occ.set_ylim(0, 105)
    ax_spill.set_ylabel("spill stores (bytes per thread, bars)")
    ax_occ.legend(fontsize=8, loc="lower left")
    best = max(record["rows"], key=lambda r: r["tflops"])
    key = (f"linear_relu fastest at cap {best['max_registers']}, tile_k {best['tile_k']}: "
           f"{best['tflops']:.1f} TFLOP/s at {best['occupancy']:.0%} occupancy")
    return plots.save(fig, "lab06_register_caps", figures_dir), key


def reference_records() -> dict:
    """The recorded measurements of this lab ({} when none were recorded yet)."""
    return (reference.load(LAB) or {}).get("records", {})


MEASUREMENTS = {
    "occupancy_vs_speed": lambda: measure_occupancy_vs_speed(reps=10),
    "linear_relu_register_caps": lambda: measure_register_caps(target.load(LAB)),
    "linear_relu_shared_sweep": lambda: measure_shared_sweep(target.load(LAB)),
}


def measured(name: str) -> dict | None:
    """A measurement live on a GPU, else the recorded H200 reference (None when none yet)."""
    return reference.live_or_recorded(LAB, name, MEASUREMENTS[name])


# --- bench and tour ------------------------------------------------------------------------------------

def bench(out_dir: Path | None = None) -> dict:
    """On a GPU: the measurements above, saved with provenance; in the simulator, validate only."""
    lab = target.load(LAB)
    checked = validate_lab(lab)
    variants = validate_linear_relu(lab)
    simulated = device.is_simulator()
    probe_names = validate_probes(SIM_N if simulated else 100_003, SIM_ROUNDS if simulated else 64,
                                  SIM_BLOCKS if simulated else 2 * device.facts().sm_count)
    print(f"validated: the lab against the calculator on {checked} configurations; linear_relu "
          f"{', '.join(variants)}; probes {', '.join(probe_names)}")
    if simulated:
        print("simulator: no driver and no timing exist; the recorded H200 measurements are in "
              "data/reference/h200/lab06.json")
        return {}
    sweep = [(label, kernel, SWEEP_SIGNATURE)
             for label, kernel in (sweep_kernel(*spec) for spec in SWEEP_KERNELS)]
    declared, undeclared = lab_kernels()
    parts = [
        ("occupancy_vs_speed", measure_occupancy_vs_speed),
        ("calculator_vs_driver", lambda: calculator_vs_driver(sweep + declared)),
        ("linear_relu_register_caps", lambda: measure_register_caps(lab)),
        ("linear_relu_shared_sweep", lambda: measure_shared_sweep(lab)),
        ("resources_vs_driver", lambda: resources_vs_driver(sweep + declared, undeclared)),
    ]
    record = {}
    for name, measure in parts:            # saved one by one: a run cut short keeps what it finished
        started = time.perf_counter()
        print(f"== {name}")
        record[name] = measure()
        reference.save(LAB, {name: record[name]}, out_dir)
        print(f"   {name}: {time.perf_counter() - started:.0f} s")
    figures = Path(out_dir) if out_dir else plots.FIGURES
    plot_occupancy_vs_speed(record["occupancy_vs_speed"], figures)
    plot_register_caps(record["linear_relu_register_caps"], figures)
    return record


def tour(figures_dir: Path) -> TourResult:
    lab = target.load(LAB)
    checked = validate_lab(lab)
    validate_linear_relu(lab)
    found = resources.kernel_resources(lab.linear_relu_kernel, None, cc=H200)
    tuned = lab.TUNED
    now = occupancy_at(H200, tuned.block_size, found.registers_per_thread, found.static_shared_bytes)
    fig = plot_calculator(H200, tuned.block_size, found.registers_per_thread, found.static_shared_bytes,
                          title="linear_relu TUNED")
    figures = [plots.save(fig, "lab06_calculator_tuned", figures_dir)]
    key = (f"lab = calculator on {checked} configurations; TUNED linear_relu "
           f"{now.occupancy:.0%} on an H200 ({found.registers_per_thread} registers)")
    speed = measured("occupancy_vs_speed")
    if speed:
        path, headline = plot_occupancy_vs_speed(speed, figures_dir)
        figures.append(path)
        key += f"; {headline}"
    else:
        key += "; no H200 reference data recorded yet for occupancy vs speed"
    caps = reference_records().get("linear_relu_register_caps")   # minutes to measure: bench only
    if caps:
        figures.append(plot_register_caps(caps, figures_dir)[0])
    return TourResult(True, key, tuple(str(f) for f in figures))


# --- claims: what the discussion says, checked against the records -----------------------------

GEMM_KERNELS = {"naive": "matmul_naive_kernel", "tiled": "matmul_tiled_kernel",
                "register_tiled_2d": "matmul_register_tiled_2d_kernel",
                "register_tiled": "matmul_register_tiled_kernel",
                "double_buffered": "matmul_double_buffered_kernel",
                "double_buffered_capped": "matmul_double_buffered_capped_kernel"}


def _grid_values(records):
    """Lab 00's grid-stride kernel, its grid sized as a persistent grid: SMs x blocks per SM."""
    from experiments.lab00_indexing import BLOCK, grid_stride_pct
    kernels = {k["kernel"]: k for k in need(records, "resources_vs_driver_all_labs", "kernels")}
    if "lab00.axpb_grid_stride_kernel" not in kernels:
        raise Missing("resources_vs_driver_all_labs has no lab00.axpb_grid_stride_kernel")
    found = kernels["lab00.axpb_grid_stride_kernel"]["driver"]
    sweep = need(records, "lab00", "grid_size_sweep")
    calc = occ.occupancy(tuple(found["cc"]), BLOCK, found["registers_per_thread"], found["static_shared_bytes"])
    pct = grid_stride_pct(records["lab00"])
    if calc.active_blocks not in pct:
        raise Missing(f"grid_size_sweep has no grid of {calc.active_blocks}x SMs")
    return {"regs": found["registers_per_thread"], "block": BLOCK, "bps": calc.active_blocks,
            "grid": calc.active_blocks * sweep["provenance"]["sm_count"], "pct": pct[calc.active_blocks],
            "p2": pct[2], "p4": pct[4]}


def _fastest(rows, speed):
    return max(rows, key=lambda r: r[speed])


def _registers_values(records):
    """One table across Labs 04-06: each lab's kernels, their registers and their speed."""
    lab04 = need(records, "lab04")
    matmul = need(lab04, "matmul")
    n = max(matmul["sizes"])
    regs04 = {r["kernel"]: r for r in need(lab04, "registers", "rows")}
    gemm = [{"name": name, "registers": regs04[kernel]["registers"], "occupancy": regs04[kernel]["occupancy"],
             "speed": next(r["gflops"] / 1e3 for r in matmul["rows"] if r["variant"] == name and r["size"] == n
                           and "gflops" in r)}
            for name, kernel in GEMM_KERNELS.items() if kernel in regs04]
    rows05 = need(records, "lab05", "shape_registers", "rows")
    shapes = [{"name": r["shape"], "registers": r["registers"], "occupancy": r["occupancy"],
               "speed": r["pct_of_copy"]} for r in rows05]
    caps = [{"name": f"cap {r['max_registers']}, tile_k {r['tile_k']}", "registers": r["registers"],
             "occupancy": r["occupancy"], "speed": r["tflops"]}
            for r in need(records, "linear_relu_register_caps", "rows")]
    lines = []
    for title, unit, rows in (("Lab 04 GEMM", "TFLOP/s", gemm), ("Lab 05 softmax 8192", "% of copy", shapes),
                              ("Lab 06 linear_relu", "TFLOP/s", caps)):
        best = _fastest(rows, "speed")
        lines.append(f"  {title:<20} " + ", ".join(
            f"{r['name']} {r['registers']}r {r['speed']:.1f}" for r in rows) + f" ({unit}); fastest: "
            f"{best['name']} at {best['registers']} registers")
    best04, best05, best06 = (_fastest(rows, "speed") for rows in (gemm, shapes, caps))
    within = [r for r in gemm if r["registers"] <= 64]
    return {"table": "\n".join(lines), "r04": best04["registers"], "r05": best05["registers"],
            "r06": best06["registers"], "best_within": _fastest(within, "speed")["speed"] if within else 0.0,
            "best04": best04["speed"]}


def _shared_values(records):
    sweep = need(records, "linear_relu_shared_sweep", "rows")
    best = _fastest(sweep, "tflops")
    within = [r for r in sweep if r["shared_bytes"] <= 32 * 1024]
    table = ", ".join(f"{r['shared_bytes'] / 1024:.0f} KB: {r['occupancy']:.0%} {r['tflops']:.2f}" for r in sweep)
    return {"table": table, "cap": SHARED_SWEEP_CAP, "best_kb": best["shared_bytes"] / 1024,
            "best_occ": best["occupancy"], "best": best["tflops"],
            "best_within": _fastest(within, "tflops")["tflops"] if within else 0.0,
            "agree": all(r["driver_blocks"] == r["calculator_blocks"] for r in sweep)}


def _probe_values(records):
    record = need(records, "occupancy_vs_speed")
    need(records, "occupancy_vs_speed", "fma_loop")     # recorded by the probes with a compile-time trip count
    peak = record["fp32_peak_gflops"]
    best = {name: max(r["gflops"] for r in record["rows"] if r["probe"] == name)
            for name in ("compute_bound", "compute_bound_ilp4")}
    return {"one": best["compute_bound"] / 1e3, "four": best["compute_bound_ilp4"] / 1e3, "peak": peak / 1e3,
            "pct": 100 * best["compute_bound"] / peak, "pct4": 100 * best["compute_bound_ilp4"] / peak}


def _warps_for_90pct(record, probe, field):
    rows = [r for r in record["rows"] if r["probe"] == probe]
    best = max(r[field] for r in rows)
    return min(r["warps_per_sm"] for r in rows if r[field] >= 0.9 * best)


def _memory_values(records):
    record = need(records, "occupancy_vs_speed")
    return {"one": _warps_for_90pct(record, "memory_bound", "gbps"),
            "four": _warps_for_90pct(record, "memory_bound_ilp4", "gbps")}


def _caps_values(records):
    rows = need(records, "linear_relu_register_caps", "rows")
    best = _fastest(rows, "tflops")
    lab = target.load(LAB, "solutions")
    tuned = next((r for r in rows if (r["max_registers"], r["tile_k"]) ==
                  (lab.TUNED.max_registers, lab.TUNED.tile_k)), None)
    if tuned is None:
        raise Missing("linear_relu_register_caps has no row for TUNED")
    as_written = next(r for r in rows if r["max_registers"] is None and r["tile_k"] == lab.AS_WRITTEN.tile_k)
    return {"size": need(records, "linear_relu_register_caps", "size"), "cap": best["max_registers"],
            "k": best["tile_k"], "best": best["tflops"], "occ": best["occupancy"], "spills": best["spill_stores"],
            "t_tuned": tuned["tflops"], "occ_tuned": tuned["occupancy"],
            "t_written": as_written["tflops"], "occ_written": as_written["occupancy"], "regs_written": as_written["registers"]}


def _calculator_values(records):
    sweep = need(records, "calculator_vs_driver")
    return {"agree": sweep["agree"], "configurations": sweep["configurations"], "kernels": len(sweep["kernels"])}


CLAIMS = [
    Claim("grid_as_persistent",
          "Sized as Triton sizes a persistent grid (the SM count x the blocks per SM the occupancy calculator "
          "allows), Lab 00's grid-stride kernel ({regs} registers, {block} threads: {bps} blocks per SM) gets "
          "{grid:,} blocks = {bps}x the SM count, and runs at {pct:.0f}% of copy; the article's 2x and 4x give "
          "{p2:.0f}% and {p4:.0f}%.",
          values=_grid_values, holds=lambda v: v["bps"] > 4 and v["pct"] > v["p4"], article="grid"),
    Claim("registers_table",
          "Registers against speed, one table across Labs 04-06:\n{table}\nThe fastest GEMM needs {r04} "
          "registers; within 64 the best GEMM reaches {best_within:.1f} TFLOP/s of its {best04:.1f}. The "
          "fastest softmax shape uses {r05}, the fastest linear_relu cap {r06}: 64 registers is a "
          "property of the kernel, not a rule of speed.",
          values=_registers_values, holds=lambda v: v["r04"] > 64 and v["best_within"] < v["best04"],
          article="registers"),
    Claim("shared_sweep",
          "Shared memory per block against speed (linear_relu, 128 threads, capped at {cap} registers; "
          "occupancy, TFLOP/s): {table}. The fastest tile uses {best_kb:.0f} KB ({best_occ:.0%} occupancy, "
          "{best:.2f} TFLOP/s); the best within 32 KB reaches {best_within:.2f}.",
          values=_shared_values, holds=lambda v: v["agree"], article="shared"),
    Claim("compute_probe_peak",
          "The compute-bound probe (dependent FMAs, a compile-time trip count) peaks at {one:.1f} TFLOP/s, "
          "{pct:.0f}% of the FP32 peak ({peak:.1f}); with four chains per thread {four:.1f} ({pct4:.0f}%).",
          values=_probe_values, holds=lambda v: v["pct"] >= 60 or v["pct4"] >= 60),
    Claim("memory_needs_bytes_in_flight",
          "The memory-bound probe needs {one} warps per SM for 90% of its best speed with one element in "
          "flight per thread, and {four} with four: independent loads in a thread replace resident warps.",
          values=_memory_values, holds=lambda v: v["four"] < v["one"]),
    Claim("caps_against_occupancy",
          "linear_relu at {size}^3: as written ({regs_written} registers, {occ_written:.0%} occupancy) "
          "{t_written:.2f} TFLOP/s; fastest at cap {cap}, tile_k {k} ({occ:.0%}, {spills} B of spills) "
          "{best:.2f}; TUNED, at its {occ_tuned:.0%} target, {t_tuned:.2f}. The highest occupancy was not "
          "the fastest.",
          values=_caps_values, holds=lambda v: v["occ"] < v["occ_tuned"] and v["t_tuned"] <= v["best"]),
    Claim("calculator_equals_driver",
          "The calculator equals the driver on {agree:,} of {configurations:,} configurations ({kernels} kernels).",
          values=_calculator_values, holds=lambda v: v["agree"] == v["configurations"]),
]
