"""DRAM bytes and other hardware counters from Nsight Compute, stored beside the bench timings.

Requested bytes (a variant's ledger, the traffic meter) count what the code asks for; DRAM bytes
are what reached device memory: a re-read that L2 absorbs is requested but not DRAM traffic, a
stride-33 gather moves 16x its useful bytes, and writes still in L2 when a kernel ends are not
counted yet. `kernellab profile LAB[:KERNEL]` measures the second kind:

- the parent runs `ncu --clock-control none --profile-from-start off --metrics METRICS --csv`
  around a child python (`python -m kernellab.course.profile child LAB MANIFEST`);
- the child builds the lab's declared benchmarks (every `*_benchmark`/`*_benchmarks` function of
  its experiment module, called with the lab where it takes one; baselines left out), runs each
  variant once at its profile size (`Benchmark.profile_size`, default the largest GPU size),
  validated against the reference, between cuProfilerStart and cuProfilerStop, and writes the
  kernel launches in order to MANIFEST;
- the parent joins ncu's rows (one per launch, in order) to the manifest and stores them under
  "profile" in data/reference/<gpu>/labNN.json, beside "records":
  {"provenance": {bench provenance + "tool", "metrics", "command"}, "rows": [{"benchmark",
   "variant", "size", "kernel", "dram_bytes_read", "dram_bytes_write", "requested_bytes" (the
   whole variant's ledger), "flops", "gpu_time_ns", "l1_sectors_per_request",
   "achieved_occupancy_pct", "sm_throughput_pct", "dram_throughput_pct", "registers_per_thread",
   "warp_instructions" (smsp__inst_executed.sum; rows recorded before 2026-12-01 15:00 lack it)}]}
  (the format agreed with Lab 09's roofline, which reads it through
  `kernellab.course.reference.profile_rows` and `variant_dram_bytes`).
In the simulator it prints the recorded rows and says they are recorded.
"""

from __future__ import annotations

import csv
import io
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

METRICS = {
    "dram__bytes_read.sum": "dram_bytes_read",
    "dram__bytes_write.sum": "dram_bytes_write",
    "gpu__time_duration.sum": "gpu_time_ns",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "l1_sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "l1_requests",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sm_throughput_pct",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "smsp__inst_executed.sum": "warp_instructions",   # issued: what a kernel costs the SM besides bytes
}
INTEGER_FIELDS = ("dram_bytes_read", "dram_bytes_write", "registers_per_thread", "warp_instructions")
# ncu scales units unless told `--print-units base`; both are read back in base units.
UNIT_SCALE = {"": 1, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
              "KB": 1e3, "MB": 1e6, "GB": 1e9, "nsecond": 1, "usecond": 1e3, "msecond": 1e6,
              "second": 1e9, "ns": 1, "us": 1e3, "ms": 1e6, "%": 1, "sector": 1, "request": 1,
              "register/thread": 1, "cycle": 1, "inst": 1}


class ProfileError(RuntimeError):
    """ncu is missing, failed, or its output does not match the launches the child made."""


# --- parsing ncu's CSV (a pure function) ---------------------------------------------------------

def parse_ncu_csv(text: str) -> list[dict]:
    """ncu's `--csv` details output -> one dict per profiled launch, in launch (ID) order:
    {"id", "kernel_name", "metrics": {metric name: value in base units}}.

    Lines before the CSV header (ncu's "==PROF==" messages) are skipped; values may carry
    thousands separators; units are scaled to bytes, nanoseconds, percent.
    """
    lines = text.splitlines()
    header = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if header is None:
        raise ProfileError("ncu output has no CSV header (\"ID\",...): did ncu profile any kernel?")
    launches: dict[int, dict] = {}
    for record in csv.DictReader(io.StringIO("\n".join(lines[header:]))):
        if not record.get("Metric Name") or not record["ID"].strip().isdigit():
            continue
        unit = record.get("Metric Unit", "").strip()
        if unit not in UNIT_SCALE:
            raise ProfileError(f"ncu metric {record['Metric Name']}: unknown unit {unit!r}")
        raw = record["Metric Value"].replace(",", "").strip()
        try:
            value = float(raw) * UNIT_SCALE[unit]
        except ValueError:
            raise ProfileError(f"ncu metric {record['Metric Name']} of launch {record['ID']}: "
                               f"value {record['Metric Value']!r} is not a number") from None
        launch = launches.setdefault(int(record["ID"]), {"id": int(record["ID"]),
                                                         "kernel_name": record["Kernel Name"],
                                                         "metrics": {}})
        launch["metrics"][record["Metric Name"]] = value
    return [launches[i] for i in sorted(launches)]


