"""Submissions written to forge a grade score 0: the attacks that once gave full marks, and the
variants a careful student would try next, each added to an untouched starter (honest score 0).

Three layers stand between an attack and a score, and each is tested on its own:
- the import rule (kernellab.grading.policy), read by the parent before the lab runs: every attack
  is refused, with one line naming the construct and its line;
- the judge (kernellab.grading.tape): with the rule switched off, the attacks on the verdict run in
  the child and still score 0, because the course's own tests decide on the child's data;
- the protection (kernellab.grading.sandbox): with the rule off, an attack that reads the course's
  solutions by path finds nothing, under bubblewrap or a uid of its own.
"""

import json
from pathlib import Path

import pytest

from kernellab.course import target
from kernellab.grading import policy, runner, sandbox

STARTER = (target.ROOT / "labs" / "lab00_indexing.py").read_text()
SOLUTION = (target.ROOT / "solutions" / "lab00_indexing.py").read_text()

# Each attack is appended to the untouched starter of Lab 00 (whose honest score is 0).
VERDICT_ATTACKS = {
    "pytest's runtest patched": "import _pytest.python as p\np.Function.runtest = lambda self: None\n",
    "the same patch, its names built as strings": (
        "import importlib\np = importlib.import_module('_py' + 'test.python')\n"
        "setattr(getattr(p, 'Func' + 'tion'), 'run' + 'test', lambda self: None)\n"),
    "the plugin's progress events say passed": (
        "from kernellab.grading import plugin\n_event = plugin.GradeState.event\n"
        "def _passed(self, **fields):\n"
        "    if fields.get('event') == 'done':\n"
        "        fields['outcome'] = 'passed'\n"
        "    return _event(self, **fields)\n"
        "plugin.GradeState.event = _passed\n"),
    "numpy's comparisons patched": (
        "import numpy as np\nnp.allclose = lambda *a, **k: True\n"
        "np.array_equal = lambda *a, **k: True\nnp.testing.assert_allclose = lambda *a, **k: None\n"),
    "kernellab's checks patched": (
        "import kernellab.gpu.checks as c\nc.assert_matches = lambda *a, **k: None\n"
        "c.assert_launched = lambda *a, **k: None\n"),
    "a fake report written": (
        "import json, os\nfor _name in ('results.json', os.path.join(os.environ.get('HOME', '.'), "
        "'results.json')):\n    try:\n        open(_name, 'w').write(json.dumps({'score': 14, "
        "'max_score': 14, 'tests': []}))\n    except OSError:\n        pass\n"),
    "the workspace's tests rewritten": (
        "import glob\nfor _test in glob.glob('tests/labs/test_lab*.py'):\n    try:\n"
        "        open(_test, 'w').write('def test_nothing():\\n    pass\\n')\n"
        "    except OSError:\n        pass\n"),
    "the child exits with status 0 at import": "import os\nos._exit(0)\n",
}
READ_ATTACKS = {
    "the course's solutions executed, found from the venv's path": (
        "import os, sys\n_root = os.path.dirname(sys.prefix)\n"
        "exec(open(os.path.join(_root, 'solutions', 'lab00_indexing.py')).read())\n"),
}
ALL_ATTACKS = {**VERDICT_ATTACKS, **READ_ATTACKS,
               "kernellab's reference calculator imported around the rule": (
                   "import importlib\n_calc = importlib.import_module('kernellab.' + 'occupancy')\n"),
               "a builtin reached through a dunder": "_b = (0).__class__.__base__.__subclasses__()\n"}


def batch(folder: Path, attacks: dict) -> Path:
    for number, source in enumerate(attacks.values()):
        labs = folder / f"attack{number:02d}" / "labs"
        labs.mkdir(parents=True)
        (labs / "lab00_indexing.py").write_text(STARTER + "\n" + source)
    return folder


def grades(folder: Path, attacks: dict, **options) -> dict:
    """{attack: its results.json} for each attack, graded on Lab 00 in one pool."""
    import concurrent.futures
    names = list(attacks)

    def one(number):
        root = folder / f"attack{number:02d}"
        return runner.grade(["00"], "labs", root / "results.json", seed=5, root=root, out=None,
                            **options)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(names, pool.map(one, range(len(names)))))


def test_every_attack_breaks_the_import_rule_and_scores_0(tmp_path):
    """The real grader: each attack is refused by the parent, its line named, its lab scored 0."""
    documents = grades(batch(tmp_path, ALL_ATTACKS), ALL_ATTACKS)
    for attack, document in documents.items():
        assert document["score"] == 0, f"{attack}: scored {document['score']}"
        why = document["extra_data"]["policy"].get("00", "")
        assert "lab00_indexing.py, line" in why, f"{attack}: not refused by the import rule"
        assert all(why in test["output"] for test in document["tests"]), attack


