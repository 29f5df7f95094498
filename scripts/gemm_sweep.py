"""Lab 04's GEMM candidates against cuBLAS at n^3 (default 4096) on a GPU, one line per kernel.

    python scripts/gemm_sweep.py > out.txt      (about 2 minutes on an H200)

For each matmul (the recorded register-tiled variants, then lab04's GEMM_CANDIDATES): compile it
outside the timing, check its result against torch.matmul with TF32 off (where torch is absent,
against a float64 NumPy product at CHECK_N^3 instead), time it with CUDA events after a warm-up
(kernellab.gpu.timing.time_gpu, as the lab's benchmarks do), and print TFLOP/s (median, p10-p90),
% of cuBLAS timed in the same run, the steps the launcher used, and the driver's registers and
local bytes per thread (ptxas's spills land in local memory; --ptxas adds ptxas's own spill
figures, at one more compile per kernel).

Then each epilogue pair, out = dropout(relu(a @ b + bias)): the matmul followed by the three
elementwise kernels against the fused kernel, with issue 27's target: the fused form saves at least
its saved bytes (lab04.linear_ledger) at the copy bandwidth measured in this run.
A kernel that fails prints one line saying why, and the sweep goes on.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kernellab.gpu import device, timing   # noqa: E402  (kernellab before numba.cuda)
from solutions import lab04_gemm_epilogue as lab   # noqa: E402

P = 0.1                 # dropout probability, as in the lab's benchmarks
CHECK_N = 512           # the NumPy check's size where torch is absent
TOLERANCE = 1e-4        # max |error| / max |reference| accepted against cuBLAS's float32 product

# The recorded variants the candidates are measured beside: their launcher options.
RECORDED = {"register_tiled": {}, "double_buffered": {"double_buffered": True},
            "double_buffered_capped": {"double_buffered": True, "max_registers": lab.CAPPED_REGISTERS}}
RECORDED_PAIRS = {"register_tiled": {}, "register_tiled_capped": {"max_registers": lab.CAPPED_REGISTERS},
                  "double_buffered": {"double_buffered": True},
                  "double_buffered_capped": {"double_buffered": True, "max_registers": lab.CAPPED_REGISTERS}}


def candidates() -> dict:
    """name -> (launcher options, why): the recorded variants, then the new steps."""
    recorded = {name: (options, lab.VARIANTS[name][1]) for name, options in RECORDED.items()}
    return {**recorded, **lab.GEMM_CANDIDATES}


def kernel_of(options: dict, fused: bool, *arrays):
    """(the kernel the register-tiled launcher runs with these options on these arrays, its steps)."""
    tiles = lab.GemmTiles(*options.get("tiles", lab.REGISTER_TILES))
    steps = lab.usable_steps(options.get("steps", lab.PLAIN), tiles, *arrays)
    kernels = lab.register_tiled_kernels(tiles, options.get("max_registers"), steps)
    double = options.get("double_buffered", False)
    if fused:
        return (kernels.linear_relu_dropout_double_buffered if double else kernels.linear_relu_dropout), steps
    return (kernels.matmul_double_buffered if double else kernels.matmul), steps


def resources(kernel, with_ptxas: bool) -> str:
    """Registers and local bytes per thread (the driver's), with ptxas's spills if asked."""
    registers = next(iter(kernel.get_regs_per_thread().values()))
    local = next(iter(kernel.get_local_mem_per_thread().values()))
    text = f"regs {registers:3d} local {local:4d} B"
    if with_ptxas:
        from kernellab.lab import kernel_resources
        signature = next(iter(kernel.overloads))
        found = kernel_resources(kernel, signature, method="ptxas")
        text += f" spill {found.spill_stores_bytes}/{found.spill_loads_bytes} B (ptxas)"
    return text


def steps_text(steps) -> str:
    on = [name for name in ("interior", "vector_loads", "unroll") if getattr(steps, name)]
    if steps.warp_rows:
        on.append(f"warp {steps.warp_rows}x{lab.WARP // steps.warp_rows}")
    return "+".join(on) or "plain"


class Sweep:
    def __init__(self, n: int, reps: int, with_ptxas: bool):
        self.cuda = device.cuda()
        self.n, self.reps, self.with_ptxas = n, reps, with_ptxas
        rng = np.random.default_rng(0)
        host = {"a": rng.standard_normal((n, n), dtype=np.float32),
                "b": rng.standard_normal((n, n), dtype=np.float32),
                "bias": rng.standard_normal(n, dtype=np.float32),
                "mask": (rng.random((n, n)) >= P).astype(np.uint8)}
        self.d = {key: self.cuda.to_device(value) for key, value in host.items()}
        self.out = self.cuda.device_array((n, n), dtype=np.float32)
        self.torch = self._torch()
        self.check = self._torch_check() if self.torch else self._numpy_check()

    @staticmethod
    def _torch():
        try:
            import torch
        except ImportError:
            return None
        torch.backends.cuda.matmul.allow_tf32 = False   # cuBLAS SGEMM in float32, as the reference
        return torch if torch.cuda.is_available() else None

    def _torch_check(self):
        torch = self.torch
        t = {key: torch.as_tensor(value, device="cuda") for key, value in self.d.items()}
        product = torch.matmul(t["a"], t["b"])
        finished = torch.relu(product + t["bias"]) * t["mask"] * float(lab.keep_scale(P))
        scale = {False: product.abs().max().item(), True: finished.abs().max().item()}
        expected = {False: product, True: finished}

        def check(launch, fused):
            launch(self.d, self.out)
            self.cuda.synchronize()
            error = (torch.as_tensor(self.out, device="cuda") - expected[fused]).abs().max().item()
            return error / scale[fused]
        return check

    def _numpy_check(self):
        """float64 NumPy references at CHECK_N^3 (the full size would take minutes on a CPU)."""
        rng = np.random.default_rng(1)
        n = CHECK_N
        host = {"a": rng.standard_normal((n, n), dtype=np.float32),
                "b": rng.standard_normal((n, n), dtype=np.float32),
                "bias": rng.standard_normal(n, dtype=np.float32),
                "mask": (rng.random((n, n)) >= P).astype(np.uint8)}
        small = {key: self.cuda.to_device(value) for key, value in host.items()}
        out = self.cuda.device_array((n, n), dtype=np.float32)
        expected = {False: lab.matmul_reference(host["a"], host["b"]),
                    True: lab.linear_relu_dropout_reference(host["a"], host["b"], host["bias"], host["mask"], P)}

        def check(launch, fused):
            launch(small, out)
            error = np.abs(out.copy_to_host() - expected[fused]).max()
            return error / np.abs(expected[fused]).max()
        return check

    def time(self, launch):
        return timing.time_gpu(lambda: launch(self.d, self.out), warmup=3, reps=self.reps)

    def tflops(self, t) -> tuple[float, float, float]:
        flop = 2.0 * self.n ** 3
        return tuple(flop / (ms * 1e-3) / 1e12 for ms in (t.median_ms, t.p90_ms, t.p10_ms))

    def cublas(self) -> float | None:
        if self.torch is None:
            print("cuBLAS: torch with CUDA not importable here: no % of cuBLAS")
            return None
        t = {key: self.torch.as_tensor(self.d[key], device="cuda") for key in ("a", "b")}
        c = self.torch.empty_like(t["a"])
        measured = self.time(lambda d, out: self.torch.matmul(t["a"], t["b"], out=c))
        median, low, high = self.tflops(measured)
        print(f"{'cublas':<30} {median:6.2f} TFLOP/s (p10-p90 {low:.2f}-{high:.2f})  100.0% "
              f"torch.matmul, TF32 off")
        return median

    def matmul_line(self, name, options, why, cublas):
        def launch(d, out):
            lab.matmul_register_tiled(d["a"], d["b"], out=out, **options)
        error = self.check(launch, fused=False)
        if not error <= TOLERANCE:
            return f"{name:<30} WRONG: max error {error:.2e} of the largest value (tolerance {TOLERANCE:.0e})"
        measured = self.time(launch)
        median, low, high = self.tflops(measured)
        kernel, steps = kernel_of(options, False, self.d["a"], self.d["b"], self.out)
        share = f"{100 * median / cublas:5.1f}%" if cublas else "   n/a"
        return (f"{name:<30} {median:6.2f} TFLOP/s (p10-p90 {low:.2f}-{high:.2f}) {share}  "
                f"{resources(kernel, self.with_ptxas)}  [{steps_text(steps)}] err {error:.1e}  {why}")

    def pair_line(self, family, options, copy_gbps):
        n = self.n

        def unfused(d, out):
            lab.linear_relu_dropout_unfused(d["a"], d["b"], d["bias"], d["mask"], P, out=out,
                                            matmul=lab.matmul_register_tiled, **options)

        def fused(d, out):
            lab.linear_relu_dropout_register_tiled(d["a"], d["b"], d["bias"], d["mask"], P, out=out, **options)
        for form, launch, is_fused in (("unfused", unfused, False), ("fused", fused, True)):
            error = self.check(launch, fused=True)
            if not error <= TOLERANCE:
                return f"{family:<30} {form} WRONG: max error {error:.2e} of the largest value"
        times = {form: self.time(launch) for form, launch in (("unfused", unfused), ("fused", fused))}
        tiles = lab.GemmTiles(*options.get("tiles", lab.REGISTER_TILES))
        saved_bytes = (lab.linear_ledger(n, n, n, False, tiles.bm, tiles.bn).total_bytes
                       - lab.linear_ledger(n, n, n, True, tiles.bm, tiles.bn).total_bytes)
        at_copy_ms = saved_bytes / (copy_gbps * 1e9) * 1e3
        saved_ms = times["unfused"].median_ms - times["fused"].median_ms
        kernel, _ = kernel_of(options, True, self.d["a"], self.d["b"], self.d["bias"], self.out)
        return (f"{family:<30} unfused {times['unfused'].median_ms:.3f} ms "
                f"(p10-p90 {times['unfused'].p10_ms:.3f}-{times['unfused'].p90_ms:.3f}), fused "
                f"{times['fused'].median_ms:.3f} ms ({times['fused'].p10_ms:.3f}-{times['fused'].p90_ms:.3f}): "
                f"saved {saved_ms:.3f} ms, its {saved_bytes / 1e6:.1f} MB at copy speed {at_copy_ms:.3f} ms, "
                f"ratio {saved_ms / at_copy_ms:.2f} {'PASS' if saved_ms >= at_copy_ms else 'FAIL'}  "
                f"fused {resources(kernel, self.with_ptxas)}")


def guarded(make_line, name):
    """The line, or one line saying why it could not be made (the sweep goes on)."""
    started = time.perf_counter()
    try:
        line = make_line()
    except Exception as exc:  # a compile or launch failure: say so on its line, keep sweeping
        line = f"{name:<30} FAILED: {type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}"
    print(f"{line}  ({time.perf_counter() - started:.0f} s)", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096, help="M = N = K (default 4096)")
    parser.add_argument("--reps", type=int, default=15, help="timed samples per kernel (default 15)")
    parser.add_argument("--ptxas", action="store_true", help="add ptxas's spill figures (slower)")
    parser.add_argument("--only", nargs="*", help="candidate names to run (default all)")
    args = parser.parse_args(argv)
    if device.is_simulator():
        print("gemm_sweep times kernels on a GPU; this is the simulator (no GPU clock)", file=sys.stderr)
        return 2
    started = time.perf_counter()
    facts = device.facts()
    print(f"{facts.name}, cc {facts.cc[0]}.{facts.cc[1]}, {facts.sm_count} SMs; n = {args.n}, "
          f"{args.reps} samples each; {time.strftime('%Y-%m-%d %H:%M:%S %Z')}", flush=True)
    sweep = Sweep(args.n, args.reps, args.ptxas)
    chosen = {name: spec for name, spec in candidates().items() if not args.only or name in args.only}
    cublas = sweep.cublas()
    for name, (options, why) in chosen.items():
        guarded(functools.partial(sweep.matmul_line, name, options, why, cublas), name)
    copy_gbps = timing.copy_bandwidth(reps=10)["gbps"]
    print(f"\nepilogue pairs (copy bandwidth {copy_gbps:.0f} GB/s, p = {P}):", flush=True)
    pairs = {**{family: options for family, options in RECORDED_PAIRS.items()
                if not args.only or family in args.only},
             **{name: options for name, (options, _) in chosen.items() if name not in RECORDED}}
    for family, options in pairs.items():
        guarded(functools.partial(sweep.pair_line, family, options, copy_gbps), family)
    print(f"\nsweep took {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
