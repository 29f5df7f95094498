"""The pins hold everywhere: pyproject.toml, environment.yml, constraints.txt and the Gradescope
bundle say the same thing, and the cu12 route resolves."""

import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from kernellab.grading import gradescope, release

ROOT = Path(__file__).resolve().parents[2]
CONDA_ONLY = {"python", "pip", "cuda-version"}   # conda's way of saying what pip's extras say


def project(root: Path = ROOT) -> dict:
    return tomllib.loads((root / "pyproject.toml").read_text())["project"]


def pip_requirements(root: Path = ROOT) -> dict[str, str]:
    out = {}
    for dep in project(root)["dependencies"]:
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


def constraints(root: Path = ROOT) -> dict[str, str]:
    lines = (root / release.CONSTRAINTS).read_text().splitlines()
    pairs = (line.split("==") for line in lines if line.strip() and not line.startswith("#"))
    return {name.strip().lower(): version.strip() for name, version in pairs}


def test_same_packages_in_both():
    assert set(pip_requirements()) == set(conda_requirements())


def test_same_pins_in_both():
    pip, conda = pip_requirements(), conda_requirements()
    assert pip["numba-cuda"] == conda["numba-cuda"] == "0.30"
    assert pip["numba"] == conda["numba"] == "0.68"      # capped at the tested minor line
    assert pip["numpy"] == conda["numpy"] == "<2.5"
    for name in pip:
        assert pip[name] == conda[name], f"{name}: pip says {pip[name]!r}, conda {conda[name]!r}"
    assert "cuda-version=13" in (ROOT / "environment.yml").read_text()   # conda's cu13 route


def test_constraints_satisfy_pyproject_and_the_cuda_routes():
    pinned = constraints()
    requirements = [Requirement(d) for d in project()["dependencies"]]
    for extra in ("cu13", "cu12"):
        requirements += [Requirement(d) for d in project()["optional-dependencies"][extra]]
    for requirement in requirements:
        if requirement.name in pinned:
            assert requirement.specifier.contains(pinned[requirement.name]), \
                f"constraints.txt pins {requirement.name} {pinned[requirement.name]}, outside {requirement}"
    assert {"numba-cuda", "numba", "numpy"} <= set(pinned)


@pytest.mark.skipif(Path(sys.prefix) != ROOT / ".venv", reason="only the venv `make install` made")
def test_the_installed_stack_is_the_constrained_one():
    from importlib.metadata import version
    for name, pinned in constraints().items():
        assert version(name) == pinned, f"{name} {version(name)} installed, constraints.txt says {pinned}"


def test_every_install_route_uses_the_constraints():
    makefile = (ROOT / "Makefile").read_text()
    assert '-c constraints.txt -e ".[$(CUDA)]"' in makefile and "CUDA       ?= cu13" in makefile
    assert '-c constraints.txt -e ".[$(CUDA)]"' in release.STUDENT_MAKEFILE
    assert '-c "$AUTOGRADER/source/constraints.txt" "$AUTOGRADER/source[cu13]"' in gradescope.SETUP_SH


def test_the_bundle_carries_the_same_pins(tmp_path):
    with zipfile.ZipFile(gradescope.build_bundle(tmp_path / "build", ["00"])) as zf:
        zf.extractall(tmp_path / "bundle")
    bundle = tmp_path / "bundle"
    assert pip_requirements(bundle) == pip_requirements()
    assert project(bundle)["optional-dependencies"] == project()["optional-dependencies"]
    assert constraints(bundle) == constraints()


@pytest.mark.skipif(not os.environ.get("KERNELLAB_NETWORK_TESTS"),
                    reason="asks PyPI (make network-test)")
def test_cu12_route_resolves(tmp_path):
    """The Colab route: numba-cuda's cu12 extra with the same constraints brings CUDA 12 wheels."""
    report = tmp_path / "report.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run",
                    "--ignore-installed", "--disable-pip-version-check", "--report", str(report),
                    "-c", str(ROOT / release.CONSTRAINTS), *project()["optional-dependencies"]["cu12"]],
                   check=True, timeout=300)
    chosen = {item["metadata"]["name"]: item["metadata"]["version"]
              for item in json.loads(report.read_text())["install"]}
    assert chosen["cuda-bindings"].startswith("12.")
    assert any(name.endswith("-cu12") for name in chosen)
    for name, pinned in constraints().items():
        assert chosen[name] == pinned
