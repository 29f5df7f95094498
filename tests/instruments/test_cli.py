"""Every `kernellab` command prints its help (a stray % in a help string crashes argparse)."""

import pytest

from kernellab import cli


def commands() -> list[str]:
    top = cli.parser()
    (sub,) = [a for a in top._actions if a.__class__.__name__ == "_SubParsersAction"]
    return sorted(sub.choices)


@pytest.mark.parametrize("command", [None, *commands()])
def test_help_prints(command, capsys):
    with pytest.raises(SystemExit) as done:
        cli.parser().parse_args([command, "--help"] if command else ["--help"])
    assert done.value.code == 0
    assert "usage: kernellab" in capsys.readouterr().out


UNWRITABLE = "/sys/kernellab-unwritable"     # no user, root included, can make a file in /sys
BAD_INPUTS = {   # arguments -> words the one line must hold
    ("grade", "--root", "/missing"): "no submission folder /missing",
    ("grade", "--batch", "/missing"): "no folder /missing",
    ("grade", "--root", "{empty}"): "holds no lab file",
    ("grade", "-j", "0"): "-j/--jobs: must be a whole number of at least 1",
    ("grade", "--timeout", "0"): "--timeout: must be a number of seconds above 0",
    ("grade", "42"): "no lab 42",
    ("grade", "00", "--out", "{tmp}/o"): "--out, --force and --roster go with --batch",
    ("grade", "00", "--roster", "{file}"): "--out, --force and --roster go with",
    ("grade", "00", "--seed", "-5"): "--seed: must be a whole number of at least 0",
    ("grade", "--results", "{tmp}"): "is a folder",
    ("grade", "--results", "{unwritable}/results.json"): "cannot be written",
    ("grade", "--results", "{course}/labs/results.json"): "lies inside the course folder",
    ("grade", "00", "--require-protection", "none"): "invalid choice: 'none'",
    ("grade", "--batch", "{empty}", "--out", "{course}/labs/gb"): "lies inside the course folder",
    ("grade", "--batch", "{empty}", "--out", "{unwritable}/gb"): "--out /sys/kernellab-unwritable",
    ("grade", "--batch", "{empty}", "--roster", "{tmp}/none.csv"): "no roster",
    ("grade", "--batch", "{empty}", "--roster", "{file}"): "has no submission column",
    ("gradescope", "--out", "{file}"): "is a file",
    ("gradescope", "--out", "{course}/labs/gs"): "lies inside the course folder",
    ("gradescope", "--out", "{unwritable}/gs"): "bundle /sys/kernellab-unwritable/gs cannot be",
    ("release", "{course}/labs/out"): "lies inside the course folder",
    ("release", "{file}"): "is a file",
    ("release", "{unwritable}/out"): "release /sys/kernellab-unwritable/out cannot be written",
    ("collect", "{file}", "{tmp}/c"): "has no submission column",
    ("collect", "{tmp}/none.csv", "{tmp}/c"): "no roster",
    ("collect", "{file}", "{tmp}/c", "--deadline", "friday"): "'friday' is not an ISO-8601 time",
    ("collect", "{file}", "{tmp}/c", "--deadline", "2026-12-01T23:59"): "has no time zone",
    ("occupancy", "--block-size", "0", "--registers", "32"): "--block-size: must be a whole number",
    ("occupancy", "--block-size", "4096", "--registers", "32"): "block_size must be in 1..1024",
    ("profile", "02:nope"): "lab 02 has no kernel 'nope'",
    ("mutants", "-j", "0"): "-j/--jobs: must be a whole number",
}


@pytest.mark.parametrize("words", BAD_INPUTS.values(), ids=[" ".join(a) for a in BAD_INPUTS])
def test_bad_input_gets_one_line_exit_2_and_writes_nothing(words, tmp_path, capsys, monkeypatch):
    from kernellab.course import target
    args = next(a for a, w in BAD_INPUTS.items() if w == words)
    (tmp_path / "empty").mkdir()
    (tmp_path / "a_file").write_text("")
    monkeypatch.chdir(tmp_path)
    filled = [a.format(tmp=tmp_path, empty=tmp_path / "empty", file=tmp_path / "a_file",
                       course=target.ROOT, unwritable=UNWRITABLE) for a in args]
    course_before = sorted(target.ROOT.rglob("*"))
    before = sorted(tmp_path.rglob("*"))
    try:
        code = cli.main(filled)
    except SystemExit as exc:            # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and words in err and len(err.splitlines()) == 1, err
    assert sorted(tmp_path.rglob("*")) == before and sorted(target.ROOT.rglob("*")) == course_before


def test_a_bogus_device_mode_is_one_line():
    import os
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-m", "kernellab.cli", "info"], capture_output=True,
                          text=True, env={**os.environ, "KERNELLAB_DEVICE": "bogus"})
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "kernellab: KERNELLAB_DEVICE must be one of auto|gpu|sim, not 'bogus'"]
