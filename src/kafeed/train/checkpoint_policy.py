"""When the training loop writes a checkpoint (:class:`CheckpointPolicy`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class CheckpointPolicy:
    """When the loop saves: every ``every`` steps and every ``also_every`` steps (0: not
    mid-run) and once at the end, unless the last step was just saved. ``last`` is the newest
    checkpoint written (None on ranks that write none)."""

    every: int
    saved_at: int
    also_every: int = 0
    last: str | None = None

    def after_step(self, step: int, save: Callable[[], str | None]) -> None:
        if any(n and step % n == 0 for n in (self.every, self.also_every)):
            self._save(step, save)

    def at_end(self, step: int, save: Callable[[], str | None]) -> None:
        if step != self.saved_at:
            self._save(step, save)

    def _save(self, step: int, save: Callable[[], str | None]) -> None:
        self.last = save() or self.last
        self.saved_at = step
