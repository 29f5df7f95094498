"""Lab 06's measurements: the probes (their kernels, inputs, NumPy references and PTX loops),
each probe against occupancy, linear_relu under register caps and tile depths, and kernellab's
audit of itself; with the check of linear_relu's configurations that the declaration's `validate`
and each capped kernel share.

`lab06_occupancy` declares them (its docstring says what each record holds).
"""

from __future__ import annotations

import collections
import functools
import re
import types

import numpy as np

from kernellab.gpu import checks, device, timing
from kernellab.gpu.traffic import Ledger
from kernellab.course import reference
from kernellab.course import audit
from kernellab.kernels import driver, jit, resources
from kernellab import occupancy as occ
from kernellab.show.progress import printing, progress_bar

from experiments.lab06_constants import (
    FMA_A, FMA_B, FMA_N, FMA_ROUNDS, FP32_LANES_PER_SM, H200, PROBE_BLOCK, PROBE_LEVELS, SHARED_SWEEP_CAP,
    SHARED_SWEEP_TILE_K, STREAM_A, STREAM_N)

cuda = device.cuda()


# --- linear_relu's configurations against NumPy ------------------------------------------------

LINEAR_RELU_CHECK_SHAPE = (45, 37, 29)      # m, k, n: awkward, partial tiles in every direction


def linear_relu_inputs(rng, shape=LINEAR_RELU_CHECK_SHAPE) -> tuple:
    """Host x (m x k), w (k x n) and b (n) for linear_relu, away from zero."""
    m, k, n = shape
    return checks.nonzero(rng, (m, k)), checks.nonzero(rng, (k, n)), checks.nonzero(rng, n)


def validate_linear_relu(lab, configs=None, shape=LINEAR_RELU_CHECK_SHAPE, seed=0):
    """Every configuration in VARIANTS (or `configs`: name -> (config, kernel or None)) computes
    relu(x @ w + b) on an awkward shape, against the lab's float64 `linear_relu_reference`."""
    x, w, b = linear_relu_inputs(np.random.default_rng(seed), shape)
    expected = lab.linear_relu_reference(x, w, b)
    d_x, d_w, d_b = cuda.to_device(x), cuda.to_device(w), cuda.to_device(b)
    if configs is None:
        configs = {name: (config, None) for name, (config, _) in lab.VARIANTS.items()}
    for name, (config, kernel) in configs.items():
        out = checks.poisoned((shape[0], shape[2]))
        lab.linear_relu(d_x, d_w, d_b, out=out, config=config, kernel=kernel)
        checks.assert_matches(out, expected, rtol=1e-5, what=f"linear_relu {name} {config}")
    return list(configs)


# --- occupancy against speed: the probes -------------------------------------------------------------


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


ROUNDS = np.int32(FMA_ROUNDS)   # a global: Numba freezes it into the kernel, a compile-time trip count


@cuda.jit(shared_memory_carveout="MaxShared")
def fma_kernel(x, out):
    """Compute-bound: FMA_ROUNDS dependent FMAs per element, one chain per thread.

    The trip count is a compile-time constant and the counter an int32, so the compiler unrolls
    the chain: the loop costs one add, compare and branch per 64 FMAs (`probe_loops`; ptxas then
    unrolls it whole). A runtime `range(rounds)` (fma_runtime_trips_kernel) instead keeps 64-bit
    compares, selects and adds beside every few FMAs, and the FMA pipe loses their issue slots.
    """
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        v = x[i]
        done = np.int32(0)
        while done < ROUNDS:
            v = v * FMA_A + FMA_B                      # waits for the previous FMA's result
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
        while done < ROUNDS:
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


@cuda.jit(shared_memory_carveout="MaxShared")
def fma_runtime_trips_kernel(x, out, rounds):
    """The compute-bound probe as first written, `rounds` an argument: its loop unrolls only by 4,
    with loop overhead per 4 FMAs (compare its PTX with fma_kernel's: `probe_loops`). Not
    measured; shown."""
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        v = x[i]
        for _ in range(rounds):
            v = v * FMA_A + FMA_B
        out[i] = v


PROBES = {   # name: (kernel, kind, why)
    "memory_bound": (stream_kernel, "memory", "out = a*x + y, one element in flight per thread"),
    "memory_bound_ilp4": (stream_ilp4_kernel, "memory", "the same, four elements in flight per thread"),
    "compute_bound": (fma_kernel, "compute", "dependent FMAs per element, one chain per thread"),
    "compute_bound_ilp4": (fma_ilp4_kernel, "compute", "the same, four independent chains per thread"),
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


def probe_reference(kind: str, host: dict) -> np.ndarray:
    """The probe's result in float64 NumPy from its host inputs."""
    if kind == "memory":
        return float(STREAM_A) * host["x"].astype(np.float64) + host["y"]
    v = host["x"].astype(np.float64)
    for _ in range(FMA_ROUNDS):
        v = v * float(FMA_A) + float(FMA_B)
    return v


def probe_work(kind: str, n: int) -> tuple[int, int]:
    """(bytes moved, flops) of one probe call."""
    return (12 * n, 2 * n) if kind == "memory" else (8 * n, 2 * FMA_ROUNDS * n)


def probe_ledger(name: str, kind: str, n: int) -> Ledger:
    """What a probe reads and writes: x (and y) once, out once."""
    ledger = Ledger(name).add(name, "x", reads=n)
    if kind == "memory":
        ledger.add(name, "y", reads=n)
    return ledger.add(name, "out", writes=n)


# --- what the compiler made of the compute probes: their PTX ----------------------------------------

PROBE_SIGNATURE = "void(float32[::1], float32[::1])"
PTX_FORMS = {   # name: (kernel, signature): the two probes measured, and the form they replaced
    "compute_bound": (fma_kernel, PROBE_SIGNATURE),
    "compute_bound_ilp4": (fma_ilp4_kernel, PROBE_SIGNATURE),
    "runtime_trip_count": (fma_runtime_trips_kernel, "void(float32[::1], float32[::1], int64)"),
}
_LABEL = re.compile(r"^(\$?L__BB\w+):")
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$?L__BB\w+);")
_INSTRUCTION = re.compile(r"^(?:@!?%p\d+\s+)?([a-z][\w.]*)\s")
FMA_OPCODE = "fma.rn.f32"


