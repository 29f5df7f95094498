"""The cosmic-ray driver (`make mutation`, kernellab.grading.mutation) counts only mutants inside
the stubs' bodies, and its report says which survivors are recorded as equivalent. cosmic-ray
itself is not installed by `make install`: these check the parts that do not run it."""

import pytest

from kernellab.course import target
from kernellab.grading import mutation


def test_only_the_stub_bodies_are_mutated():
    solution, starter = (target.ROOT / part / "lab00_indexing.py" for part in ("solutions", "labs"))
    lines = solution.read_text().splitlines()
    inside = mutation.stub_lines(solution, starter)
    body = {i + 1 for i, line in enumerate(lines) if "return (n + block - 1) // block" in line}
    given = {i + 1 for i, line in enumerate(lines) if "def reference_axpb" in line or "grid = (blocks_for(cols" in line}
    assert body <= inside and not (given & inside)


def test_the_report_marks_survivors_recorded_as_equivalent(monkeypatch):
    monkeypatch.setattr(mutation, "equivalents", lambda lab: {("core/NumberReplacer", "x = 1"): "x is never read"})
    found = [{"line": 3, "operator": "core/NumberReplacer", "occurrence": 0, "text": "x = 1", "diff": "-x = 1\n+x = 2"},
             {"line": 9, "operator": "core/AddNot", "occurrence": 0, "text": "if a:", "diff": "-if a:\n+if not a:"}]
    text = mutation.report("00", 5, found, 12.0, 1)
    assert "5 mutants" in text and "2 survived, 1 of them recorded as equivalent" in text
    assert "line 3, core/NumberReplacer #0: equivalent: x is never read" in text
    assert "line 9, core/AddNot #0: **survives: no check kills it**" in text


def test_every_recorded_equivalent_names_a_lab_and_a_reason():
    for lab in target.labs():
        for (operator, line), why in mutation.equivalents(lab).items():
            assert operator in mutation.SLIPS and line and why, (lab, operator, line)


def test_survivors_reads_the_work_database_cosmic_ray_writes(tmp_path):
    """The killed, the skipped and the survivor of a real WorkDB: only the survivor is listed,
    with the line the diff removes."""
    pytest.importorskip("cosmic_ray")
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkItem, WorkResult, WorkerOutcome
    name = target.labs()["00"]
    outcomes = {"killed": (WorkerOutcome.NORMAL, TestOutcome.KILLED, 1),
                "skipped": (WorkerOutcome.SKIPPED, None, 1),
                "survived": (WorkerOutcome.NORMAL, TestOutcome.SURVIVED, 2)}
    with use_db(str(tmp_path / "mutants.sqlite"), WorkDB.Mode.create) as db:
        for job, (worker, test, line) in outcomes.items():
            db.add_work_item(WorkItem.single(job, MutationSpec(f"solutions/{name}.py", "core/X", 0, (line, 0), (line, 1))))
            diff = f"--- a/x.py\n+++ b/x.py\n@@ -{line} +{line} @@\n-if a < b:\n+if a <= b:\n"
            db.set_result(job, WorkResult(worker_outcome=worker, test_outcome=test, diff=diff))
    graded, found = mutation.survivors([tmp_path], "00")
    assert graded == 2
    assert [(s["line"], s["text"]) for s in found] == [(2, "if a < b:")]


def test_no_committed_report_shows_a_survivor_left_unexplained():
    """`make mutation`'s committed reports (docs/mutation/): every survivor is recorded as
    equivalent, with its reason, or a check was added and the lab run again."""
    reports = sorted((target.ROOT / "docs" / "mutation").glob("lab[0-9][0-9].md"))
    unexplained = [report.name for report in reports if "**survives: no check kills it**" in report.read_text()]
    assert unexplained == []


def test_a_given_function_around_a_stub_kernel_is_not_mutated():
    """Lab 05's fused_kernels is given code that holds the student's kernel: its own lines (the
    items check) are not the student's, the kernel's are."""
    solution, starter = (target.ROOT / part / "lab05_reduction_fusion.py" for part in ("solutions", "labs"))
    lines = solution.read_text().splitlines()
    inside = mutation.stub_lines(solution, starter)
    check = next(n for n, line in enumerate(lines, 1) if "if not 1 <= items <= MAX_ITEMS:" in line)
    online = next(n for n, line in enumerate(lines, 1) if "if value > running_max:" in line)
    assert check not in inside and online in inside


