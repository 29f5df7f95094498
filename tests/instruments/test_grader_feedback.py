"""What a student reads about a lost test: the line of their own file where it went wrong (never a
line of kernellab's or of Numba's), the whole first line of the reason, in one stable order."""

import os
import subprocess
import sys
import textwrap

import pytest

from kernellab.grading import plugin, runner
from kernellab.course import target

pytestmark = pytest.mark.usefixtures("grade_in_the_simulator")

# A simulated kernel that loads before its guard: the IndexError comes from inside Numba's
# simulator, and the student's line is the kernel's own frame under it.
OUT_OF_BOUNDS = textwrap.dedent("""\
    import os, sys
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from numba import cuda
    from kernellab.grading import plugin

    @cuda.jit
    def copy_kernel(x, out):
        i = cuda.grid(1)
        v = x[i]
        if i < out.size:
            out[i] = v

    try:
        copy_kernel[1, 32](np.zeros(10, np.float32), np.zeros(10, np.float32))
    except IndexError as exc:
        print(plugin.where_it_failed(exc.__traceback__))
    """)


def test_an_out_of_bounds_load_names_the_students_kernel_line(tmp_path):
    lab = tmp_path / "lab00_indexing.py"
    lab.write_text(OUT_OF_BOUNDS)
    done = subprocess.run([sys.executable, str(lab), str(target.ROOT)], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "NUMBA_ENABLE_CUDASIM": "1"})
    assert done.stdout.strip() == "lab00_indexing.py:11", done.stdout + done.stderr[-2000:]


def test_a_failure_outside_the_students_file_names_the_tests_line_not_kernellabs():
    def check_in_kernellab():
        raise AssertionError("3 of 10 elements were never written")
    namespace = {"check": check_in_kernellab}
    exec(compile("def test_output():\n    check()\n", "tests/labs/test_lab00_indexing.py", "exec"),
         namespace)
    with pytest.raises(AssertionError) as failure:
        namespace["test_output"]()
    assert plugin.where_it_failed(failure.tb) == "checked at test_lab00_indexing.py:2"


def test_the_first_line_of_a_reason_is_whole():
    reason = ("fails the compile check for a real GPU (sm_80):\nlab kernel `axpb_kernel` cannot "
              "compile: " + "a Python list in a kernel is not supported by Numba on a GPU " * 5)
    assert plugin.first_reason("failed\n" + reason) == reason.replace("\n", " ").strip()


def test_lost_tests_come_in_the_labs_and_the_test_files_order(tmp_path):
    starter = (target.ROOT / "labs" / "lab00_indexing.py").read_text()
    (tmp_path / "labs").mkdir()
    (tmp_path / "labs" / "lab00_indexing.py").write_text(starter)
    document = runner.grade(["00"], root=tmp_path, results=tmp_path / "r.json", seed=3, jobs=2,
                            out=None)
    collected = runner.collect(["00"], runner.child_env("labs", None, 3), tmp_path)["00"]
    assert [t["number"] for t in document["tests"]] == list(collected)
