"""What the training loop reports while it runs: a progress line and the figures of a window.

A window is the steps since the previous report. Every ``log_every`` steps, and at the last
step, :class:`ProgressReporter` turns it into tokens per second (across ranks), the share of
the time spent waiting for data, and the consumer lag; rank 0 prints the line, and a run
recorder (``--run-dir``) keeps the figures only the loop knows for ``kafeed report``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from kafeed.train.defaults import TRAIN_DEFAULTS


class Recorder(Protocol):
    """What the reporter needs of :class:`kafeed.telemetry.MetricsRecorder`."""

    def record(self, **extra: float) -> None: ...


class ProgressReporter:
    """Sums each window's tokens and data wait and reports them every ``log_every`` steps."""

    def __init__(self, *, total_steps: int, log_every: int = TRAIN_DEFAULTS["log_every"], rank: int = 0,
                 world_size: int = 1, show: Callable[[str], None] = print,
                 lag_fn: Callable[[], int | None] | None = None, recorder: Recorder | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.total_steps = total_steps
        self.log_every = log_every
        self.rank = rank
        self.world_size = world_size
        self.show = show
        self.lag_fn = lag_fn
        self.recorder = recorder
        self.clock = clock
        self._start = clock()
        self._tokens = 0
        self._wait = 0.0

    def step(self, step: int, loss: float, tokens: int, waited: float) -> dict[str, Any] | None:
        """Count one step; the window's figures when this step reports, else None."""
        self._tokens += tokens
        self._wait += waited
        if step % self.log_every and step != self.total_steps:
            return None
        return self._report(step, loss)

    def _report(self, step: int, loss: float) -> dict[str, Any]:
        now = self.clock()
        span = max(now - self._start, 1e-9)
        lag = self.lag_fn() if self.lag_fn is not None else None
        figures = {"step": step, "loss": round(loss, 4),
                   "tokens_per_s": round(self._tokens / span * self.world_size, 1),
                   "data_wait_share": round(self._wait / span, 3), "lag": lag, "time": time.time()}
        if self.rank == 0:
            shown_lag = "-" if lag is None else f"{lag:,}"
            self.show(f"step {step:>6}/{self.total_steps}  loss {loss:.4f}  "
                      f"tokens/s {figures['tokens_per_s']:>9,.0f}  "
                      f"data-wait {figures['data_wait_share']:.1%}  lag {shown_lag}")
        if self.recorder is not None:
            # loss and step are gauges already; add what only the loop knows
            self.recorder.record(**{k: float(v) for k, v in figures.items()
                                    if k in ("tokens_per_s", "data_wait_share", "lag") and v is not None})
        self._start, self._tokens, self._wait = now, 0, 0.0
        return figures
