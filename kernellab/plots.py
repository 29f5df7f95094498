"""Figures: one look for every lab, and an honest label saying where the numbers came from.

A figure drawn from recorded reference data (no GPU here) says so in its title line;
a live one names the GPU it was measured on.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

if not os.environ.get("MPLBACKEND"):
    matplotlib.use("Agg")  # files only (CI, the tour); Jupyter sets MPLBACKEND to its inline backend

import matplotlib.pyplot as plt  # noqa: E402

FIGURES = Path("figures")


def source_label(record: dict | None) -> str:
    """'measured live on NVIDIA H200' or 'reference data: NVIDIA H200, 2026-11-29 (no GPU here)'."""
    if record is None:
        return "no measurement available"
    prov = record.get("provenance", {})
    gpu, date = prov.get("gpu", "unknown GPU"), prov.get("date", "")[:10]
    if record.get("live"):
        return f"measured live on {gpu}"
    return f"reference data: {gpu}, {date} (recorded, not measured here)"


def new_figure(title: str, record: dict | None, ncols: int = 1, width: float = 6.0):
    """A figure with `ncols` axes whose title carries the data's source."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 4.0), squeeze=False)
    fig.suptitle(f"{title}\n{source_label(record)}", fontsize=10)
    return fig, list(axes[0])


def save(fig, name: str, figures_dir: Path | None = None) -> Path:
    """Write `name`.png under figures/ (or figures_dir) and close the figure."""
    folder = Path(figures_dir or FIGURES)
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / f"{name}.png"
    fig.tight_layout()
    fig.savefig(file, dpi=110)
    plt.close(fig)
    return file
