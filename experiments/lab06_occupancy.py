"""Lab 06 experiments: the occupancy calculator drawn, checked against a driver, and put to the test.

- `plot_calculator` draws resident warps per SM against block size, registers per thread and
  shared memory per block, as NVIDIA's occupancy calculator does, and marks the current
  configuration and its limiter; `explorer()` redraws it from ipywidgets sliders (notebook 06).
- `article_rules()` turns the seed article's fusion caps (<= 64 registers per thread, <= 32 KB of
  shared memory per block) into occupancy, block size by block size.
- The probes: a memory-bound (`out = a*x + y`) and a compute-bound kernel (FMA_ROUNDS dependent
  FMAs per element, a compile-time trip count: `probe_ptx` and `loop_instructions` show its loop
  is FMAs and little else), each with one and with four independent elements in flight per thread.
  Declared as benchmarks (`probe_benchmarks`: a full wave at the most blocks per SM, so
  `kernellab profile 06` has their DRAM bytes) and swept over occupancy (`occupancy_vs_speed`).
- `LAB` at the end declares the lab (kernellab.course.protocol): `kernellab bench 06` on a GPU
  validates, runs the benchmarks and records, one at a time in lab06.json (a run cut short keeps
  what it finished):
  1. `occupancy_vs_speed`: each probe at 2 to 64 resident warps per SM (occupancy set by unused
     dynamic shared memory, so the code never changes), against the copy bandwidth and the FP32
     peak; the seed article says memory-bound kernels need occupancy to keep requests in flight;
  2. `calculator_vs_driver` and `resources_vs_driver`: kernellab's audit of itself
     (kernellab.course.audit: the calculator and ptxas's figures against the driver, for sweep
     kernels and every lab's declared kernels);
  3. `linear_relu_register_caps` and `linear_relu_shared_sweep`: Lab 06.5's kernel under register
     caps and at each tile depth: registers, spills, shared memory, occupancy and TFLOP/s.
  `kernellab tour 06` validates, draws the calculator for TUNED and the measured figures (live
  on a GPU, the recorded H200 reference otherwise; the minutes-long sweeps only from the record).
"""

from __future__ import annotations

import collections
import functools
import re
import types
from pathlib import Path

import numpy as np

from kernellab.gpu import checks, device, timing
from kernellab.gpu.traffic import Ledger
from kernellab.show import plots
from kernellab.course import bench as harness
from kernellab.course import protocol, reference
from kernellab.course import audit
from kernellab.kernels import driver, jit, resources
from kernellab import occupancy as occ
from kernellab.course.claims import Claim, Missing, course_solution, need, says, states, target
from kernellab.show.progress import printing, progress_bar

NUMBER = "06"
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
    fig, (axes,) = plots.figure(3 * plots.PANEL_WIDTH_IN, plots.PANEL_HEIGHT_IN, ncols=3)
    head = f"{title}: " if title else ""
    fig.suptitle(f"{head}{arch.label}, block {block_size}, {registers} registers/thread, "
                 f"{shared_bytes} B shared/block -> {now.active_blocks} blocks, "
                 f"{now.active_warps}/{now.max_warps} warps ({now.occupancy:.0%}), limited by "
                 f"{' and '.join(now.limiters)}\n{CALCULATED}")
    for ax, (label, values, current, at, unit) in zip(axes, panels):
        values = list(values)
        warps = [at(v).active_warps for v in values]
        style = dict(marker=".", ms=4) if label.startswith("threads") else dict(drawstyle="steps-post")
        ax.plot([v / unit for v in values], warps, color="C0", **style)
        ax.plot([current / unit], [now.active_warps], "o", color="C3", ms=9, zorder=3)
        near_the_right = current > 0.6 * max(values)      # label to the left, off the right axis
        ax.annotate(f"{now.occupancy:.0%}: {' + '.join(now.limiters)}", (current / unit, now.active_warps),
                    textcoords="offset points", xytext=(-6 if near_the_right else 6, 8),
                    ha="right" if near_the_right else "left", color="C3", fontsize="small")
        ax.set_xlabel(label)
        ax.set_ylabel("resident warps per SM")
        ax.set_ylim(0, arch.max_warps_per_sm * 1.12)
        ax.grid(alpha=0.3)
        ax.secondary_yaxis("right", functions=(lambda w, m=arch.max_warps_per_sm: 100 * w / m,
                                               lambda p, m=arch.max_warps_per_sm: p * m / 100)
                           ).set_ylabel("occupancy (%)")
    return fig