@functools.cache
def probe_ptx(cc=H200) -> dict[str, str]:
    """name: the PTX of each form in PTX_FORMS for `cc`, compiled without a GPU (one child
    process in the simulator, about 20 s)."""
    return dict(zip(PTX_FORMS, audit.ptx(list(PTX_FORMS.values()), cc)))


def loop_instructions(ptx: str) -> dict:
    """The instructions of the innermost PTX loop that holds FP32 FMAs (a label and the branch
    back to it): {"fma": count, "other": count, "others": {opcode: count}}. Every instruction
    beside the FMAs takes an issue slot the FMA pipe does not get."""
    lines = [line.strip() for line in ptx.splitlines()]
    labels, loops = {}, []
    for i, line in enumerate(lines):
        if (label := _LABEL.match(line)):
            labels[label.group(1)] = i
        elif (branch := _BRANCH.search(line)) and branch.group(1) in labels:
            loops.append([m.group(1) for m in map(_INSTRUCTION.match, lines[labels[branch.group(1)] + 1:i + 1])
                          if m])
    holding = [opcodes for opcodes in loops if FMA_OPCODE in opcodes]
    if not holding:
        raise ValueError(f"no loop with {FMA_OPCODE} in this PTX")
    innermost = min(holding, key=len)
    others = collections.Counter(opcode for opcode in innermost if opcode != FMA_OPCODE)
    return {"fma": innermost.count(FMA_OPCODE), "other": sum(others.values()), "others": dict(others)}


def probe_loops(cc=H200) -> dict[str, dict]:
    """`loop_instructions` of each form in PTX_FORMS."""
    return {name: loop_instructions(text) for name, text in probe_ptx(cc).items()}


def format_loops(loops: dict[str, dict]) -> str:
    lines = [f"{'form':<20} {FMA_OPCODE:>11} {'other':>6}  the others in the loop"]
    lines += [f"{name:<20} {loop['fma']:>11} {loop['other']:>6}  "
              + ", ".join(f"{count} {opcode}" for opcode, count in sorted(loop["others"].items()))
              for name, loop in loops.items()]
    return "\n".join(lines)


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


# --- occupancy against speed ------------------------------------------------------------------------

def fp32_peak_gflops() -> float | None:
    """sm_count * FP32 lanes * 2 flops * clock, from the device's attributes (None if unknown)."""
    facts = device.facts()
    try:
        clock_khz = cuda.get_current_device().CLOCK_RATE
    except Exception:  # the attribute is informative only
        return None
    lanes = FP32_LANES_PER_SM.get(tuple(facts.cc), 128)
    return facts.sm_count * lanes * 2 * clock_khz * 1e3 / 1e9


def measure_occupancy_vs_speed(lab=None, reps: int = 30) -> dict:
    """Each probe at each occupancy level: padding, resident warps (calculator and driver), speed;
    and `fma_loop`, the PTX loop of the compute-bound probes (`probe_loops`)."""
    facts = device.facts()
    ceilings = timing.ceilings()                       # the run's: measured once per process
    copy = ceilings["copy"]
    peak = fp32_peak_gflops()
    rows = []
    for name, (kernel, kind, why) in PROBES.items():
        n = STREAM_N if kind == "memory" else FMA_N
        args, _ = probe_inputs(kind, n)
        moved, flops = probe_work(kind, n)
        found = resources.kernel_resources(kernel, args, method="driver")
        cufunc = audit.cufunction(kernel, args)        # the overload these exact arguments launch
        carveout = audit.set_attribute(cufunc, "PREFERRED_SHARED_MEMORY_CARVEOUT", 100)  # most shared
        audit.set_attribute(cufunc, "MAX_DYNAMIC_SHARED_SIZE_BYTES",
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
                   "driver_blocks": audit.driver_blocks(cufunc, PROBE_BLOCK, padding),
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
            "fma_ceiling_tflops": ceilings["fp32_fma_tflops"],
            "fma_loop": probe_loops(facts.cc),
            "why": {name: why for name, (_, _, why) in PROBES.items()}, "rows": rows}


# --- linear_relu under register caps and tile depths -------------------------------------------------------------------

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


# --- kernellab's audit of itself, recorded with this lab -------------------------------------------

def audit_calculator(lab) -> dict:
    """The calculator against the driver (kernellab.course.audit) for the sweep kernels and every lab's."""
    declared, _ = audit.course_kernels()
    kernels = audit.sweep_kernels() + declared
    return {**audit.calculator_vs_driver(kernels, reference.provenance()), "given": len(kernels)}


def audit_resources(lab) -> dict:
    """ptxas's figures against the driver's (kernellab.course.audit) for the same kernels."""
    declared, undeclared = audit.course_kernels()
    return audit.resources_vs_driver(audit.sweep_kernels() + declared, undeclared, reference.provenance())