def test_the_judge_holds_with_the_rule_switched_off(tmp_path):
    """Behind the rule, the attacks on the verdict run in the child, all of them in one file (each
    grade costs a child), and the lab still scores 0: every test fails in the judge, on the
    starter's own stubs, on a recorded run that stopped short (pytest's runtest patched away), or
    on the course's own tests where the child's copy of them was rewritten (where the
    protection lets it write there). Exiting at import is graded on its own."""
    together = {"every patch at once": "\n".join(source for name, source in VERDICT_ATTACKS.items()
                                                 if "exits" not in name),
                "the child exits with status 0 at import": VERDICT_ATTACKS[
                    "the child exits with status 0 at import"]}
    documents = grades(batch(tmp_path, together), together, import_policy=False)
    for attack, document in documents.items():
        assert document["score"] == 0, f"{attack}: scored {document['score']} with the rule off"
        assert not document["extra_data"]["policy"]
    patched = documents["every patch at once"]["tests"]      # ran, and failed in the judge
    assert all(any(why in test["output"] for why in ("Lab 00.", "the recorded run",
                                                     "the grader could not run"))
               for test in patched), [test["output"][:300] for test in patched]


def test_the_protection_hides_the_solutions(tmp_path):
    """Behind the rule, a submission that reads the course's solutions by path finds nothing:
    bubblewrap does not show them, and under `user` they are closed to the children's uid."""
    if sandbox.protection().kind == "copy":
        pytest.skip("no protection here beyond the copy: " + sandbox.protection().why)
    documents = grades(batch(tmp_path, READ_ATTACKS), READ_ATTACKS, import_policy=False)
    for attack, document in documents.items():
        assert document["score"] == 0, f"{attack}: scored {document['score']} under " \
                                       f"{document['extra_data']['protection']}"
        assert document["extra_data"]["protection"] == sandbox.protection().kind


def test_a_correct_file_keeps_full_marks_under_the_rule(tmp_path):
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "lab00_indexing.py").write_text(SOLUTION)
    document = runner.grade(["00"], "labs", tmp_path / "results.json", seed=5, root=tmp_path, out=None)
    assert document["score"] == document["max_score"] > 0, json.dumps(document["tests"], indent=1)[:3000]


@pytest.mark.parametrize("source, construct", [
    ("from kernellab.lab import scheduler\nscheduler.dataclasses.sys.modules\n", ".dataclasses"),
    ("import numpy as np\nnp.save('/tmp/x', np.zeros(2))\n", ".save"),
    ("import numpy as np\nnp.lib.format.open_memmap\n", ".lib"),
    ("from numba import cuda\ncuda.cudadrv.driver\n", ".cudadrv"),
    ("x = getattr(object, '__sub' + 'classes__')\n", "computed attribute name"),
    ("f = lambda: 0\nf.__globals__\n", "__globals__"),
    ("def g():\n    yield 1\ng().gi_frame.f_globals\n", ".gi_frame"),
    ("import numpy as np\nsetattr(np, 'allclose', None)\n", "patching an imported module"),
    ("eval('1')\n", "uses eval"),
    ("from . import x\n", "relative import"),
    ("from kernellab.lab import device\n", "does not export it"),
])
def test_the_rule_names_the_construct_and_its_line(source, construct):
    with pytest.raises(policy.Violation, match=r"lab00_indexing.py, line \d+: .*") as caught:
        policy.check_source(source, "lab00_indexing.py", "00", target.ROOT)
    assert construct in str(caught.value)


def test_the_course_keeps_its_own_rule():
    """Every starter and solution the course ships keeps the rule it states."""
    for folder in ("labs", "solutions"):
        for path in sorted((target.ROOT / folder).glob("lab[0-9][0-9]_*.py")):
            assert policy.check_file(path, path.name[3:5], target.ROOT) is None, path


def test_require_protection_refuses_a_weaker_machine(monkeypatch):
    monkeypatch.setattr(sandbox, "protection", lambda: sandbox.Protection("copy", "a test"))
    with pytest.raises(sandbox.ProtectionError, match="--require-protection bwrap"):
        runner.grade(["00"], "labs", Path("unused.json"), seed=1, out=None, require_protection="bwrap")
    assert not Path("unused.json").exists()
