"""The benchmark harness every lab uses: validate first, then time, then report against a ceiling.

A benchmark is data: a sweep axis, its sizes, how to make inputs, a float64 NumPy reference,
and the variants to compare (each with the bytes it declares, as a `traffic.Ledger`).

    from kernellab import bench
    from kernellab.traffic import Ledger

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
   of enough back-to-back calls to last ~1 ms; the median and p10/p90. When one input set
   (inputs + output) fits in L2, several sets are made and the calls rotate through them, so
   a variant is not timed on data a previous call left in cache (`input_sets`, `l2_resident`).
3. Reports ms, GB/s from the variant's declared bytes (`ledger(size).total_bytes`) and % of the
   device-to-device copy bandwidth measured in the same run (`copy_gbps`), plus an empty-kernel
   launch time measured in the same run (`launch_floor_ms`): the floor small sizes sit on.
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
    {"benchmark", "axis", "sizes", "live", "ok", "provenance", "copy_gbps", "copy" (how it was
     measured: timing.copy_bandwidth's dict), "launch_floor_ms",
     "variants": {name: {"why", "baseline"}},
     "rows": [{"size", "variant", "ok", "error", "rel_error", "launches", "bytes", "ledger",
               "median_ms", "p10_ms", "p90_ms", "reps", "inner", "gbps", "pct_of_copy",
               "gflops", "input_sets", "l2_resident"}]}
Timing fields are absent in the simulator, where `live` is False and `timing` says why.
`rows_for(result, variant)`, `row(result, variant, size)`, `failures(result)` and `table(result)`
read it back (e.g. from reference data).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from . import checks, device, plots, reference, target, timing, traffic
from .launches import record_launches
from .progress import progress_bar

cuda = device.cuda()

SAMPLE_MS = 1.0          # each timing sample lasts about this long (back-to-back calls)
MAX_INNER = 200          # ...but never more calls than this per sample
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


def _host(result) -> np.ndarray:
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
        got = _host(result)
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


def _time(variant, sets, reps) -> dict:
    """CUDA-event timing of `variant`, each call on the next input set."""
    bound = []
    for s in sets:
        inputs, out = variant.setup(s.device, s.out) if variant.setup else (s.device, s.out)
        bound.append((inputs, out))
    cycle = itertools.cycle(bound)

    def call():
        inputs, out = next(cycle)
        variant.run(inputs, out)

    probe = timing.time_gpu(call, warmup=2, reps=3)
    inner = int(min(MAX_INNER, max(1, round(SAMPLE_MS / max(probe.median_ms, 1e-6)))))
    measured = timing.time_gpu(call, warmup=3, reps=reps, inner=inner)
    set_bytes = _nbytes(sets[0].host) + sets[0].out.nbytes
    return {**measured.as_dict(), "inner": inner, "input_sets": len(sets),
            "l2_resident": len(sets) * set_bytes < device.facts().l2_bytes}


@cuda.jit
def empty_kernel(a):
    """Does nothing: its time is the cost of a launch alone."""


def launch_floor_ms() -> float:
    """Median time of one empty launch with one array argument, back to back: the small-size floor."""
    a = cuda.device_array(1, dtype=np.float32)
    return timing.time_gpu(lambda: empty_kernel[1, 32](a), warmup=10, reps=20, inner=100).median_ms


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
        "variants": {v.name: {"why": v.why, "baseline": v in benchmark.baselines} for v in variants},
        "rows": [],
    }
    if simulated:
        result["timing"] = str(timing.NoTiming(f"benchmark {benchmark.name}"))
    else:
        result["provenance"] = reference.provenance()
        result["copy"] = timing.copy_bandwidth()
        result["copy_gbps"] = result["copy"]["gbps"]
        result["launch_floor_ms"] = launch_floor_ms()
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
                row.update(_time(variant, sets, reps))
                seconds = row["median_ms"] * 1e-3
                if "bytes" in row:
                    row["gbps"] = row["bytes"] / seconds / 1e9
                    row["pct_of_copy"] = 100.0 * row["gbps"] / result["copy_gbps"]
                if benchmark.flops:
                    row["gflops"] = benchmark.flops(size) / seconds / 1e9
            result["rows"].append(row)
            bar.update()
        del sets
    bar.close()
    # A baseline from outside the course (torch.compile without a working Triton, say) that
    # fails is reported in its rows but does not fail the benchmark.
    result["ok"] = all(r["ok"] for r in result["rows"] if not result["variants"][r["variant"]]["baseline"])
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
    fig, (ax_time, ax_bw) = plots.new_figure(result["benchmark"], result, ncols=2)
    plots.time_vs_size(ax_time, result)
    plots.bandwidth_vs_size(ax_bw, result)
    prefix = f"lab{target.lab_number(lab)}_" if lab is not None else ""
    plots.save(fig, f"{prefix}{result['benchmark']}", out_dir)


# --- reading results back ------------------------------------------------------------------------

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
    """One line per (size, variant): time, bandwidth, % of copy, launches; or the error."""
    lines = [f"{result['benchmark']} ({result['axis']})"]
    if result.get("copy_gbps"):
        lines[0] += (f": copy ceiling {result['copy_gbps']:.0f} GB/s, empty launch "
                     f"{result['launch_floor_ms'] * 1e3:.1f} us, measured in this run")
    width = max(12, len(result["axis"]))
    lines.append(f"{result['axis']:>{width}} {'variant':<22} {'ms':>9} {'p10-p90 ms':>17} {'GB/s':>8} "
                 f"{'% copy':>7} {'launches':>8} {'rel err':>8}")
    for r in result["rows"]:
        head = f"{str(r['size']):>{width}} {r['variant']:<22}"
        if not r["ok"]:
            error = r.get("error", "")[:2000].splitlines() or [""]
            lines.append(f"{head} FAILED: {error[0]}")
            lines += [f"{'':>{width + 2}}{line}" for line in error[1:]]
            continue
        if "median_ms" in r:
            spread = f"{r['p10_ms']:.4f}-{r['p90_ms']:.4f}"
            gbps = f"{r['gbps']:8.0f} {r['pct_of_copy']:6.1f}%" if "gbps" in r else f"{'':>8} {'':>7}"
            lines.append(f"{head} {r['median_ms']:9.4f} {spread:>17} {gbps} {r['launches']:>8} "
                         f"{r['rel_error']:8.1e}")
        else:
            lines.append(f"{head} {'(no timing: simulator)':>36} {r['launches']:>8} {r['rel_error']:8.1e}")
    return "\n".join(lines)