def fitted_image(fig):
    """`fig` as a PNG that shrinks to the width it is shown in: displayed as a figure, it kept its
    full width in pixels inside the explorer's narrower box, which cut off the third panel."""
    import base64
    import io
    from IPython.display import HTML
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=plots.DPI)
    encoded = base64.b64encode(png.getvalue()).decode()
    return HTML(f'<img alt="occupancy calculator" style="max-width: 100%; height: auto" '
                f'src="data:image/png;base64,{encoded}">')


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
        display(fitted_image(fig))
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

PROBE_BLOCK = 64                                       # 2 warps: fine steps of occupancy
PROBE_LEVELS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32)      # blocks per SM: 2 .. 64 resident warps
STREAM_N = 1 << 26                                     # 3 x 256 MiB: far past the 60 MiB L2
FMA_N = 1 << 24
FMA_ROUNDS = 256                                       # 512 flops per 8 bytes: compute-bound
FMA_A, FMA_B = np.float32(0.999), np.float32(0.001)    # float32 constants keep the math in float32
STREAM_A = np.float32(1.5)
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64}   # others in ARCHITECTURES: 128
SIM_N, SIM_BLOCKS = 300, 2                             # the simulator: the loops run several times per thread


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
    """The compute-bound probe as first written, `rounds` an argument: its loop cannot unroll
    (compare its PTX with fma_kernel's: `probe_loops`). Not measured; shown."""
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
        for i, name in enumerate(n for n, (_, k, _) in PROBES.items() if k == kind):
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
        ax.set_title(f"{kind}-bound")
        ax.legend()
        ax.grid(alpha=0.3)
    return plots.save(fig, "lab06_occupancy_vs_speed", figures_dir), occupancy_headline(record)


def occupancy_headline(record: dict) -> str:
    """The fewest warps per SM at which each probe reaches 90% of its own best."""
    max_warps = occ.architecture(record["provenance"]["cc"]).max_warps_per_sm
    parts = []
    for name, (_, kind, _) in PROBES.items():
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
    ax_speed.legend(fontsize="small")
    ax_occ.set_xlabel("max_registers")
    ax_occ.set_ylabel("occupancy (%)")
    ax_occ.set_ylim(0, 105)
    ax_spill.set_ylabel("spill stores (bytes per thread, bars)")
    ax_occ.legend(fontsize="small", loc="lower left")
    best = max(record["rows"], key=lambda r: r["tflops"])
    key = (f"linear_relu fastest at cap {best['max_registers']}, tile_k {best['tile_k']}: "
           f"{best['tflops']:.1f} TFLOP/s at {best['occupancy']:.0%} occupancy")
    return plots.save(fig, "lab06_register_caps", figures_dir), key


def measured(name: str) -> dict | None:
    """A measurement of LAB live on a GPU, else the recorded H200 reference (None when none yet)."""
    return protocol.measured(LAB, name)


# --- the probes as benchmarks: a full wave at the most blocks per SM --------------------------------

def full_wave(kernel, args, n: int) -> int:
    """Blocks of PROBE_BLOCK for one full wave: the SM count x the blocks per SM the driver allows
    this kernel (as Triton sizes a persistent grid), never more than n needs. In the simulator
    SIM_BLOCKS, so the grid-stride loops run several times per thread."""
    needed = -(-n // PROBE_BLOCK)
    if device.is_simulator():
        return min(needed, SIM_BLOCKS)
    return min(needed, driver.driver_active_blocks(kernel, args, PROBE_BLOCK) * device.facts().sm_count)


def probe_variant(name: str) -> harness.Variant:
    """One probe launched as one full wave; the grid is found once, outside the timing (`setup`)."""
    kernel, kind, why = PROBES[name]

    def arguments(inputs, out):
        return (STREAM_A, inputs["x"], inputs["y"], out) if kind == "memory" else (inputs["x"], out)

    def setup(inputs, out):
        return {**inputs, "grid": full_wave(kernel, arguments(inputs, out), out.size)}, out

    def run(inputs, out):
        kernel[inputs["grid"], PROBE_BLOCK](*arguments(inputs, out))
        return out

    return harness.Variant(name, run, why, ledger=lambda n: probe_ledger(name, kind, n), setup=setup)


def probe_benchmarks(lab, torch) -> list[harness.Benchmark]:
    """The four probes at full occupancy, as data: `kernellab bench 06` times them against the
    run's ceilings and `kernellab profile 06` measures their DRAM bytes (the roofline's Lab 06 points)."""
    def of(kind):
        return [probe_variant(name) for name, (_, k, _) in PROBES.items() if k == kind]

    return [
        harness.Benchmark(
            name="memory_probe", axis="n", sizes=[1 << 20, 1 << 22, 1 << 24, STREAM_N], sim_sizes=[SIM_N],
            tour_sizes=[1 << 24],
            make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n), "y": checks.nonzero(rng, n)},
            reference=lambda host: probe_reference("memory", host), variants=of("memory"),
            flops=lambda n: probe_work("memory", n)[1]),
        harness.Benchmark(
            name="compute_probe", axis="n", sizes=[1 << 20, 1 << 22, FMA_N], sim_sizes=[SIM_N],
            tour_sizes=[1 << 22],
            make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
            reference=lambda host: probe_reference("compute", host), variants=of("compute"),
            rtol=1e-4,                                   # FMA_ROUNDS float32 roundings against float64
            flops=lambda n: probe_work("compute", n)[1]),
    ]


