"""pyproject.toml and environment.yml must list the same dependencies with the same pins."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONDA_ONLY = {"python", "pip", "cuda-version"}   # conda's way of saying what pip's extras say


def pip_requirements() -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    out = {}
    for dep in deps:
        name, spec = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*(.*)$", dep).groups()
        out[name.lower()] = spec.replace("==", "").replace(".*", "").strip()
    return out


def conda_requirements() -> dict[str, str]:
    out = {}
    text = (ROOT / "environment.yml").read_text()
    for line in text.split("\ndependencies:", 1)[1].splitlines():
        match = re.match(r"^\s+-\s+([A-Za-z0-9_.-]+)\s*(=*)([^#\s]*)", line)
        if match and match.group(1) not in CONDA_ONLY:
            out[match.group(1).lower()] = match.group(3).strip()
    return out


def test_same_packages_in_both():
    assert set(pip_requirements()) == set(conda_requirements())


def test_same_pins_in_both():
    pip, conda = pip_requirements(), conda_requirements()
    assert pip["numba-cuda"] == conda["numba-cuda"] == "0.30"
    assert pip["numpy"] == conda["numpy"] == "<2.5"
    for name in pip:
        assert pip[name] == conda[name], f"{name}: pip says {pip[name]!r}, conda {conda[name]!r}"