def test_a_gpu_report_is_compared_mutant_by_mutant_with_the_committed_one(tmp_path):
    """gpu_run.sh's mutation stage: a report that kills a mutant the committed one let through (or
    grades another number of mutants) is named; the committed report agrees with itself."""
    committed = target.ROOT / "docs" / "mutation"
    text = (committed / "lab01.md").read_text()
    assert mutation.differences("01", text, committed) == ""
    first = text.index("\n- line ")
    killed = text[:first] + text[text.index("\n- line ", first + 1):]
    assert "(killed here)" in mutation.differences("01", killed, committed)
    graded, _ = mutation.verdicts(text)
    fewer = text.replace(f"Graded {graded} ", f"Graded {graded - 1} ")
    assert f"{graded - 1} mutants graded against {graded}" in mutation.differences("01", fewer, committed)
    assert "no report" in mutation.differences("01", text, tmp_path)


def test_the_shards_grade_every_mutant_of_the_stubs_once(tmp_path):
    """Each mutant inside the stubs is in exactly one shard: none skipped, none graded twice."""
    pytest.importorskip("cosmic_ray")
    from cosmic_ray.work_db import WorkDB, use_db
    copies = mutation.prepare("02", 3, 1, None, tmp_path)
    every = mutation.prepare("02", 1, 1, None, tmp_path / "one")[0]
    key = lambda item: (item.mutations[0].operator_name, item.mutations[0].occurrence)
    dealt = []
    for copy in copies:
        with use_db(str(copy / "mutants.sqlite"), WorkDB.Mode.open) as db:
            dealt += [key(item) for item in db.pending_work_items]
    with use_db(str(every / "mutants.sqlite"), WorkDB.Mode.open) as db:
        expected = sorted(key(item) for item in db.pending_work_items)
    assert sorted(dealt) == expected and len(set(dealt)) == len(dealt) > 0


def test_on_a_gpu_the_simulator_tests_run_in_a_simulator_child(tmp_path):
    """`kernellab grade` on a GPU runs the tests marked `simulator` in a simulator child; a plain
    pytest on a GPU skips them, so the GPU's mutation verdicts would miss every bug only they catch
    (the first GPU run, 2026-12-07: 23 of Lab 00's 51 mutants survived). The command runs both halves,
    and a lab with no test marked so (pytest's exit 5) still passes."""
    import shlex
    import subprocess
    tests = tmp_path / "test_x.py"
    tests.write_text("import pytest\n\n@pytest.mark.points(1)\ndef test_plain():\n    pass\n")
    command = mutation.test_command(tests, 7, "gpu")
    assert mutation.test_command(tests, 7, "sim").endswith("--seed 7 -m points")
    argv = shlex.split(command)
    assert argv[:2] == ["sh", "-c"] and "KERNELLAB_DEVICE=sim" in argv[2] and '-m "points and simulator"' in argv[2]
    # the GPU half swapped for a command that passes: the simulator half selects nothing, exit 5 -> 0
    halves = argv[2].split(" && ", 1)
    shell = subprocess.run(["sh", "-c", "true && " + halves[1]], cwd=target.ROOT, capture_output=True, text=True)
    assert shell.returncode == 0, shell.stdout + shell.stderr
    failing = subprocess.run(["sh", "-c", "false && " + halves[1]], capture_output=True)
    assert failing.returncode != 0


def test_the_gpu_command_survives_cosmic_rays_configuration(tmp_path):
    """The GPU's command holds quotes: written into cosmic-ray.toml, it reads back whole (the first
    run of it on an H100, 2026-12-07, stopped at `cosmic-ray init` with a TOML error). Read by
    Python's TOML reader, and by cosmic-ray's where it is installed (`make mutation`)."""
    import importlib.util
    import tomllib
    command = mutation.test_command(tmp_path / "test_x.py", 7, "gpu")
    config = tmp_path / "cosmic-ray.toml"
    config.write_text(mutation.config_text("solutions/lab00_indexing.py", command))
    assert tomllib.loads(config.read_text())["cosmic-ray"]["test-command"] == command
    if importlib.util.find_spec("cosmic_ray") is not None:
        from cosmic_ray.config import load_config
        assert load_config(str(config))["test-command"] == command