# --- kernellab's audit of itself, recorded with this lab -------------------------------------------

def audit_calculator(lab) -> dict:
    """The calculator against the driver (kernellab.course.audit) for the sweep kernels and every lab's."""
    declared, _ = audit.course_kernels()
    return audit.calculator_vs_driver(audit.sweep_kernels() + declared, reference.provenance())


def audit_resources(lab) -> dict:
    """ptxas's figures against the driver's (kernellab.course.audit) for the same kernels."""
    declared, undeclared = audit.course_kernels()
    return audit.resources_vs_driver(audit.sweep_kernels() + declared, undeclared, reference.provenance())


# --- the declaration: validate, figures, targets, key figure ------------------------------------------

def validate(lab, seed: int = 0) -> list[str]:
    """06.1-06.4 against the calculator, and every linear_relu configuration on an awkward shape
    (the probes validate as benchmarks)."""
    checked = validate_lab(lab)
    return [f"the lab against the calculator on {checked} configurations",
            *(f"linear_relu {name}" for name in validate_linear_relu(lab, seed=seed))]


def tuned_resources(lab) -> resources.Resources:
    """linear_relu_kernel (compiled for TUNED) as ptxas builds it for an H200."""
    return resources.kernel_resources(lab.linear_relu_kernel, None, cc=H200)


def draw_calculator_tuned(lab, records: dict, figures_dir: Path) -> Path:
    found = tuned_resources(lab)
    fig = plot_calculator(H200, lab.TUNED.block_size, found.registers_per_thread, found.static_shared_bytes,
                          title="linear_relu TUNED")
    return plots.save(fig, "lab06_calculator_tuned", figures_dir)


TARGET_PCT_OF_FP32_PEAK = 60     # issue 13: the compute-bound probe, on the clock's FP32 peak


def targets(lab, records: dict) -> dict:
    """The compute-bound probes' best over the occupancy sweep against the FP32 peak (SMs x lanes
    x 2 x clock, the issue's measure), and beside it against the FMA ceiling of the same run."""
    values = _probe_values(records)
    best = max(values["one"], values["four"])
    pct = 100 * best / values["peak"]
    goals = {"best_tflops": best, "fp32_peak_tflops": values["peak"], "pct_of_fp32_peak": pct,
             "fp32_peak_target_met": pct >= TARGET_PCT_OF_FP32_PEAK,
             "measured_fma_tflops": values["ceiling"], "pct_of_measured_fma": 100 * best / values["ceiling"]}
    print(f"Lab 06 target: compute-bound probe {best:.1f} TFLOP/s = {pct:.0f}% of the "
          f"FP32 peak {values['peak']:.1f} ({'PASS' if goals['fp32_peak_target_met'] else 'FAIL'}, target "
          f">= {TARGET_PCT_OF_FP32_PEAK}%); {goals['pct_of_measured_fma']:.0f}% of the FMA ceiling measured "
          f"in the same run ({values['ceiling']:.1f})")
    return {"compute_probe": goals}


