"""The running stages' progress line (kafeed.cli.live_line): drawn on a terminal, throttled,
and absent with --json."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.text import Text

import kafeed.cli.live_line as live_line_module
from kafeed.cli.live_line import live_line


def _terminal(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    screen = io.StringIO()
    monkeypatch.setattr(live_line_module, "console", Console(file=screen, force_terminal=True, width=60))
    return screen


def test_the_line_shows_stats_and_skips_those_that_come_too_soon(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = _terminal(monkeypatch)
    with live_line("x: starting", lambda n: Text(f"x {n} in"), json_out=False) as progress:
        progress(5)
        progress(6)  # within EVERY_S of the last redraw
    assert "x 5 in" in screen.getvalue() and "x 6 in" not in screen.getvalue()


def test_json_output_gets_no_line(monkeypatch: pytest.MonkeyPatch) -> None:
    screen = _terminal(monkeypatch)
    with live_line("x: starting", lambda n: Text(f"x {n} in"), json_out=True) as progress:
        progress(5)
    assert screen.getvalue() == ""
