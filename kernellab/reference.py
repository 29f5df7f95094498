"""Recorded GPU measurements in data/reference/<gpu>/labNN.json, each with its provenance.

Without a GPU, figures are drawn from these files and labelled as reference data; on a GPU,
`kernellab bench` writes new ones. Every record says what produced it: GPU, driver,
versions, date and the exact command.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import sys
from pathlib import Path

from . import device, target

DATA = target.ROOT / "data" / "reference"
DEFAULT_GPU = "h200"
LIVE: dict[str, dict[str, dict]] = {}   # lab -> {name: record} measured live in this process (claims read it)


def provenance(command: str | None = None) -> dict:
    """Where a measurement came from; the date is UTC."""
    facts = device.facts()
    return {
        "gpu": facts.name,
        "cc": f"{facts.cc[0]}.{facts.cc[1]}",
        "sm_count": facts.sm_count,
        "simulated": facts.simulated,
        "versions": device.versions(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command or " ".join(shlex.quote(a) for a in [Path(sys.argv[0]).name] + sys.argv[1:]),
        "host": os.uname().nodename if hasattr(os, "uname") else "unknown",
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


def live_or_recorded(lab: str, name: str, measure) -> dict | None:
    """`measure()` live on a GPU (marked live); in the simulator, the lab's recorded reference
    record `name`, or None when nothing was recorded yet."""
    if not device.is_simulator():
        return note_live(lab, name, measure())
    stored = load(lab)
    return stored and stored["records"].get(name)


def note_live(lab: str, name: str, record: dict) -> dict:
    """Mark `record` live and keep it for this process's claims (kernellab.claims.sources)."""
    record = {**record, "live": True}
    LIVE.setdefault(target.lab_number(lab), {})[name] = record
    return record
