"""The benchmark harness every lab uses: validate first, then time, then report against a ceiling.

A benchmark is data: a sweep axis, its sizes, how to make inputs, a float64 NumPy reference,
and the variants to compare (each with the bytes it declares, as a `traffic.Ledger`).

    from kernellab.course import bench
    from kernellab.gpu.traffic import Ledger

    def copy_ledger(n):
        return Ledger("copy").add("copy", "x", reads=n).add("copy", "out", writes=n)

    COPY = bench.Benchmark(
        name="copy", axis="n", sizes=[2**k for k in range(10, 27, 2)], sim_sizes=[300],
        make_inputs=lambda rng, n: {"x": checks.nonzero(rng, n)},
        reference=lambda inputs: inputs["x"].astype(np.float64),
        variants=[bench.Variant("copy", lambda d, out: lab.copy(d["x"], out=out),
                                "one read, one write per element", ledger=copy_ledger)])
    result = bench.run(COPY, lab="01", out_dir=out_dir)   # a dict; also JSON + PNG

What `run` does, per size (the sweep axis) and per variant:
1. Validates: fresh random inputs (`make_inputs(rng, size)`, host arrays; any non-array value is
   passed through as is), the output poisoned (NaN), one call, then the relative error against
   `reference(host_inputs)` (float64) must be <= `rtol`, and the launches are recorded.
   A variant that fails is reported (`error` in its row) and not timed; the others go on.
2. Times (GPU only) with CUDA events (`timing.time_gpu`): warm-up, `reps` samples, each the mean
   of enough back-to-back calls to last ~1 ms (at most MAX_INNER), the host's submit held outside
   the window (`host_paced=True` leaves it inside, for a benchmark whose subject is what an eager
   caller waits: launches the GPU runs as fast as the host submits them); the median and
   p10/p90. When one input set (inputs + output) fits in L2, several sets are made and the
   calls rotate through them, so a variant is not timed on data a previous call left in cache
   (`input_sets`, `l2_resident`).
3. Reports ms, GB/s from the variant's requested bytes (`ledger(size).total_bytes`: what the code
   asks for, not DRAM traffic, which `kernellab profile` measures), % of the copy ceiling, and %
   of the ceiling of the row's own read:write mix (`ceiling_gbps`, `ceiling_mix` says how it was
   chosen: `timing.ceiling_for_mix` on the ledger's write fraction). The run's ceilings
   (`timing.ceilings`, once per process) go into every record: copy and stream GB/s by mix, FP32
   FMA TFLOP/s, the empty-launch floor small sizes sit on, torch's/CuPy's copy where importable.
   A row above 100% of its mix's ceiling by more than the two timings' resolution (half of each
   one's p10-p90 spread, added; within it the row is `at_ceiling`) is an instrument error
   (`instrument_error`), not a
   result. (A 4:1 kernel may beat the copy: HBM reads back to back outrun a 1:1 copy.)
In the simulator it validates at `sim_sizes`, checks each ledger against the traffic meter's count
of what the kernels really loaded and stored (inputs named by their keys, the output `out`),
says plainly that no timing exists, and writes nothing.

The variant contract: `run(inputs, out)` takes the device inputs (same keys as make_inputs) and a
device output of `out_shape`/`out_dtype` (default: the reference's shape, float32), and returns
the output (normally `out`; anything with `copy_to_host` or `__cuda_array_interface__`, e.g. a
torch tensor, is accepted). `setup(inputs, out) -> (inputs, out)`, if given, converts them once,
outside the timed region (e.g. to torch tensors with `torch.as_tensor(a, device="cuda")`).
`baselines` are variants from outside the course (torch eager, torch.compile): validated and
timed alike, drawn dashed. `optional_torch()` imports torch only on a GPU, or returns None.

Result (JSON-ready; `reference.save` stores it per benchmark name, with `provenance`):
    {"benchmark", "axis", "sizes", "live", "host_paced", "ok", "provenance", "ceilings" (timing.ceilings),
     "copy_gbps", "copy" (how it was measured), "launch_floor_ms", "bytes_kind",
     "instrument_errors",
     "variants": {name: {"why", "baseline"}},
     "rows": [{"size", "variant", "ok", "error", "rel_error", "launches", "bytes", "ledger",
               "write_fraction", "median_ms", "p10_ms", "p90_ms", "reps", "inner", "gbps",
               "pct_of_copy", "ceiling_gbps", "ceiling_mix", "pct_of_ceiling", "gflops", "input_sets", "l2_resident", "host_exposed", "instrument_error"}]}
Timing fields are absent in the simulator, where `live` is False and `timing` says why.
`run_repeats` (`kernellab bench --repeat N`) runs each lab in N fresh processes; `combine_repeats`
keeps every repeat, merges run results (median and range over repeats: `repeat_ms`) and judges
each target on the worst repeat (`targets_over_repeats`).
`rows_for(result, variant)`, `row(result, variant, size)`, `failures(result)` and `table(result)`
read it back (e.g. from reference data).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from kernellab.gpu import checks, device, timing, traffic
from kernellab.show import plots
from kernellab.course import reference, target
from kernellab.gpu.launches import record_launches
from kernellab.show.progress import progress_bar

cuda = device.cuda()

REQUESTED_BYTES = ("requested bytes: the variant's ledger (each load and store the code asks for), "
                   "not DRAM traffic; `kernellab profile` measures DRAM bytes")
SAMPLE_MS = 1.0          # each timing sample lasts about this long (back-to-back calls)
MAX_INNER = 50           # ...but never more calls than this per sample (each sample is held: see timing.time_gpu)
MAX_INPUT_SETS = 64      # rotation: at most this many input sets per size
ROTATE_L2_MULTIPLE = 3   # ...covering this many times the L2 size when they are small


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way to compute the benchmark's result, with one line of why it exists."""

    name: str
    run: Callable[[dict, Any], Any]                 # run(device_inputs, out) -> out
    why: str
    ledger: Callable[[Any], traffic.Ledger] | None = None   # ledger(size): the bytes it moves
    setup: Callable[[dict, Any], tuple] | None = None       # setup(inputs, out) -> (inputs, out)


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """A sweep axis x variants, declared as data."""

    name: str
    axis: str                                       # what `sizes` measure, e.g. "n" or "elements per task"
    sizes: Sequence[Any]                            # the sweep on a GPU (JSON values: ints, usually)
    sim_sizes: Sequence[Any]                        # the (tiny) sizes validated in the simulator
    make_inputs: Callable[[np.random.Generator, Any], dict]
    reference: Callable[[dict], np.ndarray]         # float64 result from the host inputs
    variants: Sequence[Variant]
    rtol: float = 1e-5
    baselines: Sequence[Variant] = ()
    out_shape: Callable[[dict], tuple] | None = None  # default: the reference's shape
    out_dtype: Any = np.float32
    flops: Callable[[Any], float] | None = None     # FLOPs per call at a size, if worth reporting
    seed: int = 0
    profile_size: Any = None                        # the size `kernellab profile` runs (default: the largest)
    tour_sizes: Sequence[Any] | None = None         # the quick live sweep `kernellab tour` runs (default: sizes)
    host_paced: bool = False                        # time with the host's submit inside the window

    def __post_init__(self):
        names = [v.name for v in (*self.variants, *self.baselines)]
        if len(set(names)) != len(names):
            raise ValueError(f"benchmark {self.name!r}: variant names repeat: {names}")
        if not self.variants:
            raise ValueError(f"benchmark {self.name!r} declares no variants")


