"""How far a reader reads ahead: a depth in bytes that follows the consumption rate.

A reader keeps records fetched from Kafka in two places: librdkafka's queue (filled by its
fetcher thread) and the reader's partition queues (counted exactly here). One setting,
``read_ahead_bytes``, bounds both:

- librdkafka gets a quarter (:attr:`Budget.client`) as its fetch sizes: what can arrive
  between two looks at the queues. Its own cap, ``queued.max.messages.kbytes``, is set too
  but does not hold for assigned partitions (measured: it fetched a whole 46 MB topic
  with a 1 MB cap), so the reader pauses partitions instead, which stops their fetching
  and makes librdkafka drop what it had fetched for them;
- the partition queues get a *target* between :attr:`Budget.floor` and
  :attr:`Budget.ceiling` (the rest): ``lead_s`` seconds of the measured consumption rate.
  The reader lets librdkafka fetch only while its queues are at most half the target,
  refilling them to the target at once, and pauses every partition above that.

A reader starts at the ceiling (until measured, its consumer may be fast). A fast trainer
keeps it: its rate, or the boost each wait for a paused partition gives, holds the
target up. A slow one's target falls to ``lead_s`` of its rate, at least the floor, within
seconds (the boost halves every ``half_life``), and it then holds about that plus one fetch.

:func:`depth` and :func:`next_rate` are the policy, pure; :class:`ReadAhead` applies it
to the counts the reader keeps.

Which partitions fetch follows from those counts (:func:`waking`, :func:`pausing`,
:func:`woken_with`, :func:`pull_size`). Pausing a partition stops its fetching and makes
librdkafka drop what it had fetched for it; librdkafka's own queue cap does not hold for
assigned partitions, and a partition left running while the caller is away (a training
step) fetches without limit. Records are taken from the partitions in turn, so each should
hold its *share* of the target. At half the target or below, the paused partitions are
resumed and the queues refilled to the target at once (up to ``REFILL_S``), or until every
partition is paused at its cap; a reader whose caps hold no more than half the target (few
partitions, a fast caller) is only resumed, and its takes' top-ups bring the records in as
they come, each partition paused at its cap. Above half, partitions that hold more than
half their share are paused, and the others keep fetching, even above the target:
resuming a partition takes librdkafka a fetch round, which a partition found empty at its
turn makes the caller wait for, and pausing one drops what librdkafka had fetched for it.
(Pausing every partition with records above the target made a reader of 24 partitions
under a 32 MiB bound fetch its short partitions 16 records per fetch round, 0.5 s each.)

This module knows nothing of Kafka: the reader (kafeed.loader.nodes.reader) asks it and applies
the answers to its consumer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Sized
from dataclasses import dataclass
from typing import Protocol, TypeVar

MIB = 1024 * 1024
MIN_READ_AHEAD = 4 * MIB  # librdkafka's quarter must hold one fetch of a 1 MiB record
LEAD_S = 2.0  # seconds of consumption kept ready
HALF_LIFE_S = 1.0  # the rate estimate forgets half of its past every second
FETCH_QUEUE_BACKOFF_MS = 20  # about how often a reader moves records out of librdkafka's queue
CHECK_S = 0.02  # how often taking records looks at the queues (rate, top-up, pause)
REFILL_S = 0.05  # the longest a refill after resuming waits for its records
BOUNDED_FETCH_WAIT_MS = 10  # the longest the broker holds a bounded reader's fetch for data


@dataclass(frozen=True)
class Budget:
    """``read_ahead_bytes`` split between librdkafka's queue and the partition queues."""

    total: int

    @property
    def client(self) -> int:
        """librdkafka's share: its fetch sizes (and ``queued.max.messages.kbytes``)."""
        return self.total // 4

    @property
    def ceiling(self) -> int:
        """The partition queues' hard cap."""
        return self.total - self.client

    @property
    def floor(self) -> int:
        """The smallest target: what a consumer that takes almost nothing still keeps ready."""
        return self.total // 16

    def client_config(self) -> dict[str, int]:
        """librdkafka properties sized from :attr:`client`."""
        share = self.client
        return {"queued.max.messages.kbytes": share // 1024,
                "fetch.max.bytes": min(32 * MIB, share),
                # A fetch response holds its partitions one after the other, and the reader
                # takes them in turn: at 8 MiB a partition, the first record of a reader's
                # fourth partition came after 24 MB of the others, and the first batch waited
                # for them (16,000 records where it needed 2,000).
                "max.partition.fetch.bytes": min(2 * MIB, share),
                # Once its queue passed the cap, librdkafka waits this long before it fetches
                # those partitions again (default 1 s), even when the reader empties the queue
                # a few ms later; the reader bounds memory by pausing, so a short wait does.
                # At the default, one reader of 24 partitions on three brokers stalled
                # 0.4-0.9 s three or four times per 120 MB (benchmarks/bench_scaleout.py).
                "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS}


def next_rate(rate: float, nbytes: int, elapsed: float, half_life: float = HALF_LIFE_S) -> float:
    """The consumption rate (bytes/s) after ``nbytes`` were taken in ``elapsed`` seconds: an
    exponential average in time, so a burst of calls counts as much as its duration."""
    if elapsed <= 0:
        return rate
    weight = 1.0 - math.exp(-elapsed * math.log(2) / half_life)
    return rate + weight * (nbytes / elapsed - rate)


def depth(rate: float, budget: Budget, lead_s: float = LEAD_S, boost: float = 0.0) -> int:
    """The partition queues' target: ``lead_s`` seconds at ``rate``, or ``boost`` if more,
    within floor .. ceiling."""
    wanted = max(rate * lead_s, boost)
    if not wanted > budget.floor:  # NaN-safe: anything odd means the floor
        return budget.floor
    return budget.ceiling if wanted >= budget.ceiling else int(wanted)


def decay(boost: float, elapsed: float, half_life: float = HALF_LIFE_S) -> float:
    """``boost`` after ``elapsed`` seconds: halved every ``half_life``."""
    return boost * math.pow(0.5, max(elapsed, 0.0) / half_life)


def pull_count(room: int, record_bytes: float, most: int, first: int = 16) -> int:
    """Records to take from librdkafka in one ``consume()``: about ``room`` bytes of records
    of ``record_bytes`` each, within 1 .. ``most``; ``first`` before any record was seen.
    librdkafka may hold far more than the room, and one call must not bring it all. With no
    room left (the queues at the target, a partition empty at its turn) it is one record:
    a floor of 16 there let each such call add 16 records above the target, and a slow
    caller's queues passed the ceiling plus librdkafka's share (4.27 MB under a 4 MiB bound)."""
    if not record_bytes > 0:
        return min(first, most)
    wanted = room / record_bytes
    return most if wanted >= most else max(1, int(wanted))


class ReadAhead:
    """The reader's byte counts and the target they are held to.

    The reader calls :meth:`added` / :meth:`taken` as records enter and leave its partition
    queues, :meth:`starved` when the caller had to wait for a partition it had paused, and
    :meth:`tick` now and then (it reads the clock); :attr:`want_more` says whether to top
    up from librdkafka, :attr:`low` whether its fetcher may run.

    The rate alone cannot raise the target: a consumer held back by a small read-ahead
    takes little, so its measured rate stays low. Hence a boost, which starts at the
    ceiling (until measured, a consumer may be fast), doubles each time the caller was
    starved, and halves every ``half_life``; the target is the larger of the two."""

    def __init__(self, total: int, *, lead_s: float = LEAD_S, half_life: float = HALF_LIFE_S) -> None:
        self.budget = Budget(total)
        self.lead_s = lead_s
        self.half_life = half_life
        self.held = 0  # bytes in the partition queues
        self.records = 0  # records ever queued
        self.volume = 0  # their bytes
        self.peak = 0  # the most they held
        self.rate = 0.0
        self.boost = float(self.budget.ceiling)
        self.target = self.budget.ceiling
        self._taken = 0  # bytes taken since the last tick
        self._last: float | None = None

    def added(self, nbytes: int, records: int = 1) -> None:
        """``records`` records of ``nbytes`` bytes in all were queued."""
        self.held += nbytes
        self.records += records
        self.volume += nbytes
        if self.held > self.peak:
            self.peak = self.held

    def taken(self, nbytes: int) -> None:
        self.held -= nbytes
        self._taken += nbytes

    def dropped(self, nbytes: int) -> None:
        """Queued bytes let go without being taken (a partition revoked)."""
        self.held -= nbytes

    def starved(self) -> None:
        """The caller waited for records a pause held back: read further ahead."""
        self.boost = min(float(self.budget.ceiling), 2.0 * max(self.boost, self.target))
        self.target = depth(self.rate, self.budget, self.lead_s, self.boost)

    def tick(self, now: float) -> None:
        """Fold the bytes taken since the last tick into the rate and move the target."""
        if self._last is None:
            self._last = now
            self._taken = 0
            return
        elapsed = now - self._last
        if elapsed <= 0:
            return
        self.rate = next_rate(self.rate, self._taken, elapsed, self.half_life)
        self.boost = decay(self.boost, elapsed, self.half_life)
        self.target = depth(self.rate, self.budget, self.lead_s, self.boost)
        self._last = now
        self._taken = 0

    @property
    def mean(self) -> float:
        """The mean size of the records queued so far (0 before any)."""
        return self.volume / self.records if self.records else 0.0

    def share(self, partitions: int) -> int:
        """Records each of ``partitions`` partitions taken in turn holds at the target (0 before
        any record was seen)."""
        mean = self.mean
        if partitions <= 0 or not mean > 0:
            return 0
        return int(self.target / mean / partitions)

    def held_by_caps(self, cap: int, partitions: int) -> bool:
        """Whether ``partitions`` queues of ``cap`` records each (at the mean size) hold no more
        than half the target: such a reader never leaves the refill half of the target, and
        its caps, not the target, pause its partitions (False before any record was seen)."""
        return 0 < cap * partitions * self.mean <= self.target // 2

    def pull(self, most: int) -> int:
        """How many records the next ``consume()`` may bring (:func:`pull_count`)."""
        return pull_count(self.target - self.held, self.mean, most)

    @property
    def starting(self) -> bool:
        """Before the queues took in the floor's worth of records: the first batch is still
        being made, and a fetch moves only what it needs (kafeed.loader.sources.kafka_fetch)."""
        return self.volume < self.budget.floor

    @property
    def want_more(self) -> bool:
        return self.held < self.target

    @property
    def low(self) -> bool:
        """At most half the target: let librdkafka fetch (refill); above, pause it."""
        return self.held <= self.target // 2


class Lane(Protocol):
    """A partition as the policy sees it: its queue of records, and whether it is paused."""

    @property
    def queue(self) -> Sized: ...
    @property
    def paused(self) -> bool: ...


L = TypeVar("L", bound=Lane)


def short(ahead: ReadAhead, partitions: int, cap: int) -> int:
    """The records below which a partition is short: half its share of the target, and at
    most half of ``cap`` (``queue_records``), the cap at which a partition is paused whatever
    the bytes (without it, many small records resumed a partition at its cap at once)."""
    return min(ahead.share(partitions), cap) // 2


def waking(ahead: ReadAhead, live: Sequence[L], cap: int) -> list[L]:
    """The fetching partitions ``live`` to resume: at half the target or below, the paused
    ones that are short."""
    if not ahead.low:
        return []
    below = short(ahead, len(live), cap)
    return [p for p in live if p.paused and len(p.queue) <= below]


def refill_after_wake(ahead: ReadAhead, cap: int, partitions: int) -> bool:
    """Whether resumed partitions are refilled to the target at once: not when their caps
    keep them below half the target anyway (they stay resumed after any refill, so waiting
    for the fetch would only idle the caller meanwhile)."""
    return not ahead.held_by_caps(cap, partitions)


def pausing(ahead: ReadAhead, live: Sequence[L], cap: int) -> list[L]:
    """The running partitions ``live`` to pause: above half the target, those holding more
    than half their share."""
    if ahead.low:
        return []
    above = short(ahead, len(live), cap)
    return [p for p in live if len(p.queue) > above and not p.paused]


def woken_with(part: L, paused: Sequence[L], partitions: int, ahead: ReadAhead, cap: int) -> list[L]:
    """``part`` was found empty and paused at its turn: resume it, and with it every one of
    ``paused`` (of ``partitions`` in all) at half its share or less, whose turn comes soon
    too, so that one fetch round serves them all."""
    below = short(ahead, partitions, cap)
    return [p for p in paused if p is part or len(p.queue) <= below]


def pull_size(ahead: ReadAhead, fetching: Sequence[Lane], most: int, cap: int) -> int:
    """Records the next ``consume()`` may bring: what the target leaves room for
    (:meth:`ReadAhead.pull`, at most ``most``), and no more than the least room below
    ``cap`` among the partitions ``fetching`` (one call may bring a single partition's
    records only, and records past its cap would be dropped and fetched again)."""
    room = min((cap - len(p.queue) for p in fetching), default=cap)
    return max(1, min(ahead.pull(most), room))
