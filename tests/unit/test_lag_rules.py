"""Burrow's lag rules on recorded observation sequences."""

from __future__ import annotations

import pytest

from kafeed.monitor.lag import LagTracker, Observation, evaluate_partition, group_state


def seq(*points: tuple[int, int], step: float = 1.0) -> list[Observation]:
    """(offset, lag) pairs observed ``step`` seconds apart, starting at t=0."""
    return [Observation(i * step, offset, lag) for i, (offset, lag) in enumerate(points)]


def status(window: list[Observation], *, now: float | None = None, current_lag: int | None = None,
           size: int = 5, allowed: int = 0) -> str:
    now = window[-1].timestamp + 0.5 if now is None else now
    current = window[-1].lag if current_lag is None else current_lag
    return evaluate_partition(window, now=now, current_lag=current, window_size=size, allowed_lag=allowed)


def test_empty_window_is_ok() -> None:
    assert evaluate_partition([], now=10, current_lag=100) == "OK"


def test_lag_zero_throughout_is_ok_even_when_stopped() -> None:
    window = seq((10, 0), (10, 0), (10, 0), (10, 0), (10, 0))
    # No commit for ages, but nothing to consume: not an error (Burrow's rule 4 exception).
    assert status(window, now=1000, current_lag=0) == "OK"


def test_keeping_up_is_ok() -> None:
    assert status(seq((10, 5), (20, 0), (30, 4), (40, 2), (50, 3))) == "OK"


def test_rewind() -> None:
    assert status(seq((100, 5), (110, 5), (50, 70), (60, 65), (70, 60))) == "REWIND"


def test_rewind_wins_over_stop() -> None:
    assert status(seq((100, 5), (90, 20)), now=100, current_lag=20) == "REWIND"


def test_stop_when_commits_stop_longer_than_the_window_spans() -> None:
    window = seq((10, 5), (20, 8), (30, 12))  # span 2 s
    assert status(window, now=2.5, current_lag=20) == "OK"  # last commit 0.5 s ago: lag trend too short
    assert status(window, now=4.1, current_lag=20) == "STOP"  # 2.1 s silent > 2 s span


def test_stop_needs_lag() -> None:
    window = seq((10, 5), (20, 8), (30, 12))
    assert status(window, now=100, current_lag=0) == "OK"


def test_min_span_guards_a_single_observation() -> None:
    window = seq((10, 5))
    assert evaluate_partition(window, now=5, current_lag=9, window_size=5, min_span=10) == "OK"
    assert evaluate_partition(window, now=11, current_lag=9, window_size=5, min_span=10) == "STOP"


def test_stall_when_offset_never_moves_over_a_full_window() -> None:
    assert status(seq((10, 5), (10, 6), (10, 8), (10, 9), (10, 12))) == "STALL"


def test_stall_and_warn_wait_for_a_full_window() -> None:
    assert status(seq((10, 5), (10, 6), (10, 8), (10, 9))) == "OK"  # 4 of 5
    assert status(seq((10, 5), (20, 6), (30, 8), (40, 9))) == "OK"


def test_warn_when_lag_never_decreases() -> None:
    assert status(seq((10, 5), (20, 6), (30, 6), (40, 9), (50, 12))) == "WARN"


def test_lag_decreasing_once_is_ok() -> None:
    assert status(seq((10, 5), (20, 6), (30, 4), (40, 9), (50, 12))) == "OK"


def test_recent_lag_zero_is_ok() -> None:
    assert status(seq((10, 5), (20, 6), (30, 8), (40, 9), (50, 0))) == "OK"


def test_allowed_lag_counts_as_zero() -> None:
    window = seq((10, 5), (20, 6), (30, 6), (40, 9), (50, 12))
    assert status(window, allowed=12) == "OK"
    assert status(window, allowed=11) == "WARN"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([], "OK"),
        (["OK", "OK"], "OK"),
        (["OK", "WARN"], "WARN"),
        (["WARN", "STALL", "OK"], "ERR"),
        (["OK", "STOP"], "ERR"),
        (["REWIND"], "ERR"),
    ],
)
def test_group_is_its_worst_partition(statuses: list[str], expected: str) -> None:
    assert group_state(statuses) == expected


def test_tracker_memberless_group_that_stops_becomes_stop() -> None:
    tracker = LagTracker(window=4, min_span=2.0)
    t = 0.0
    for offset in (10, 20, 30):
        tracker.observe("g", "t", 0, offset=offset, high_watermark=offset + 5, now=t, active=False)
        t += 1.0
    # commits stop; the producer goes on; polls keep coming but add nothing
    for hw in (50, 60, 70):
        tracker.observe("g", "t", 0, offset=30, high_watermark=hw, now=t, active=False)
        t += 1.0
    result = tracker.evaluate("g", now=t)
    part = result.partitions[0]
    assert (part.status, part.lag, result.status) == ("STOP", 40, "ERR")
    assert part.complete == 0.75  # three observations: the silent polls were not commits


def test_tracker_live_group_stuck_is_stall() -> None:
    tracker = LagTracker(window=4)
    for i in range(4):
        tracker.observe("g", "t", 0, offset=10, high_watermark=20 + i, now=float(i), active=True)
    assert tracker.evaluate("g", now=3.2).partitions[0].status == "STALL"


def test_tracker_group_status_is_worst_partition() -> None:
    tracker = LagTracker(window=3)
    for i in range(3):
        tracker.observe("g", "t", 0, offset=10 * i, high_watermark=10 * i, now=float(i), active=True)
        tracker.observe("g", "t", 1, offset=10 + 5 * i, high_watermark=20 + 10 * i, now=float(i), active=True)
    result = tracker.evaluate("g", now=2.5)
    assert [p.status for p in result.partitions] == ["OK", "WARN"]
    assert result.status == "WARN"
    assert result.worst is not None and result.worst.partition == 1
    assert result.total_lag == 20


def test_tracker_rejects_tiny_window() -> None:
    with pytest.raises(ValueError):
        LagTracker(window=1)
