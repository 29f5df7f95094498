"""kernellab.show.progress: a bar only where someone watches, and off when asked."""

import io

import pytest

from kernellab.show import progress


@pytest.mark.parametrize("value, watched, enabled, shown", [
    ("auto", True, True, True),
    ("auto", False, True, False),     # CI logs, the grader's children: no bar
    ("on", False, True, True),
    ("off", True, True, False),
    ("on", True, False, False),       # the caller's flag wins
])
def test_a_bar_is_shown_only_where_watched_unless_told(monkeypatch, value, watched, enabled, shown):
    monkeypatch.setenv("KERNELLAB_PROGRESS", value)
    monkeypatch.setattr(progress, "watched", lambda: watched)
    assert progress.shown(enabled) is shown


def test_bad_setting_names_the_variable(monkeypatch):
    monkeypatch.setenv("KERNELLAB_PROGRESS", "loud")
    with pytest.raises(ValueError, match=r"KERNELLAB_PROGRESS must be one of auto\|on\|off, not 'loud'"):
        progress.shown()


@pytest.mark.parametrize("value, drawn", [("on", True), ("off", False)])
def test_the_bar_draws_on_stderr_only_when_shown(monkeypatch, value, drawn):
    monkeypatch.setenv("KERNELLAB_PROGRESS", value)
    stderr = io.StringIO()
    monkeypatch.setattr(progress.sys, "stderr", stderr)
    assert list(progress.progress_bar(range(3), desc="sweep")) == [0, 1, 2]
    assert ("sweep: 100%" in stderr.getvalue()) is drawn