def optional_torch():
    """torch, when this is a GPU run and torch with CUDA is importable; otherwise None.

    torch is not a kernellab dependency: baselines are added only where it happens to exist.
    """
    if device.is_simulator():
        return None
    try:
        import torch
    except Exception:  # not installed, or broken: either way there is no baseline
        return None
    return torch if torch.cuda.is_available() else None


def torch_variant(torch, name: str, fn, why: str, ledger=None) -> Variant:
    """A baseline from a torch function `fn(**tensors)` that returns its result as a new tensor.

    The device arrays are wrapped once as torch tensors (shared memory, no copy), outside timing.
    """
    def setup(inputs, out):
        wrapped = {key: torch.as_tensor(value, device="cuda") if hasattr(value, "__cuda_array_interface__")
                   else value for key, value in inputs.items()}
        return wrapped, out

    return Variant(name, lambda inputs, out: fn(**inputs), why, ledger=ledger, setup=setup)


# --- running -------------------------------------------------------------------------------------

def _to_device(inputs: dict) -> dict:
    return {key: cuda.to_device(value) if isinstance(value, np.ndarray) else value
            for key, value in inputs.items()}


def host_copy(result) -> np.ndarray:
    """A variant's result on the host, whatever kind of device array it returned."""
    if hasattr(result, "copy_to_host"):
        return result.copy_to_host()
    if hasattr(result, "__cuda_array_interface__"):
        return cuda.as_cuda_array(result).copy_to_host()
    return np.asarray(result)


