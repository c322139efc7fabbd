"""The scaling policy as a pure function of the lag readings: grow, hold, shrink, bounds, cooldown."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from kafeed.cli.scaling import worker_argv
from kafeed.monitor.lag import GroupLag
from kafeed.scale import ScalePolicy, ScaleSettings


def _lag(total: int, status: str = "OK") -> GroupLag:
    return GroupLag("g", status, total)  # type: ignore[arg-type]


def _feed(policy: ScalePolicy, workers: int, lags: list[int], *, start: float = 0.0,
          partitions: int = 4) -> list[int]:
    """The worker count after each reading, one reading a second."""
    out = []
    for i, total in enumerate(lags):
        workers = policy.decide(start + i, workers, partitions, _lag(total)).workers
        out.append(workers)
    return out


def test_grows_on_a_growing_backlog_shrinks_when_drained_with_cooldowns() -> None:
    policy = ScalePolicy(ScaleSettings(min_workers=1, max_workers=3, window=3, cooldown_s=5))
    # growing lag: one more worker once the window is full, then nothing during the cooldown
    assert _feed(policy, 1, [100, 200, 300, 400, 500, 600]) == [1, 1, 2, 2, 2, 2]
    # still growing after the cooldown: a third; never a fourth (max_workers)
    lags = [700, 800, 900, 1000, 1100, 1200, 1300, 1400]
    assert _feed(policy, 2, lags, start=6) == [2, 3, 3, 3, 3, 3, 3, 3]
    # drained: one fewer per cooldown, down to min_workers
    counts = _feed(policy, 3, [0] * 20, start=20)
    assert counts[2] == 2 and counts[-1] == 1 and counts == sorted(counts, reverse=True)


def test_holds_while_the_backlog_comes_down_fast_enough_and_never_exceeds_partitions() -> None:
    policy = ScalePolicy(ScaleSettings(min_workers=1, max_workers=8, window=3, cooldown_s=0,
                                       drain_target_s=30))
    assert _feed(policy, 1, [300, 200, 100, 50]) == [1, 1, 1, 1]  # drains in seconds: no change
    assert _feed(policy, 1, [10_000, 9_990, 9_980], start=10) == [1, 1, 2]  # ~1000 s to drain
    slow = ScalePolicy(ScaleSettings(min_workers=1, max_workers=8, window=2, cooldown_s=0))
    assert _feed(slow, 1, [5, 6, 7, 8, 9, 10, 11, 12], partitions=2)[-1] == 2


def test_bounds_are_checked() -> None:
    with pytest.raises(ValidationError, match="below min_workers"):
        ScaleSettings(min_workers=3, max_workers=2)


def test_workers_run_the_same_command_without_the_supervisors_options() -> None:
    argv = worker_argv(["route", "--rules", "r.toml", "--workers", "auto", "--max-workers=3",
                        "--min-workers", "1", "--until-caught-up", "--json", "-b", "h:1"])
    assert argv[3:] == ["route", "--rules", "r.toml", "-b", "h:1", "--workers", "1"]