def rows_from(launches: list[dict], manifest: list[dict]) -> list[dict]:
    """Join ncu's launches (in order) to the child's manifest of launches into PROFILE_FORMAT rows."""
    if len(launches) != len(manifest):
        raise ProfileError(f"ncu profiled {len(launches)} launches but the child made {len(manifest)}: "
                           "the rows cannot be matched to variants")
    rows = []
    for launch, made in zip(launches, manifest):
        if made["kernel"] not in launch["kernel_name"]:
            raise ProfileError(f"launch {launch['id']}: ncu saw {launch['kernel_name']!r} where the "
                               f"child launched {made['kernel']!r}")
        missing = [m for m in METRICS if m not in launch["metrics"]]
        if missing:
            raise ProfileError(f"launch {launch['id']} ({made['kernel']}): ncu gave no {', '.join(missing)}")
        values = {field: launch["metrics"][metric] for metric, field in METRICS.items()}
        sectors, requests = values.pop("l1_sectors"), values.pop("l1_requests")
        row = {**made, **values, "l1_sectors_per_request": sectors / requests if requests else None}
        for field in INTEGER_FIELDS:
            row[field] = int(round(row[field]))
        rows.append(row)
    return rows


def table(profile: dict, kernel: str | None = None) -> str:
    """The rows, with DRAM and requested bytes side by side (and which is which)."""
    lines = [f"{'benchmark':<14} {'variant':<22} {'kernel':<28} {'size':>10} {'DRAM MB':>9} "
             f"{'requested MB':>13} {'DRAM/req':>8} {'DRAM GB/s':>10} {'sect/req':>8} {'occ %':>6} "
             f"{'regs':>5}"]
    for r in profile["rows"]:
        if kernel and r["kernel"] != kernel:
            continue
        dram = r["dram_bytes_read"] + r["dram_bytes_write"]
        requested = r.get("requested_bytes")
        ratio = f"{dram / requested:8.2f}" if requested else f"{'-':>8}"
        per_request = r["l1_sectors_per_request"]
        lines.append(f"{r['benchmark']:<14} {r['variant']:<22} {r['kernel'][:28]:<28} {str(r['size']):>10} "
                     f"{dram / 1e6:9.2f} {(requested or 0) / 1e6 if requested else float('nan'):13.2f} "
                     f"{ratio} {dram / r['gpu_time_ns']:10.0f} "
                     f"{per_request if per_request is not None else float('nan'):8.2f} "
                     f"{r['achieved_occupancy_pct']:6.1f} {r['registers_per_thread']:>5}")
    lines.append("DRAM = dram__bytes_read.sum + dram__bytes_write.sum of that kernel (Nsight Compute); "
                 "requested = the whole variant's ledger at that size; DRAM GB/s over ncu's own "
                 "kernel time (gpu__time_duration, not the bench timing)")
    return "\n".join(lines)


# --- the child: run each declared variant once, between profiler start and stop ---------------

def declared_benchmarks(module, lab) -> list:
    """Every Benchmark the lab's declaration (`LAB.benchmarks`) names."""
    from kernellab.course import protocol
    if not isinstance(getattr(module, "LAB", None), protocol.Lab):
        raise TypeError(f"{module.__name__} declares no `LAB = kernellab.course.protocol.Lab(...)`")
    return list(module.LAB.benchmarks(lab, None))


def run_child(lab_name: str, manifest_path: Path):
    """Runs under ncu: each declared variant once at its profile size; writes the launch manifest."""
    import numpy as np
    from cuda.bindings import driver
    from kernellab.course import bench, protocol, target
    from kernellab.gpu import checks, device
    from kernellab.gpu.launches import record_launches
    cuda = device.cuda()
    lab = target.load(lab_name)
    manifest = []
    for benchmark in declared_benchmarks(protocol.experiment(target.lab_number(lab_name)), lab):
        size = benchmark.profile_size if benchmark.profile_size is not None else max(benchmark.sizes)
        host = benchmark.make_inputs(np.random.default_rng(benchmark.seed), size)
        expected = np.asarray(benchmark.reference(host), dtype=np.float64)
        shape = benchmark.out_shape(host) if benchmark.out_shape else expected.shape
        inputs = {k: cuda.to_device(v) if isinstance(v, np.ndarray) else v for k, v in host.items()}
        poison = np.full(shape, checks.poison_value(benchmark.out_dtype), dtype=benchmark.out_dtype)
        for variant in benchmark.variants:
            # Each variant its own output, poisoned again after the warm-up: a profiled launch that
            # wrote nothing fails the check below instead of passing on an earlier variant's result
            # (2026-12-02: a run on the starter recorded two stubs' empty launches for Lab 09).
            out = cuda.to_device(poison)
            args = variant.setup(inputs, out) if variant.setup else (inputs, out)
            variant.run(*args)                       # compile and warm up outside the profiled range
            out.copy_to_device(poison)
            cuda.synchronize()
            with record_launches() as launches:
                driver.cuProfilerStart()
                result = variant.run(*args)
                cuda.synchronize()
                driver.cuProfilerStop()
            checks.assert_matches(bench.host_copy(result), expected, rtol=benchmark.rtol,
                                  what=f"{benchmark.name}/{variant.name}")
            requested = variant.ledger(size).total_bytes if variant.ledger else None
            flops = benchmark.flops(size) if benchmark.flops else None
            manifest += [{"benchmark": benchmark.name, "variant": variant.name, "size": size,
                          "kernel": name, "requested_bytes": requested, "flops": flops}
                         for name in launches.names()]
    Path(manifest_path).write_text(json.dumps(manifest))


