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