def _nbytes(inputs: dict) -> int:
    return sum(v.nbytes for v in inputs.values() if isinstance(v, np.ndarray))


@dataclasses.dataclass
class _InputSet:
    host: dict
    device: dict
    out: Any


def _make_set(host: dict, shape, dtype) -> _InputSet:
    return _InputSet(host, _to_device(host), checks.poisoned(shape, dtype))


def _validate(benchmark, variant, input_set, expected, size, use_meter) -> dict:
    """One poisoned call checked against the reference; in the simulator, the ledger against the meter."""
    row: dict = {"size": size, "variant": variant.name, "ok": False}
    ledger = variant.ledger(size) if variant.ledger else None
    if ledger is not None:
        row["bytes"], row["ledger"] = ledger.total_bytes, ledger.as_dict()
        if ledger.compulsory_bytes != ledger.total_bytes:
            row["compulsory_bytes"] = ledger.compulsory_bytes
        if ledger.total_bytes:
            row["write_fraction"] = ledger.bytes_written / ledger.total_bytes
    input_set.out.copy_to_device(np.full(input_set.out.shape, checks.poison_value(benchmark.out_dtype),
                                         dtype=benchmark.out_dtype))
    try:
        inputs, out = variant.setup(input_set.device, input_set.out) if variant.setup else \
            (input_set.device, input_set.out)
        named = {k: v for k, v in input_set.device.items() if hasattr(v, "copy_to_host")}
        with record_launches() as launches:
            if use_meter and ledger is not None:
                with traffic.meter(**named, out=input_set.out) as count:
                    result = variant.run(inputs, out)
                ledger.check_against(count)
            else:
                result = variant.run(inputs, out)
            cuda.synchronize()
        got = host_copy(result)
        row["launches"] = len(launches)
        row["rel_error"] = checks.relative_error(got, expected)
        checks.assert_matches(got, expected, rtol=benchmark.rtol, what=variant.name)
    except Exception as exc:  # reported in its row; one broken variant must not hide the rest
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    row["ok"] = True
    return row


def _sets_for(set_bytes: int) -> int:
    """How many input sets to rotate through so a call does not find its data in L2."""
    l2 = device.facts().l2_bytes
    if set_bytes >= l2:
        return 1
    return min(MAX_INPUT_SETS, math.ceil(ROTATE_L2_MULTIPLE * l2 / max(set_bytes, 1)))


def _time(variant, sets, reps, hide_host=True) -> dict:
    """CUDA-event timing of `variant`, each call on the next input set."""
    bound = []
    for s in sets:
        inputs, out = variant.setup(s.device, s.out) if variant.setup else (s.device, s.out)
        bound.append((inputs, out))
    cycle = itertools.cycle(bound)

    def call():
        inputs, out = next(cycle)
        variant.run(inputs, out)

    probe = timing.time_gpu(call, warmup=2, reps=3, hide_host=hide_host)
    inner = int(min(MAX_INNER, max(1, round(SAMPLE_MS / max(probe.median_ms, 1e-6)))))
    measured = timing.time_gpu(call, warmup=3, reps=reps, inner=inner, hide_host=hide_host)
    set_bytes = _nbytes(sets[0].host) + sets[0].out.nbytes
    return {**measured.as_dict(), "inner": inner, "input_sets": len(sets),
            "l2_resident": len(sets) * set_bytes < device.facts().l2_bytes}


def instrument_error(pct_of_ceiling: float, ceiling_mix: str) -> str:
    """Why a row above the ceiling of its read:write mix is not a result."""
    return (f"{pct_of_ceiling:.1f}% of the ceiling for its mix ({ceiling_mix}): above 100% is an "
            f"instrument error (the ceiling was measured too low, or the ledger counts bytes the "
            f"kernel does not move), not a result")


