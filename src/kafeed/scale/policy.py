"""When to add or remove a worker, from the consumer group's lag trend (a pure function of it).

Grow (one worker at a time, never beyond ``max_workers`` or the input's partition count)
when the group's lag is not coming down: Burrow's WARN (lag never decreased across the
window), or a backlog that at the rate it is being worked off would take longer than
``drain_target_s``. Shrink (one at a time, never below ``min_workers``) when the lag
has stayed at ``allowed_lag`` or below for the whole window. After any change, wait
``cooldown_s`` before the next, so the new member's rebalance settles first.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafeed.monitor.lag import GroupLag


class ScaleSettings(BaseModel):
    """The supervisor's bounds and pace."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_workers: int = Field(default=1, ge=1, le=1024)
    max_workers: int = Field(default=4, ge=1, le=1024)
    interval_s: float = Field(default=1.0, gt=0, le=300)  # between lag readings
    window: int = Field(default=5, ge=2, le=100)  # readings the trend is judged on
    cooldown_s: float = Field(default=15.0, ge=0, le=3600)
    drain_target_s: float = Field(default=30.0, gt=0)
    allowed_lag: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> ScaleSettings:
        if self.max_workers < self.min_workers:
            raise ValueError(f"max_workers ({self.max_workers}) is below min_workers ({self.min_workers})")
        return self


@dataclass(frozen=True)
class Decision:
    workers: int  # how many there should be now
    reason: str


class ScalePolicy:
    """Remembers the last ``window`` total lags and the time of the last change."""

    def __init__(self, settings: ScaleSettings) -> None:
        self.settings = settings
        self._lags: deque[tuple[float, int]] = deque(maxlen=settings.window)
        self._changed_at = float("-inf")

    def decide(self, now: float, workers: int, partitions: int, lag: GroupLag) -> Decision:
        s = self.settings
        self._lags.append((now, lag.total_lag))
        ceiling = max(s.min_workers, min(s.max_workers, partitions))
        if workers < s.min_workers:
            return self._change(now, s.min_workers, f"below --min-workers {s.min_workers}")
        if workers > ceiling:
            return self._change(now, ceiling, f"more workers than {partitions} partitions or --max-workers")
        full = len(self._lags) == s.window
        if not full or now - self._changed_at < s.cooldown_s:
            return Decision(workers, "")
        lags = [v for _t, v in self._lags]
        if max(lags) <= s.allowed_lag:
            if workers > s.min_workers:
                return self._change(now, workers - 1,
                                    f"lag drained (<= {s.allowed_lag} for {s.window} readings)")
            return Decision(workers, "")
        if workers >= ceiling:
            return Decision(workers, "")
        if lag.status == "WARN" or all(b >= a for a, b in itertools.pairwise(lags)):
            return self._change(now, workers + 1, f"lag {lags[-1]:,} is not coming down")
        (t0, first), (t1, last) = self._lags[0], self._lags[-1]
        rate = (first - last) / (t1 - t0) if t1 > t0 else 0.0
        if rate > 0 and last / rate > s.drain_target_s:
            return self._change(now, workers + 1, f"lag {last:,} would take {last / rate:,.0f}s to drain")
        return Decision(workers, "")

    def _change(self, now: float, workers: int, reason: str) -> Decision:
        self._changed_at = now
        self._lags.clear()  # judge the new size on readings taken with it
        return Decision(workers, reason)
