"""A Kafka reader's flow control: which partitions fetch, applied to its consumer.

The read-ahead policy (kafeed.loader.read_ahead, pure) says which partitions to pause and
resume from the reader's counts; :class:`KafkaFlow` applies it: pausing a partition stops
its fetching (and makes librdkafka drop what it had fetched for it), resuming one seeks it
to where its fetching goes on so that librdkafka's fetcher wakes at once.

:class:`KafkaFlow` is the flow-control part of :class:`kafeed.loader.kafka_source.KafkaSource`,
under its fetching part (kafeed.loader.kafka_fetch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafeed.loader.partition import Partition
from kafeed.loader.read_ahead import REFILL_S, ReadAhead, pausing, refill_after_wake, waking, woken_with
from kafeed.loader.settings import LoaderSettings


class KafkaFlow:
    """Pausing and resuming a Kafka source's partitions (the attributes below are the source's)."""

    settings: LoaderSettings
    parts: list[Partition]
    read_ahead: ReadAhead
    _consumer: Any
    _pull: Callable[[float], tuple[int, bool]]  # one consume() into the queues (KafkaFetch)

    def _hold(self) -> None:
        """Hold the queues near the target: resume, refill and pause partitions as the
        read-ahead policy says (kafeed.loader.read_ahead explains why)."""
        ahead = self.read_ahead
        cap = self.settings.queue_records
        # A cold partition is not assigned; one fetched to its end stays paused.
        live = [p for p in self.parts if not p.fetch_done and p.cold_until is None]
        woken = waking(ahead, live, cap)
        if woken:
            self._pause_many(woken, False)
            if refill_after_wake(ahead, cap, len(live)):
                # Refill to the target at once and pause again: left running until the next
                # take (a whole training step later, maybe), the fetcher would bring in far more.
                deadline = time.monotonic() + min(REFILL_S, self.settings.poll_timeout_s)
                while ahead.want_more:
                    left = deadline - time.monotonic()
                    # Every partition paused (at its cap, below a target in bytes): nothing
                    # more can come, and a pull would wait out the deadline for it.
                    if left <= 0 or all(p.paused for p in live) or not self._pull(left)[0]:
                        break
        self._pause_many(pausing(ahead, live, cap), True)

    def _wake(self, part: Partition) -> None:
        """``part`` was found empty and paused at its turn: resume it, and the paused
        partitions whose turn comes soon too (kafeed.loader.read_ahead.woken_with)."""
        paused = [p for p in self.parts if p.paused and not p.fetch_done and p.cold_until is None]
        self._pause_many(woken_with(part, paused, len(self.parts), self.read_ahead,
                                    self.settings.queue_records), False)

    def _pause(self, part: Partition, pause: bool) -> None:
        self._pause_many([part], pause)

    def _pause_many(self, parts: list[Partition], pause: bool) -> None:
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