def rate_against_ceilings(row: dict, ceilings: dict):
    """Add GB/s, % of copy and % of the ceiling of the row's own mix (and an instrument error
    above it) to a timed row with declared bytes. Where the ledger declares re-reads a cache
    serves (`compulsory_bytes`), the rates use the compulsory bytes, the least the row can move
    through DRAM, and `gbps_requested` keeps the rate of every requested byte: requested bytes
    can outrun DRAM when L2 serves them, compulsory bytes cannot."""
    moved = row.get("compulsory_bytes", row["bytes"])
    seconds = row["median_ms"] * 1e-3
    if "compulsory_bytes" in row:
        row["gbps_requested"] = row["bytes"] / seconds / 1e9
    row["gbps"] = moved / seconds / 1e9
    row["pct_of_copy"] = 100.0 * row["gbps"] / ceilings["copy_gbps"]
    written = row["bytes"] * row["write_fraction"]          # re-reads are reads: writes stay
    row["ceiling_gbps"], row["ceiling_mix"] = timing.ceiling_for_mix(
        written / moved if moved else row["write_fraction"], timing.stream_ceilings(ceilings))
    row["pct_of_ceiling"] = 100.0 * row["gbps"] / row["ceiling_gbps"]
    row.pop("instrument_error", None)
    row.pop("at_ceiling", None)
    if row["pct_of_ceiling"] > 100.0:
        resolution = 100.0 * (half_spread(row) + max(half_spread(m) for m in timing.stream_ceilings(ceilings).values()))
        if row["pct_of_ceiling"] - 100.0 <= resolution:
            row["at_ceiling"] = (f"{row['pct_of_ceiling']:.2f}% of the ceiling: above it by less than the two "
                                 f"measurements' resolution ({resolution:.2f} points: half of each one's "
                                 f"p10-p90 spread, added), so at the ceiling, not above it")
        else:
            row["instrument_error"] = instrument_error(row["pct_of_ceiling"], row["ceiling_mix"])


def instrument_errors(result: dict) -> list[str]:
    """A result's rows that are instrument errors, one line each."""
    return [f"{r['variant']} at {result['axis']}={r['size']}: {r['instrument_error']}"
            for r in result["rows"] if "instrument_error" in r]


def half_spread(timed: dict) -> float:
    """Half a timing's p10-p90 spread over its median (0 where it has none): its resolution."""
    if not {"p10_ms", "p90_ms", "median_ms"} <= timed.keys():
        return 0.0
    return (timed["p90_ms"] - timed["p10_ms"]) / (2 * timed["median_ms"])