def key_figure(lab, records: dict) -> str:
    found = tuned_resources(lab)
    now = occupancy_at(H200, lab.TUNED.block_size, found.registers_per_thread, found.static_shared_bytes)
    key = f"TUNED linear_relu {now.occupancy:.0%} on an H200 ({found.registers_per_thread} registers)"
    if "occupancy_vs_speed" in records:
        key += f"; {occupancy_headline(records['occupancy_vs_speed'])}"
    return key


# --- claims: what the discussion says, checked against the records -----------------------------

GEMM_KERNELS = {"naive": "matmul_naive_kernel", "tiled": "matmul_tiled_kernel",
                "register_tiled_2d": "matmul_register_tiled_2d_kernel",
                "register_tiled": "matmul_register_tiled_kernel",
                "double_buffered": "matmul_double_buffered_kernel",
                "double_buffered_capped": "matmul_double_buffered_capped_kernel"}


def _grid_values(records):
    """Lab 00's grid-stride kernel, its grid sized as a persistent grid: SMs x blocks per SM."""
    from experiments.lab00_indexing import BLOCK, grid_stride_pct
    kernels = {k["kernel"]: k for k in need(records, "resources_vs_driver", "kernels")}
    if "lab00.axpb_grid_stride_kernel" not in kernels:
        raise Missing("resources_vs_driver has no lab00.axpb_grid_stride_kernel")
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
    capped = need(records, "linear_relu_register_caps", "rows")
    within = [r for r in capped if r["registers"] <= 64]
    above = [r for r in capped if r["registers"] > 64]
    if not (within and above):
        raise Missing("linear_relu_register_caps has no rows on both sides of 64 registers")
    within, above = _fastest(within, "tflops"), _fastest(above, "tflops")
    return {"table": "\n".join(lines), "r04": best04["registers"], "r05": best05["registers"],
            "r06": best06["registers"], "size": need(records, "linear_relu_register_caps", "size"),
            "within": within["tflops"], "cap_within": within["max_registers"],
            "spills_within": within["spill_stores"], "above": above["tflops"],
            "cap_above": above["max_registers"] or "none", "gain": above["tflops"] / within["tflops"] - 1,
            "spread": max((r["p90_ms"] - r["p10_ms"]) / r["median_ms"] for r in (within, above))}


def _shared_values(records):
    sweep = need(records, "linear_relu_shared_sweep", "rows")
    best = _fastest(sweep, "tflops")
    within = [r for r in sweep if r["shared_bytes"] <= 32 * 1024]
    above = [r for r in sweep if r["shared_bytes"] > 32 * 1024]
    if not (within and above):
        raise Missing("linear_relu_shared_sweep has no tiles on both sides of 32 KB")
    table = ", ".join(f"{r['shared_bytes'] / 1024:.0f} KB: {r['occupancy']:.0%} {r['tflops']:.2f}" for r in sweep)
    return {"table": table, "cap": SHARED_SWEEP_CAP, "best_kb": best["shared_bytes"] / 1024,
            "best_occ": best["occupancy"], "best": best["tflops"],
            "best_within": _fastest(within, "tflops")["tflops"], "best_above": _fastest(above, "tflops")["tflops"],
            "agree": sum(r["driver_blocks"] == r["calculator_blocks"] for r in sweep), "rows": len(sweep)}


def _probe_values(records):
    record = need(records, "occupancy_vs_speed")
    loop = need(records, "occupancy_vs_speed", "fma_loop", "compute_bound")   # the probes' PTX loop
    peak = record["fp32_peak_gflops"]
    best = {name: max(r["gflops"] for r in record["rows"] if r["probe"] == name)
            for name in ("compute_bound", "compute_bound_ilp4")}
    return {"fma": loop["fma"], "other": loop["other"],
            "ceiling": need(records, "occupancy_vs_speed", "fma_ceiling_tflops"),
            "one": best["compute_bound"] / 1e3, "four": best["compute_bound_ilp4"] / 1e3, "peak": peak / 1e3,
            "pct": 100 * best["compute_bound"] / peak, "pct4": 100 * best["compute_bound_ilp4"] / peak,
            "best_pct": 100 * max(best.values()) / peak, "target": TARGET_PCT_OF_FP32_PEAK}


def _warps_for_90pct(record, probe, field):
    rows = [r for r in record["rows"] if r["probe"] == probe]
    best = max(r[field] for r in rows)
    return min(r["warps_per_sm"] for r in rows if r[field] >= 0.9 * best)


