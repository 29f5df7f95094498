"""The student API does not move (kernellab.lab, ARCHITECTURE.md rule 8): the lab files import
kernellab through it alone, and a submission written against the previous release's starter, whose
imports were `kernellab.traffic`, `kernellab.resources`, `kernellab.graphs` and `kernellab.device`,
still imports, warns, and gets full marks."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kernellab import lab
from kernellab.course import target
from kernellab.grading import runner

LAB_FILES = sorted((target.ROOT / "labs").glob("lab*.py")) + sorted(
    (target.ROOT / "solutions").glob("lab*.py"))


def kernellab_imports(path: Path) -> set[str]:
    """The kernellab modules a file imports, anywhere in it."""
    tree = ast.parse(path.read_text())
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    names |= {node.module for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    return {name for name in names if name.split(".")[0] == "kernellab"}


@pytest.mark.parametrize("path", LAB_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_lab_files_import_kernellab_through_the_student_api_only(path):
    assert kernellab_imports(path) <= {"kernellab.lab"}
    reached = {ast.unparse(node) for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
               and node.value.id == "kernellab"}
    assert reached <= {"kernellab.lab"}, "kernellab's rooms reached past the student API"


def test_the_student_api_has_every_name_it_lists():
    assert [name for name in lab.__all__ if not hasattr(lab, name)] == []


PREVIOUS_PATHS = """
import warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    import kernellab
    from kernellab import device, resources, graphs
    from kernellab.traffic import Ledger
    facts = kernellab.device.facts()
from kernellab import lab
from kernellab.gpu import device as moved_device
print(json.dumps({
    "same": [device is moved_device, resources.jit is lab.jit, Ledger is lab.Ledger,
             graphs.capture is lab.capture, resources.kernel_resources is lab.kernel_resources,
             facts == lab.device_facts()],
    "warned": sorted({str(w.message).split()[0] for w in seen if w.category is DeprecationWarning}),
    "lines": sorted({w.lineno for w in seen if w.filename == "<string>"}),
}))
"""


def test_the_previous_releases_paths_still_work_and_warn(grade_in_the_simulator):
    proc = subprocess.run([sys.executable, "-c", "import json\n" + PREVIOUS_PATHS],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    assert found["same"] == [True] * 6
    assert found["warned"] == ["kernellab.device", "kernellab.graphs", "kernellab.resources",
                               "kernellab.traffic"]
    assert found["lines"] and min(found["lines"]) >= 6    # the student's lines, not kernellab's


def previous_release_submission(folder: Path) -> Path:
    """Lab 02's solution as a student would have handed it in from the previous release's starter:
    `import kernellab`, `from kernellab.traffic import Ledger`, `kernellab.device.facts()`."""
    text = (target.ROOT / "solutions" / "lab02_vertical_fusion.py").read_text()
    for new, old in [
        ("# kernellab first: importing it chooses GPU or simulator before numba.cuda is imported\n"
         "from kernellab.lab import Ledger, device_facts\n",
         "import kernellab  # noqa: F401  (chooses GPU or simulator before numba.cuda is imported)\n"),
        ("import numpy as np\n", "import numpy as np\n\nfrom kernellab.traffic import Ledger\n"),
        ("device_facts()", "kernellab.device.facts()"),
    ]:
        assert new in text, f"solutions/lab02 changed: {new!r} is gone"
        text = text.replace(new, old, 1)
    (folder / "labs").mkdir(parents=True)
    (folder / "labs" / "lab02_vertical_fusion.py").write_text(text)
    return folder


def test_a_submission_from_the_previous_starter_gets_full_marks(grade_in_the_simulator, tmp_path):
    """Its deprecated imports warn and cost nothing (about 10 s on 2 cores)."""
    root = previous_release_submission(tmp_path / "submission")
    document = runner.grade(["02"], root=root, results=tmp_path / "r.json", seed=7, out=None)
    lost = [t["name"] for t in document["tests"] if t["score"] < t["max_score"]]
    assert lost == [] and document["score"] == sum(t["max_score"] for t in document["tests"])