def run(benchmark: Benchmark, *, lab: str | None = None, out_dir: Path | None = None,
        progress: bool = True, reps: int = 30, out=print) -> dict:
    """Validate, then (on a GPU) time every variant at every size; print a table; save JSON + PNG.

    On a GPU, with `lab`, the record goes through `reference.save(lab, {name: result}, out_dir)`
    (out_dir/labNN.json, or data/reference/<gpu>/labNN.json without out_dir); without `lab`,
    to out_dir/<name>.json. The PNG (time and bandwidth against size) goes to out_dir (or
    figures/). With neither `lab` nor `out_dir`, nothing is written. The simulator validates only
    and writes nothing.
    """
    simulated = device.is_simulator()
    sizes = list(benchmark.sim_sizes if simulated else benchmark.sizes)
    variants = list(benchmark.variants) + ([] if simulated else list(benchmark.baselines))
    rng = np.random.default_rng(benchmark.seed)
    result: dict = {
        "benchmark": benchmark.name, "axis": benchmark.axis, "sizes": sizes, "live": not simulated,
        "host_paced": benchmark.host_paced,
        "variants": {v.name: {"why": v.why, "baseline": v in benchmark.baselines} for v in variants},
        "rows": [],
    }
    if simulated:
        result["timing"] = str(timing.NoTiming(f"benchmark {benchmark.name}"))
    else:
        ceilings = timing.ceilings()
        result["provenance"] = reference.provenance()
        result["ceilings"] = ceilings
        result["copy"], result["copy_gbps"] = ceilings["copy"], ceilings["copy_gbps"]
        result["launch_floor_ms"] = ceilings["launch_floor_ms"]
        result["bytes_kind"] = REQUESTED_BYTES
    bar = progress_bar(total=len(sizes) * len(variants), desc=benchmark.name, unit="variant",
                       enabled=progress)
    for size in sizes:
        first_host = benchmark.make_inputs(rng, size)
        expected = np.asarray(benchmark.reference(first_host), dtype=np.float64)
        shape = benchmark.out_shape(first_host) if benchmark.out_shape else expected.shape
        sets = [_make_set(first_host, shape, benchmark.out_dtype)]
        if not simulated:
            set_bytes = _nbytes(first_host) + sets[0].out.nbytes
            sets += [_make_set(benchmark.make_inputs(rng, size), shape, benchmark.out_dtype)
                     for _ in range(_sets_for(set_bytes) - 1)]
        for variant in variants:
            bar.set_postfix_str(f"{benchmark.axis}={size} {variant.name}")
            row = _validate(benchmark, variant, sets[0], expected, size, use_meter=simulated)
            if row["ok"] and not simulated:
                row.update(_time(variant, sets, reps, hide_host=not benchmark.host_paced))
                seconds = row["median_ms"] * 1e-3
                if row.get("bytes"):
                    rate_against_ceilings(row, result["ceilings"])
                if benchmark.flops:
                    row["gflops"] = benchmark.flops(size) / seconds / 1e9
            result["rows"].append(row)
            bar.update()
        del sets
    bar.close()
    # A baseline from outside the course (torch.compile without a working Triton, say) that
    # fails is reported in its rows but does not fail the benchmark.
    result["ok"] = all(r["ok"] for r in result["rows"] if not result["variants"][r["variant"]]["baseline"])
    result["instrument_errors"] = instrument_errors(result)
    out(table(result))
    if simulated:
        out(f"{benchmark.name}: validated in the simulator; no timing exists in simulator mode "
            f"(the recorded GPU measurements are in data/reference/)")
    elif lab is not None or out_dir is not None:
        _save(result, lab, out_dir)
    return result


def _save(result: dict, lab: str | None, out_dir: Path | None):
    stored = {k: v for k, v in result.items() if k != "live"}  # stored data is not live when read back
    if lab is not None:
        reference.save(lab, {result["benchmark"]: stored}, out_dir)
    else:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (Path(out_dir) / f"{result['benchmark']}.json").write_text(json.dumps(stored, indent=1) + "\n")
    draw(result, lab, out_dir)


def draw(result: dict, lab: str | None, out_dir: Path | None) -> Path:
    """Time and bandwidth against size (the range across repeats where there are repeats), with
    DRAM GB/s where the lab's recorded profile measured the variant at that size."""
    fig, (ax_time, ax_bw) = plots.new_figure(result["benchmark"], result, ncols=2)
    plots.time_vs_size(ax_time, result)
    dram = {}
    if lab is not None:
        for r in result["rows"]:
            moved = reference.variant_dram_bytes(lab, result["benchmark"], r["variant"], r["size"])
            if moved is not None:
                dram[(r["variant"], r["size"])] = moved
    plots.bandwidth_vs_size(ax_bw, result, dram)
    prefix = f"lab{target.lab_number(lab)}_" if lab is not None else ""
    return plots.save(fig, f"{prefix}{result['benchmark']}", out_dir)


# --- reading results back ------------------------------------------------------------------------

def ceilings_line(ceilings: dict) -> str:
    """The run's ceilings in one line, as every table and figure quotes them."""
    beside = ", ".join(f"{name.split('_')[0]} copy {ceilings[name]:.0f} GB/s"
                       for name in ("torch_copy_gbps", "cupy_copy_gbps") if ceilings.get(name))
    streams = ", ".join(f"{name.replace('_', '-')} {mix['gbps']:.0f}"
                        for name, mix in (ceilings.get("streams") or {}).items())
    return (f"copy ceiling {ceilings['copy_gbps']:.0f} GB/s ({ceilings['copy']['method']}"
            f"{'; ' + beside if beside else ''})"
            f"{f', stream ceilings by read:write mix {streams} GB/s' if streams else ''}, "
            f"FP32 FMA {ceilings['fp32_fma_tflops']:.1f} TFLOP/s, "
            f"empty launch {ceilings['launch_floor_ms'] * 1e3:.1f} us, measured in this run")