def memory_probe_warps(records):
    """The warps per SM the memory-bound probe needs for 90% of its best speed, with one and with
    four independent loads in flight per thread (Lab 09 reads it too)."""
    record = need(records, "occupancy_vs_speed")
    return {"one": _warps_for_90pct(record, "memory_bound", "gbps"),
            "four": _warps_for_90pct(record, "memory_bound_ilp4", "gbps")}


def _caps_values(records):
    rows = need(records, "linear_relu_register_caps", "rows")
    best = _fastest(rows, "tflops")
    lab = course_solution(NUMBER)
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
    return {"agree": sweep["agree"], "configurations": sweep["configurations"], "kernels": len(sweep["kernels"]),
            "seconds": sweep["seconds"], "complete": int(sweep["complete"])}


def _ptxas_values(records):
    found = need(records, "resources_vs_driver")
    return {"agree": found["agree"], "kernels": len(found["kernels"]), "undeclared": len(found["undeclared"])}


CLAIMS = [
    Claim("grid_as_persistent",
          "Sized as Triton sizes a persistent grid (the SM count x the blocks per SM the occupancy calculator "
          "allows), Lab 00's grid-stride kernel ({regs} registers, {block} threads: {bps} blocks per SM) gets "
          "{grid:,} blocks = {bps}x the SM count ({beyond} the article's 2-4x), and runs at {pct:.0f}% of copy, "
          "{vs} the {p2:.0f}% and {p4:.0f}% that the article's 2x and 4x give.",
          values=_grid_values,
          checks=(says("beyond", "bps", ">", 4, "beyond", "inside"), says("vs", "pct", ">", "p4", "above", "not above")),
          article="grid"),
    Claim("registers_table",
          "Registers against speed, one table across Labs 04-06:\n{table}\nThe fastest GEMM needs {r04} "
          "registers, the fastest softmax shape {r05}, the fastest linear_relu cap {r06}: {r04_words}.",
          values=_registers_values,
          checks=(says("r04_words", "r04", ">", 64, "the fastest GEMM is past the article's 64",
                       "the fastest GEMM is within the article's 64"),),
          explains="the GEMMs of Lab 04 at 64 registers or fewer are other algorithms (one output per "
                   "thread, no register tile), so the table says nothing about a cap by itself: the "
                   "registers verdict is the controlled comparison below, one kernel under register caps. "
                   "A controlled GEMM (the 8 x 8 register tile capped at 64) is not recorded"),
    Claim("registers_verdict",
          "linear_relu at {size}^3, one source compiled under register caps: at most 64 registers its best "
          "is {within:.2f} TFLOP/s (cap {cap_within}, {spills_within} B of spills), above 64 {above:.2f} "
          "(cap {cap_above}), {gain:+.1%} against one measurement's spread (p10 to p90) of at most {spread:.1%}: "
          "{verdict}.",
          values=_registers_values,
          checks=(says("verdict", "gain", ">", "spread", "more registers than 64 ran faster, by more than the spread",
                       "more than 64 registers ran no faster beyond the spread"),),
          article="registers",
          explains="under a cap ptxas spills what does not fit to local memory (the spills column); the "
                   "same algorithm on both sides of 64 is what makes this a verdict on the cap"),
    Claim("shared_sweep",
          "Shared memory per block against speed (linear_relu, 128 threads, capped at {cap} registers, the "
          "same kernel at each tile depth; occupancy, TFLOP/s): {table}. The calculator's blocks per SM "
          "equal the driver's for {agree} of {rows} tiles.",
          values=_shared_values, checks=(states("agree", ">=", "rows"),)),
    Claim("shared_verdict",
          "linear_relu, one kernel at tile depths on both sides of 32 KB of shared memory per block: the "
          "fastest tile uses {best_kb:.0f} KB ({best_occ:.0%} occupancy, {best:.2f} TFLOP/s); the best "
          "within 32 KB reaches {best_within:.2f}, the best above {best_above:.2f}: {verdict}.",
          values=_shared_values,
          checks=(says("verdict", "best_within", ">=", "best_above", "staying within 32 KB lost nothing here",
                       "a tile above 32 KB ran faster"),),
          article="shared"),
    Claim("compute_probe_peak",
          "The compute-bound probe (dependent FMAs, a compile-time trip count: its PTX loop holds {fma} "
          "fma.rn.f32 beside {other} other instructions) peaks at {one:.1f} TFLOP/s, "
          "{pct:.0f}% of the FP32 peak ({peak:.1f}: SMs x lanes x 2 x clock); with four chains per thread "
          "{four:.1f} ({pct4:.0f}%; target: the better of the two at least {target:.0f}%, it reaches "
          "{best_pct:.0f}%: {met}). The FMA ceiling "
          "kernellab measured in the same run: {ceiling:.1f}.",
          values=_probe_values, checks=(target("met", "best_pct", ">=", "target"),)),
    Claim("memory_needs_bytes_in_flight",
          "The memory-bound probe needs {one} warps per SM for 90% of its best speed with one element in "
          "flight per thread, and {four} with four: {verdict}.",
          values=memory_probe_warps,
          checks=(says("verdict", "four", "<", "one", "independent loads in a thread replace resident warps "
                       "(bytes in flight = warps x loads per thread x width)",
                       "four loads per thread did not lower the warps it needs"),)),
    Claim("caps_against_occupancy",
          "linear_relu at {size}^3: as written ({regs_written} registers, {occ_written:.0%} occupancy) "
          "{t_written:.2f} TFLOP/s; fastest at cap {cap}, tile_k {k} ({occ:.0%}, {spills} B of spills) "
          "{best:.2f}; TUNED, at its {occ_tuned:.0%} target, {t_tuned:.2f}. The fastest ran at {lower} "
          "occupancy than TUNED.",
          values=_caps_values, checks=(says("lower", "occ", "<", "occ_tuned", "a lower", "no lower"),)),
    Claim("calculator_equals_driver",
          "The calculator equals the driver on {agree:,} of the {configurations:,} configurations compared "
          "({kernels} kernels, {seconds:.0f} s); the sweep {coverage} (complete = {complete}).",
          headline="calculator = driver on {agree:,} of {configurations:,} configurations compared ({kernels} "
                   "kernels; the sweep {coverage})",
          values=_calculator_values,
          checks=(states("agree", ">=", "configurations"),
                  says("coverage", "complete", ">=", 1, "covered every kernel it was given",
                       "stopped at its time budget: the kernels after these were not compared"))),
    Claim("ptxas_equals_driver",
          "ptxas's registers, static shared memory and stack frame (what kernellab.kernels.resources computes "
          "without a GPU) equal the driver's for {agree} of {kernels} kernels, and so do the active blocks "
          "they imply; {undeclared} lab kernels declare no signature to compile.",
          values=_ptxas_values, checks=(states("agree", ">=", "kernels"),)),
]


