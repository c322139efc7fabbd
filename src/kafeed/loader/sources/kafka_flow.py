"""A Kafka reader's flow control: which partitions fetch, applied to its consumer.

The read-ahead policy (kafeed.loader.sources.read_ahead, pure) says which partitions to pause and
resume from the reader's counts; :class:`KafkaFlow` applies it: pausing a partition stops
its fetching (and makes librdkafka drop what it had fetched for it), resuming one seeks it
to where its fetching goes on so that librdkafka's fetcher wakes at once. The fetcher
(kafeed.loader.sources.kafka_fetch) asks it after every fetch.
"""

from __future__ import annotations

from typing import Any

from kafeed.loader.sources.partition import Partition
from kafeed.loader.sources.read_ahead import ReadAhead, pausing, refill_after_wake, waking, woken_with


class KafkaFlow:
    """Pausing and resuming the partitions ``parts`` (a reader's, sorted; the list is shared
    and grows as partitions are added) of ``consumer`` under the read-ahead ``ahead``."""

    def __init__(self, consumer: Any, parts: list[Partition], ahead: ReadAhead, cap: int) -> None:
        self._consumer = consumer
        self._parts = parts
        self._ahead = ahead
        self._cap = cap  # queue_records: a partition's queue holds no more

    def live(self) -> list[Partition]:
        """The partitions that fetch from Kafka: a cold one is not assigned, and one fetched
        to its end stays paused."""
        return [p for p in self._parts if not p.fetch_done and p.cold_until is None]

    def resume_short(self, live: list[Partition]) -> bool:
        """Resume the paused partitions the policy wakes; returns whether the queues should be
        refilled to the target at once (kafeed.loader.sources.read_ahead.refill_after_wake)."""
        woken = waking(self._ahead, live, self._cap)
        if not woken:
            return False
        self.pause(woken, False)
        return refill_after_wake(self._ahead, self._cap, len(live))

    def pause_full(self, live: list[Partition]) -> None:
        """Pause the partitions the policy says hold enough."""
        self.pause(pausing(self._ahead, live, self._cap), True)

    def wake(self, part: Partition) -> None:
        """``part`` was found empty and paused at its turn: resume it, and the paused
        partitions whose turn comes soon too (kafeed.loader.sources.read_ahead.woken_with)."""
        paused = [p for p in self._parts if p.paused and not p.fetch_done and p.cold_until is None]
        self.pause(woken_with(part, paused, len(self._parts), self._ahead, self._cap), False)

    def pause(self, parts: list[Partition], pause: bool) -> None:
        """Pause (``pause``) or resume ``parts``."""
        from kafeed.kafka.types import TopicPartition

        if not parts:
            return
        tps = [TopicPartition(part.topic, part.partition) for part in parts]
        if pause:
            self._consumer.pause(tps)
        else:
            self._consumer.resume(tps)
            self._nudge(parts)
        for part in parts:
            part.paused = pause

    def seek_back(self, dropped: list[tuple[Partition, int]]) -> None:
        """Partitions at their cap whose records from ``offset`` on were dropped: paused (if
        not yet) and sought back to ``offset``, where librdkafka fetches from once they are
        resumed. Pausing a partition only filters what librdkafka hands out *after* the call,
        and moves its fetch position past everything handed out before, so without the seek
        the dropped records would be skipped."""
        from kafeed.kafka.types import TopicPartition

        self.pause([part for part, _ in dropped if not part.paused], True)
        for part, offset in dropped:
            self._consumer.seek(TopicPartition(part.topic, part.partition, offset))

    def _nudge(self, resumed: list[Partition]) -> None:
        """Seek ``resumed`` partitions to where their fetching goes on (just past the last
        record fetched of each), which changes nothing but wakes librdkafka's fetcher. A
        resume alone is seen only when that thread next wakes on its own, up to a second
        later; with every partition of a consumer paused, each resume cost 0.2-0.5 s
        (benchmarks/bench_mixture.py: a third of the mixture's time). A partition still
        re-reading in-flight records of a resume is left alone: it fetches from below."""
        from kafeed.kafka.types import TopicPartition

        for part in resumed:
            if not part.restore:
                self._consumer.seek(TopicPartition(part.topic, part.partition, part.queued_to()))