def rows_for(result: dict, variant: str) -> list[dict]:
    """The rows of one variant, in sweep order."""
    return [r for r in result["rows"] if r["variant"] == variant]


def row(result: dict, variant: str, size) -> dict:
    for r in rows_for(result, variant):
        if r["size"] == size:
            return r
    raise KeyError(f"benchmark {result['benchmark']!r} has no row for {variant!r} at "
                   f"{result['axis']}={size}; variants: {', '.join(result['variants'])}")


def failures(result: dict) -> list[str]:
    """One line per failed row: which variant, at which size, and the first line of why."""
    return [f"{r['variant']} at {result['axis']}={r['size']}: {r['error'].splitlines()[0]}"
            for r in result["rows"] if not r["ok"]]


def table(result: dict) -> str:
    """One line per (size, variant): time, bandwidth, the ceiling of its read:write mix and % of
    it, launches; or the error."""
    lines = [f"{result['benchmark']} ({result['axis']})"]
    if result.get("ceilings"):
        lines[0] += (f": {ceilings_line(result['ceilings'])}; GB/s from requested bytes (ledger); "
                     f"each row against the ceiling of its own mix (`ceiling_mix` in the record)")
    width = max(12, len(result["axis"]))
    named = max(22, *(len(name) for name in result["variants"]))
    lines.append(f"{result['axis']:>{width}} {'variant':<{named}} {'ms':>9} {'p10-p90 ms':>17} {'GB/s':>8} "
                 f"{'ceiling':>8} {'% ceil':>7} {'launches':>8} {'rel err':>8}")
    for r in result["rows"]:
        head = f"{str(r['size']):>{width}} {r['variant']:<{named}}"
        if not r["ok"]:
            error = r.get("error", "")[:2000].splitlines() or [""]
            lines.append(f"{head} FAILED: {error[0]}")
            lines += [f"{'':>{width + 2}}{line}" for line in error[1:]]
            continue
        if "instrument_error" in r:
            lines.append(f"{head} INSTRUMENT ERROR: {r['instrument_error']}")
            continue
        if "median_ms" in r:
            spread = f"{r['p10_ms']:.4f}-{r['p90_ms']:.4f}"
            gbps = f"{r['gbps']:8.0f} {r['ceiling_gbps']:8.0f} {r['pct_of_ceiling']:6.1f}%" \
                if "pct_of_ceiling" in r else f"{'':>8} {'':>8} {'':>7}"
            lines.append(f"{head} {r['median_ms']:9.4f} {spread:>17} {gbps} {r['launches']:>8} "
                         f"{r['rel_error']:8.1e}")
        else:
            lines.append(f"{head} {'(no timing: simulator)':>36} {r['launches']:>8} {r['rel_error']:8.1e}")
    return "\n".join(lines)


# --- repeats: the same benchmarks in several fresh processes ---------------------------------------

TARGET_RULE = ("a target is met only if it is met in every repeat: it is judged on the worst repeat")


def is_result(record) -> bool:
    """Whether a stored record is a `run` result (rows of a sweep x variants)."""
    return isinstance(record, dict) and {"benchmark", "rows", "variants"} <= record.keys()


POOLING = ("each row's median, p10-p90 spread, rates and percentages are those of its worst repeat "
           "(the slowest median), against that repeat's own ceilings; repeat_ms lists every repeat's median")
POOLED_FIELDS = ("median_ms", "p10_ms", "p90_ms", "reps", "host_exposed", "gbps", "gflops", "pct_of_copy",
                 "pct_of_ceiling", "ceiling_gbps", "ceiling_mix")