LAB = protocol.Lab(
    number=NUMBER, title="occupancy",
    kernels=(protocol.Kernel("linear_relu_kernel", "2-D: one block per 64 x tile_m tile of out, "
                             "TUNED.block_size threads, a 4 x 4 patch of out each"),),
    references=("linear_relu_reference",),
    validate=validate,
    benchmarks=probe_benchmarks,
    measurements=(
        protocol.Measurement("occupancy_vs_speed", measure_occupancy_vs_speed,
                             "the probes at 2 to 64 resident warps per SM, set by unused shared memory"),
        protocol.Measurement("calculator_vs_driver", audit_calculator,
                             "kernellab's calculator against the driver's active blocks", in_tour=False),
        protocol.Measurement("linear_relu_register_caps", measure_register_caps,
                             "06.5's kernel under register caps: spills, occupancy, TFLOP/s", in_tour=False),
        protocol.Measurement("linear_relu_shared_sweep", measure_shared_sweep,
                             "06.5's kernel at each tile depth: shared memory per block against speed",
                             in_tour=False),
        protocol.Measurement("resources_vs_driver", audit_resources,
                             "ptxas's registers and shared memory against the driver's", in_tour=False),
    ),
    figures=(
        protocol.Figure("lab06_calculator_tuned", draw_calculator_tuned),
        protocol.Figure("lab06_occupancy_vs_speed",
                        lambda lab, records, d: plot_occupancy_vs_speed(records["occupancy_vs_speed"], d)[0],
                        needs=("occupancy_vs_speed",)),
        protocol.Figure("lab06_register_caps",
                        lambda lab, records, d: plot_register_caps(records["linear_relu_register_caps"], d)[0],
                        needs=("linear_relu_register_caps",)),
    ),
    claims=CLAIMS,
    targets=targets,
    key_figure=key_figure,
)
