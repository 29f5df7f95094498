"""Recorded GPU measurements in data/reference/<gpu>/labNN.json, each with its provenance.

Without a GPU, figures are drawn from these files and labelled as reference data; on a GPU,
`kernellab bench` writes new ones. Every record says what produced it: GPU, driver, CUDA, the
Python, numba, numba-cuda and numpy versions, the date, the commit and the exact command
(`PROVENANCE_FIELDS`; tests/instruments/test_reference_provenance.py checks every stored record).
"""

from __future__ import annotations

import datetime
import functools
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from kernellab.gpu import device
from kernellab.course import target

DATA = target.ROOT / "data" / "reference"
DEFAULT_GPU = "h200"
LIVE: dict[str, dict[str, dict]] = {}   # lab -> {name: record} measured live in this process (claims read it)


CLOCK_QUERY = "clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,temperature.gpu,power.draw"


def clocks() -> dict | str:
    """The GPU's clocks, temperature and power as nvidia-smi reads them now (never set here);
    a string saying why when they cannot be read."""
    if device.is_simulator():
        return "not read: simulator"
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={CLOCK_QUERY}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"not read: {type(exc).__name__}: {exc}"[:200]
    values = [v.strip() for v in done.stdout.splitlines()[0].split(",")]
    return dict(zip(CLOCK_QUERY.split(","), values))


def settings() -> dict:
    """Every setting outside the code that changes a result, as this process sees it."""
    return {"CUDA_DEVICE_MAX_CONNECTIONS": os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS",
                                                          "unset (the driver's default: 8)"),
            "clocks": clocks()}


# What every record's provenance names: top-level keys, then keys of its "versions".
PROVENANCE_FIELDS = ("gpu", "date", "commit", "command")
VERSION_FIELDS = ("nvidia_driver", "cuda_driver", "cuda_runtime", "python", "numba", "numba-cuda", "numpy")
NOT_RECORDED = "unknown (not recorded)"


@functools.cache
def commit() -> str:
    """The commit of the code that measures: KERNELLAB_COMMIT where the run's script sets it (a tree
    copied to a GPU machine may carry a stale .git), else git's HEAD, with the count of files changed
    from it; NOT_RECORDED outside a git checkout. Read once per process."""
    named = os.environ.get("KERNELLAB_COMMIT", "").strip()
    if named:
        return named
    try:
        head = subprocess.run(["git", "-C", str(target.ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, timeout=20, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(target.ROOT), "status", "--porcelain"],
                                 capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return NOT_RECORDED
    count = len(changed.splitlines())
    return f"{head} with {count} changed files" if count else head


def provenance(command: str | None = None) -> dict:
    """Where a measurement came from, with the settings that change results; the date is UTC."""
    facts = device.facts()
    return {
        "commit": commit(),
        "gpu": facts.name,
        "cc": f"{facts.cc[0]}.{facts.cc[1]}",
        "sm_count": facts.sm_count,
        "simulated": facts.simulated,
        "versions": device.versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command or " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name] + sys.argv[1:]),
        "host": os.uname().nodename if hasattr(os, "uname") else "unknown",
        "settings": settings(),
    }


def path(lab: str, gpu: str = DEFAULT_GPU) -> Path:
    return DATA / gpu / f"lab{target.lab_number(lab)}.json"


def load(lab: str, gpu: str = DEFAULT_GPU) -> dict | None:
    """The recorded measurements for a lab, or None when nothing was recorded yet."""
    file = path(lab, gpu)
    if not file.exists():
        return None
    return json.loads(file.read_text())


def save(lab: str, record: dict, out_dir: Path | None = None) -> Path:
    """Write a lab's measurements with provenance, merging by benchmark name into what is there."""
    file = (Path(out_dir) / f"lab{target.lab_number(lab)}.json") if out_dir else \
        path(lab, device.gpu_slug())
    file.parent.mkdir(parents=True, exist_ok=True)
    existing = json.loads(file.read_text()) if file.exists() else {"lab": target.lab_number(lab)}
    existing.setdefault("records", {}).update(record)
    file.write_text(json.dumps(existing, indent=1, sort_keys=True) + "\n")
    return file


PROFILES_READ: list[set[str]] = []
"""While a claim is evaluated, the labs whose recorded profile it read (its source names them)."""


def profiled_on(lab: str) -> str | None:
    """The GPU the lab's recorded Nsight Compute rows were measured on (None: no profile)."""
    return (((load(lab) or {}).get("profile") or {}).get("provenance") or {}).get("gpu")


def profile_rows(lab: str) -> list[dict]:
    """The lab's recorded Nsight Compute rows (`kernellab profile`; empty when none)."""
    for reads in PROFILES_READ:
        reads.add(lab)
    return list(((load(lab) or {}).get("profile") or {}).get("rows", []))


def variant_dram_bytes(lab: str, benchmark: str, variant: str, size) -> int | None:
    """DRAM bytes read + written by all of a variant's kernels at a size, or None if not profiled."""
    found = [r for r in profile_rows(lab) if r["benchmark"] == benchmark and r["variant"] == variant
             and r["size"] == size]
    return sum(r["dram_bytes_read"] + r["dram_bytes_write"] for r in found) if found else None


def live_or_recorded(lab: str, name: str, measure) -> dict | None:
    """`measure()` live on a GPU (marked live); in the simulator, the lab's recorded reference
    record `name`, or None when nothing was recorded yet."""
    if not device.is_simulator():
        return note_live(lab, name, measure())
    stored = load(lab)
    return stored and stored["records"].get(name)


def ceilings(lab: str) -> dict | None:
    """The ceilings to quote beside a lab's figures, with "source" saying where they come from:
    on a GPU measured now (`timing.ceilings`, once per process); in the simulator the lab's
    recorded run's (its first benchmark record); None when nothing was recorded."""
    if not device.is_simulator():
        from kernellab.gpu import timing
        return {**timing.ceilings(), "source": f"measured live on {device.facts().name}"}
    for record in ((load(lab) or {}).get("records") or {}).values():
        if isinstance(record, dict) and "copy_gbps" in record and "launch_floor_ms" in record:
            measured = record.get("ceilings") or {"copy_gbps": record["copy_gbps"],
                                                  "launch_floor_ms": record["launch_floor_ms"]}
            prov = record["provenance"]
            return {**measured, "source": f"recorded on {prov['gpu']}, {prov['date'][:10]}, same run "
                                          f"as lab {target.lab_number(lab)}'s benchmarks"}
    return None


def note_live(lab: str, name: str, record: dict) -> dict:
    """Mark `record` live and keep it for this process's claims (kernellab.course.claims.sources)."""
    record = {**record, "live": True}
    LIVE.setdefault(target.lab_number(lab), {})[name] = record
    return record