def merge_repeats(results: list[dict]) -> dict:
    """One result from the same benchmark run in several fresh processes.

    Each row's timing comes from one pool, the worst repeat (the slowest median): its median,
    p10-p90 spread, rates and percentages against its own run's ceilings (POOLING, stored as the
    result's `method`). One pool, because a median taken over the repeats beside a spread from
    one repeat can lie outside its own spread (13 of Lab 02's 64 rows did); the worst, because a
    target is judged on the worst repeat. `repeat_ms` lists every repeat's median (the range a
    figure draws), `repeat_pct_of_copy`, `repeat_pct_of_ceiling` and `repeat_ceiling_gbps`
    every repeat's against its own ceilings; the copy ceiling is the repeats' median, each
    repeat's ceilings are kept in `ceilings_per_repeat`. A row is ok only if it is ok in every
    repeat, and an instrument error in any repeat stays on the row.
    """
    count = len(results)
    merged = {**results[0], "repeats": count, "rows": [], "method": POOLING,
              "ceilings_per_repeat": [r.get("ceilings") for r in results],
              "copy_gbps": float(np.median([r["copy_gbps"] for r in results])),
              "launch_floor_ms": float(np.median([r["launch_floor_ms"] for r in results]))}
    keyed = [{(json.dumps(r["size"]), r["variant"]): r for r in result["rows"]} for result in results]
    for key, first in keyed[0].items():
        rows = [k.get(key) for k in keyed]
        row = {**first, "ok": all(r is not None and r["ok"] for r in rows)}
        timed = [r for r in rows if r is not None and "median_ms" in r]
        if timed:
            worst = max(timed, key=lambda r: r["median_ms"])
            row.update({field: worst[field] for field in POOLED_FIELDS if field in worst})
            row["repeat_ms"] = [r["median_ms"] for r in timed]
            if "gbps" in first:
                for field in ("pct_of_copy", "pct_of_ceiling", "ceiling_gbps"):
                    row[f"repeat_{field}"] = [r[field] for r in timed]
            row.pop("at_ceiling", None)            # said of the worst repeat's own rate, as its pct is
            if "at_ceiling" in worst:
                row["at_ceiling"] = worst["at_ceiling"]
        errors = [r["instrument_error"] for r in rows if r is not None and "instrument_error" in r]
        row.pop("instrument_error", None)
        if errors:
            row["instrument_error"] = f"in {len(errors)} of {count} repeats: {errors[0]}"
        merged["rows"].append(row)
    merged["ok"] = all(r["ok"] for r in results)
    merged["instrument_errors"] = [line for r in results for line in r.get("instrument_errors", [])]
    return merged


def _booleans(value, path: str, inside_target: bool):
    """(path, bool) of every boolean under a key that names a target."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "provenance":   # where and how it ran (`simulated`, ...), not a verdict
                continue
            yield from _booleans(item, f"{path}.{key}" if path else key,
                                 inside_target or "target" in key.lower())
    elif isinstance(value, bool) and inside_target:
        yield path, value


def targets_over_repeats(repeats: list[dict]) -> dict:
    """Every target verdict (a boolean under a key naming a target) across the repeats' records,
    met only if met in every repeat."""
    verdicts: dict[str, list] = {}
    for records in repeats:
        for path, met in _booleans(records, "", False):
            verdicts.setdefault(path, []).append(met)
    return {"rule": TARGET_RULE, "repeats": len(repeats),
            "targets": {path: {"per_repeat": values, "met": len(values) == len(repeats) and all(values)}
                        for path, values in verdicts.items()}}


def combine_repeats(stored: list[dict]) -> dict:
    """A lab's reference file from its repeats' files: `records` holds the `run` results merged
    over the repeats (`merge_repeats`) and every other record from the first repeat; `repeats`
    keeps every repeat's records whole; `targets_over_repeats` judges each target on the worst."""
    first = stored[0]["records"]
    records = {name: merge_repeats([s["records"][name] for s in stored])
               if all(is_result(s["records"].get(name)) for s in stored) else record
               for name, record in first.items()}
    return {"lab": stored[0]["lab"], "records": records,
            "records_note": f"run results are merged over {len(stored)} repeats; other records are "
                            "the first repeat's; every repeat is under 'repeats'",
            "repeats": [s["records"] for s in stored],
            "targets_over_repeats": targets_over_repeats([s["records"] for s in stored])}


def keep_unrun_records(combined: dict, previous: dict, only: tuple[str, ...]) -> dict:
    """A partial bench's file: the re-run records (and targets) over the previous file's others,
    each repeat likewise over the previous repeat of the same index where there is one."""
    before_repeats = previous.get("repeats") or []
    repeats = [{**(before_repeats[i] if i < len(before_repeats) else {}), **new}
               for i, new in enumerate(combined["repeats"])]
    return {**combined, "records": {**previous.get("records", {}), **combined["records"]},
            "repeats": repeats, "records_note": partial_note(only, len(repeats), previous.get("records_note"))}


