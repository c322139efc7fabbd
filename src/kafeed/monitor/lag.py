"""Consumer lag evaluated with Burrow's rules over a sliding window of observations.

Per partition, over the last ``window`` committed-offset observations (oldest
first), with lag = high watermark - committed offset and ``allowed_lag``
counting as zero:

1. no observation yet, or every lag (the window's and the current one) <= allowed: **OK**;
2. the committed offset went backwards anywhere in the window: **REWIND**;
3. no new commit for longer than the window spans (now - last > last - first,
   and at least ``min_span`` seconds), while the current lag is above allowed: **STOP**;
4. the latest lag is <= allowed: **OK** (the consumer caught up);
5. the window is full, the offset never moved and lag > allowed: **STALL**;
6. the window is full and lag never decreased between observations: **WARN**;
7. else **OK**.

STALL and WARN judge a trend, so they wait for a full window. ``min_span``
(the monitor passes window x poll interval) keeps a window of one or two
close observations from calling every short pause a STOP. A group's status is its worst partition:
STOP, STALL and REWIND make it **ERR**, WARN makes it **WARN**.

Kafka does not expose commit times, so :class:`LagTracker` decides what counts
as a commit: a poll adds an observation when the committed offset moved, or
when the group has live members (a live consumer that commits the same offset
is what STALL means). A memberless group whose offset stands still adds
nothing, so its silence grows until rule 3 calls it STOP.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

PartitionState = Literal["OK", "WARN", "STALL", "STOP", "REWIND"]
GroupState = Literal["OK", "WARN", "ERR"]

#: Numeric codes exported as ``kafeed_consumer_partition_status``.
STATUS_CODES: dict[str, int] = {"OK": 0, "WARN": 1, "STALL": 2, "STOP": 3, "REWIND": 4}
#: Numeric codes exported as ``kafeed_consumer_group_status``.
GROUP_CODES: dict[str, int] = {"OK": 0, "WARN": 1, "ERR": 2}
_SEVERITY: dict[str, int] = {"OK": 0, "WARN": 1, "STALL": 2, "STOP": 3, "REWIND": 4}

DEFAULT_WINDOW = 10


@dataclass(frozen=True)
class Observation:
    """One committed offset seen at ``timestamp`` (seconds), with its lag at that moment."""

    timestamp: float
    offset: int
    lag: int


def evaluate_partition(
    window: Sequence[Observation],
    *,
    now: float,
    current_lag: int,
    window_size: int = DEFAULT_WINDOW,
    allowed_lag: int = 0,
    min_span: float = 0.0,
) -> PartitionState:
    """Burrow's status of one partition (rules in the module docstring)."""
    if not window or (current_lag <= allowed_lag and all(o.lag <= allowed_lag for o in window)):
        return "OK"
    pairs = list(itertools.pairwise(window))
    if any(b.offset < a.offset for a, b in pairs):
        return "REWIND"
    first, last = window[0], window[-1]
    span = max(last.timestamp - first.timestamp, min_span)
    if span > 0 and now - last.timestamp > span and current_lag > allowed_lag:
        return "STOP"
    if last.lag <= allowed_lag or current_lag <= allowed_lag:
        return "OK"
    if len(window) < window_size:
        return "OK"
    if first.offset == last.offset:
        return "STALL"
    if all(b.lag >= a.lag for a, b in pairs):
        return "WARN"
    return "OK"


def group_state(statuses: Iterable[str]) -> GroupState:
    """The group's status from its partitions': the worst one, ERR for STOP/STALL/REWIND."""
    worst = max((_SEVERITY[s] for s in statuses), default=0)
    if worst >= _SEVERITY["STALL"]:
        return "ERR"
    return "WARN" if worst == _SEVERITY["WARN"] else "OK"


@dataclass(frozen=True)
class PartitionLag:
    topic: str
    partition: int
    offset: int
    high_watermark: int
    lag: int
    status: PartitionState
    complete: float  # share of the window filled, 0..1


@dataclass(frozen=True)
class GroupLag:
    group: str
    status: GroupState
    total_lag: int
    partitions: list[PartitionLag] = field(default_factory=list)

    @property
    def worst(self) -> PartitionLag | None:
        return max(self.partitions, key=lambda p: (_SEVERITY[p.status], p.lag), default=None)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        worst = self.worst
        out["worst"] = None if worst is None else asdict(worst)
        return out


@dataclass
class _Track:
    window: deque[Observation]
    offset: int
    high_watermark: int


class LagTracker:
    """Keeps the last ``window`` observations per (group, topic, partition) and evaluates them."""

    def __init__(self, *, window: int = DEFAULT_WINDOW, allowed_lag: int = 0,
                 min_span: float = 0.0) -> None:
        if window < 2:
            raise ValueError("the lag window needs at least 2 observations")
        self.window = window
        self.allowed_lag = allowed_lag
        self.min_span = min_span
        self._tracks: dict[str, dict[tuple[str, int], _Track]] = {}

    def observe(self, group: str, topic: str, partition: int, *, offset: int,
                high_watermark: int, now: float, active: bool) -> None:
        """Record one poll of a committed ``offset`` (see the module docstring for the policy)."""
        lag = max(0, high_watermark - offset)
        tracks = self._tracks.setdefault(group, {})
        track = tracks.get((topic, partition))
        if track is None:
            track = tracks[(topic, partition)] = _Track(deque(maxlen=self.window), offset, high_watermark)
            track.window.append(Observation(now, offset, lag))
            return
        moved = not track.window or track.window[-1].offset != offset
        if moved or active:
            track.window.append(Observation(now, offset, lag))
        track.offset = offset
        track.high_watermark = high_watermark

    def forget(self, group: str) -> None:
        self._tracks.pop(group, None)

    def groups(self) -> list[str]:
        return sorted(self._tracks)

    def evaluate(self, group: str, *, now: float) -> GroupLag:
        parts: list[PartitionLag] = []
        for (topic, partition), track in sorted(self._tracks.get(group, {}).items()):
            lag = max(0, track.high_watermark - track.offset)
            status = evaluate_partition(track.window, now=now, current_lag=lag,
                                        window_size=self.window, allowed_lag=self.allowed_lag,
                                        min_span=self.min_span)
            parts.append(PartitionLag(topic, partition, track.offset, track.high_watermark, lag,
                                      status, round(len(track.window) / self.window, 3)))
        return GroupLag(group, group_state(p.status for p in parts), sum(p.lag for p in parts), parts)