# --- the parent ----------------------------------------------------------------------------------

def ncu_command(lab: str, manifest: Path, csv_path: Path) -> list[str]:
    return ["ncu", "--clock-control", "none", "--profile-from-start", "off", "--print-units", "base",
            "--metrics", ",".join(METRICS), "--csv", "--log-file", str(csv_path),
            sys.executable, "-m", "kernellab.course.profile", "child", lab, str(manifest)]


def ncu_version() -> str:
    try:
        done = subprocess.run(["ncu", "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ProfileError(f"Nsight Compute (ncu) is not available here: {exc}") from None
    return "ncu " + done.stdout.strip().splitlines()[-1].split()[-1]


def measure(lab: str, kernel: str | None = None, out_dir: Path | None = None,
            target_name: str | None = None) -> dict:
    """Profile a lab under ncu (GPU only) and store the rows; returns the profile record."""
    from kernellab.gpu import device
    from kernellab.course import reference, settings, target
    version = ncu_version()
    with tempfile.TemporaryDirectory(prefix="kernellab-profile-") as tmp:
        manifest, csv_path = Path(tmp) / "manifest.json", Path(tmp) / "ncu.csv"
        command = ncu_command(lab, manifest, csv_path)
        chosen = {"target": target_name} if target_name else {}
        done = subprocess.run(command, cwd=target.ROOT, env=settings.child_env(device="gpu", **chosen))
        if done.returncode or not manifest.exists():
            raise ProfileError(f"`{shlex.join(command)}` exited {done.returncode}")
        found = rows_from(parse_ncu_csv(csv_path.read_text()), json.loads(manifest.read_text()))
    if kernel:
        found = [r for r in found if r["kernel"] == kernel]
        if not found:
            raise ProfileError(f"lab {lab} launched no kernel named {kernel!r}")
    record = {"provenance": {**reference.provenance(), "tool": version, "metrics": list(METRICS),
                             "command": shlex.join(command),
                             "target": target_name or settings.target(None, default="labs")},
              "rows": found}
    file = (Path(out_dir) / f"lab{target.lab_number(lab)}.json") if out_dir else \
        reference.path(lab, device.gpu_slug())
    stored = json.loads(file.read_text()) if file.exists() else {"lab": target.lab_number(lab), "records": {}}
    if kernel and stored.get("profile"):             # one kernel re-profiled: keep the others' rows
        record["rows"] = [r for r in stored["profile"]["rows"] if r["kernel"] != kernel] + found
    stored["profile"] = record
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
    return record


def main(spec: str, out_dir: Path | None = None, out=print, target_name: str | None = None) -> int:
    """`kernellab profile LAB[:KERNEL]`: measure on a GPU, show the recorded rows in the simulator.
    `target_name` is the code the child runs (labs or solutions; None: this process's setting).
    It must be the bench's: on 2026-12-02 a profile run without one profiled the starter's stubs,
    which return at once, beside the timings of the solutions."""
    from kernellab.gpu import device
    from kernellab.course import reference, target
    lab, _, kernel = spec.partition(":")
    target.lab_number(lab)                               # a bad lab is a one-line error
    stored = (reference.load(lab) or {}).get("profile")
    if kernel:
        known = {row["kernel"] for row in (stored or {}).get("rows", [])}
        if not device.is_simulator():
            known |= {name for name in vars(target.load(lab)) if name.endswith("_kernel")}
        if kernel not in known:
            raise ValueError(f"lab {lab} has no kernel {kernel!r} to profile; its kernels: "
                             f"{', '.join(sorted(known)) or 'none recorded'}")
    if device.is_simulator():
        if not stored:
            out(f"lab {lab}: no Nsight Compute profile is recorded (simulator: nothing can be "
                f"measured here; on a GPU: kernellab profile {spec})")
            return 0
        prov = stored["provenance"]
        out(f"lab {lab}: RECORDED profile, not measured here: {prov['gpu']}, {prov['date'][:10]}, "
            f"{prov['tool']}\n{table(stored, kernel or None)}")
        return 0
    from kernellab.course import protocol
    if not declared_benchmarks(protocol.experiment(target.lab_number(lab)), target.load(lab)):
        out(f"lab {lab}: its experiment declares no benchmarks (no *_benchmark function): nothing "
            f"to profile")
        return 0
    record = measure(lab, kernel or None, out_dir, target_name)
    out(f"lab {lab}: profiled with {record['provenance']['tool']} on {record['provenance']['gpu']}\n"
        f"{table(record, kernel or None)}")
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        run_child(sys.argv[2], Path(sys.argv[3]))
    else:
        sys.exit(main(sys.argv[1]))
