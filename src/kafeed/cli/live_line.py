"""A running stage's progress line on the terminal: redrawn at most four times a second, and
nothing at all with --json or when the output is not a terminal."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from kafeed.cli.common import console

if TYPE_CHECKING:
    from rich.text import Text

S = TypeVar("S")
EVERY_S = 0.25  # the least time between two redraws


@contextlib.contextmanager
def live_line(first: str, line: Callable[[S], Text], *, json_out: bool) -> Iterator[Callable[[S], None]]:
    """The ``on_progress`` of a stage's run: ``first`` until its first stats, then ``line(stats)``."""
    from rich.live import Live
    from rich.text import Text

    if json_out or not console.is_terminal:
        yield lambda stats: None
        return
    last = 0.0
    with Live(Text(first), console=console, transient=True, refresh_per_second=4) as live:

        def show(stats: S) -> None:
            nonlocal last
            now = time.monotonic()
            if now - last >= EVERY_S:
                last = now
                live.update(line(stats))

        yield show
