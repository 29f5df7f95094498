"""`--require-protection` refuses, in one line (exit 2) and before anything is graded or written,
on a machine whose protection is weaker (the simple bad inputs of every command: test_cli.py)."""

import pytest

from kernellab import cli
from kernellab.grading import sandbox

WEAK = sandbox.Protection("copy", "no bubblewrap, not root (this test's stand-in)")


@pytest.mark.parametrize("args", [["grade", "00"], ["grade", "--batch", "{subs}", "--out", "{out}"]])
@pytest.mark.parametrize("kind", ["bwrap", "user"])
def test_a_required_protection_this_machine_lacks_refuses_before_grading(args, kind, tmp_path,
                                                                         monkeypatch, capsys):
    monkeypatch.setattr(sandbox, "protection", lambda: WEAK)
    monkeypatch.setattr(sandbox, "Workspace", lambda *a, **k: pytest.fail("graded without protection"))
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    filled = [a.format(subs=tmp_path / "subs", out=tmp_path / "out") for a in args]
    code = cli.main([*filled, "--require-protection", kind])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and f"--require-protection {kind}" in err[0], err
    assert "copy" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["subs"]