NOTE_SEPARATOR = " | "


def partial_note(only: tuple[str, ...], repeats: int, previous: str | None) -> str:
    """What a partial bench's file says of its records: this run's clause first, then the previous
    file's clauses, flat (a clause for the same records as this run's is dropped: it re-ran them)."""
    clause = f"{', '.join(only)} (and the targets): merged over {repeats} repeats of a partial bench"
    kept = [c for c in (previous or "one run").split(NOTE_SEPARATOR) if not c.startswith(f"{', '.join(only)} (")]
    return NOTE_SEPARATOR.join([clause, *kept])


def run_repeats(specs: list[tuple[str, tuple[str, ...] | None]], repeat: int, out_dir: Path | None = None,
                target_name: str = "solutions", out=print) -> dict[str, Path]:
    """`kernellab bench LAB[:NAME,...]` for every (lab, names or None) spec, `repeat` times, each in
    a fresh process (repeat-major, so slow drift spreads over all labs), then one combined reference
    file per lab (the lab's recorded profile rows kept, and, for a partial bench, its records not
    re-run) and its benchmark figures with the range across repeats. The combined files are written
    again after every round of repeats, so a run stopped part way (a device call's time limit)
    leaves the rounds it finished combined, and says how many."""
    import subprocess
    import tempfile
    from kernellab.course import settings
    base = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="kernellab-repeats-"))
    env = settings.child_env(target=target_name)
    previous = {lab: previous_file(lab, out_dir) for lab, _ in specs}   # read before a round overwrites it
    written = {}
    for r in range(1, repeat + 1):
        for lab, only in specs:
            spec = lab + (":" + ",".join(only) if only else "")
            out(f"== repeat {r} of {repeat}: lab {spec} (fresh process) ==")
            command = [sys.executable, "-m", "kernellab.cli", "bench", spec, "--out", str(base / f"repeat-{r}")]
            done = subprocess.run(command, env=env, cwd=target.ROOT)
            if done.returncode:
                raise RuntimeError(f"lab {spec}, repeat {r}: `{' '.join(command)}` exited {done.returncode}")
        written = {lab: path for lab, only in specs
                   if (path := write_combined(lab, only, base, r, out_dir, previous[lab],
                                              last=r == repeat, out=out))}
    return written


def destination_file(lab: str, out_dir: Path | None) -> Path:
    name = f"lab{target.lab_number(lab)}.json"
    return (Path(out_dir) / name) if out_dir else reference.path(lab, device.gpu_slug())


def previous_file(lab: str, out_dir: Path | None) -> dict:
    """What a bench's combined file merges over: the destination as it was (its profile rows, and
    a partial bench's records not re-run), else the lab's reference file."""
    destination = destination_file(lab, out_dir)
    return json.loads(destination.read_text()) if destination.exists() else reference.load(lab) or {}


def write_combined(lab: str, only: tuple[str, ...] | None, base: Path, repeats: int,
                   out_dir: Path | None, previous: dict, last: bool, out=print) -> Path | None:
    """The lab's reference file from its first `repeats` repeats under `base`, over `previous`
    (None where a repeat recorded nothing: no GPU timing); with its figures and its verdict line
    once `last`."""
    name = f"lab{target.lab_number(lab)}.json"
    files = [base / f"repeat-{r}" / name for r in range(1, repeats + 1)]
    if not all(f.exists() for f in files):
        return None
    combined = combine_repeats([json.loads(f.read_text()) for f in files])
    destination = destination_file(lab, out_dir)
    if "profile" in previous:
        combined["profile"] = previous["profile"]
    if only:
        combined = keep_unrun_records(combined, previous, only)
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_text(json.dumps(combined, indent=1, sort_keys=True) + "\n")
    if not last:
        out(f"lab {lab}: {repeats} repeat(s) combined so far -> {destination}")
        return destination
    for record in combined["records"].values():
        if is_result(record):
            draw(record, lab, out_dir)
    failed = [path for path, t in combined["targets_over_repeats"]["targets"].items() if not t["met"]]
    out(f"lab {lab}: {repeats} repeats -> {destination}; targets missed in some repeat: "
        f"{', '.join(failed) or 'none'}")
    return destination
