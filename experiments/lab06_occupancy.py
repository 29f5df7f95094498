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

This module is the declaration, with the validation, the probes as benchmarks, the targets and the
key figure; the probes and the measurements live in lab06_measure, the calculator and the figures
in lab06_figures, the claims in lab06_claims, and the constants all of them share in
lab06_constants (re-exported here, with what tests, notebook 06 and Lab 09 read on the experiment).
"""

from __future__ import annotations

from kernellab.gpu import checks, device
from kernellab.course import bench as harness
from kernellab.course import claims, protocol
from kernellab.kernels import driver
from kernellab import occupancy as occ

from experiments.lab06_claims import CLAIMS, _probe_values
from experiments.lab06_constants import (
    FMA_N, H200, NUMBER, PROBE_BLOCK, SIM_BLOCKS, SIM_N, STREAM_A, STREAM_N, TARGET_PCT_OF_FP32_PEAK)
from experiments.lab06_figures import (
    draw_calculator_tuned, occupancy_at, occupancy_headline, plot_occupancy_vs_speed, plot_register_caps,
    tuned_resources)
from experiments.lab06_measure import (
    PROBES, audit_calculator, audit_resources, measure_occupancy_vs_speed, measure_register_caps,
    measure_shared_sweep, probe_ledger, probe_reference, probe_work, validate_linear_relu)

# Read on the experiment (`protocol.experiment("06")`) by tests/instruments, notebook 06 and Lab 09.
from experiments.lab06_claims import memory_probe_warps
from experiments.lab06_constants import FMA_ROUNDS
from experiments.lab06_figures import article_rules, explorer, format_rules, plot_calculator
from experiments.lab06_measure import format_loops, linear_relu_inputs, loop_instructions, probe_loops, stream_kernel


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


# --- the declaration: validate, targets, key figure ----------------------------------------------------

def validate(lab, seed: int = 0) -> list[str]:
    """06.1-06.4 against the calculator, and every linear_relu configuration on an awkward shape
    (the probes validate as benchmarks)."""
    checked = validate_lab(lab)
    return [f"the lab against the calculator on {checked} configurations",
            *(f"linear_relu {name}" for name in validate_linear_relu(lab, seed=seed))]


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


def take_away() -> str:
    """Notebook 06's last cell: the lesson in three lines, each figure from the records its claims
    read (live where this process measured them, the H200 reference otherwise)."""
    try:
        figures, sources = claims.figures_of(NUMBER, ("caps_against_occupancy", "memory_needs_bytes_in_flight"))
    except claims.Missing as missing:
        return f"What to take away: awaiting data ({missing})"
    means = "Occupancy is a means: " if figures["occ"] < figures["occ_tuned"] else ""
    in_flight = "Bytes in flight, not warps as such: " if figures["four"] < figures["one"] else ""
    top = "the sweep's top" if figures["one"] == figures["top"] else f"the sweep ends at {figures['top']}"
    return "\n".join((
        "What to take away",
        "  1. The scarcest resource (warp slots, registers, shared memory, blocks) sets the blocks an SM holds.",
        f"  2. {means}the fastest linear_relu ran {figures['best']:.2f} TFLOP/s at "
        f"{figures['occ']:.0%} occupancy, the solution's TUNED {figures['t_tuned']:.2f} at {figures['occ_tuned']:.0%}.",
        f"  3. {in_flight}the memory probe needs {figures['one']} warps per SM with one element in "
        f"flight per thread ({top}; at {figures['below']}, {figures['below_lo']:.1f}-{figures['below_hi']:.1f}%), "
        f"{figures['four']} with four, for 90% of its best speed.",
        f"  ({'; '.join(sources)})"))


def measured(name: str) -> dict | None:
    """A measurement of LAB live on a GPU, else the recorded H200 reference (None when none yet)."""
    return protocol.measured(LAB, name)


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
