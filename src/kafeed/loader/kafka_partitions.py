"""Which partitions a Kafka reader reads, and where each starts: static or replicated
assignment at open, the group's callbacks in group mode, the saved positions checked against
the logs as they are now (kafeed.loader.resume), and the cold tier's start below a log start.

:class:`KafkaPartitions` is that part of :class:`kafeed.loader.kafka_source.KafkaSource`.
"""

from __future__ import annotations

import logging
from typing import Any

from kafeed.loader.assignment import parse_key, partition_key
from kafeed.loader.cold_tier import ColdTier
from kafeed.loader.decode import RecordDecoder
from kafeed.loader.offsets import resolve_end, resolve_start, watermarks
from kafeed.loader.partition import Partition
from kafeed.loader.read_ahead import ReadAhead
from kafeed.loader.resume import PartitionStart, check_starts, partition_at
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.source import Shards
from kafeed.loader.state import check_positions

log = logging.getLogger("kafeed")


class KafkaPartitions:
    """A Kafka source's partitions (the attributes below are the source's; ``_shards`` is its
    reader's, kafeed.loader.source.Shards)."""

    settings: LoaderSettings
    read_ahead: ReadAhead
    _shards: Shards
    _by_tp: dict[tuple[str, int], Partition]
    _consumer: Any
    _decoder: RecordDecoder
    _cold_tier: ColdTier
    _log_starts: dict[str, int]
    _assigned_once: bool

    def _check_starts(self, every: list[tuple[str, int]], owned: set[str]) -> None:
        """Before anything is fetched: every saved partition exists, every owned one older than
        the state is in it, and the saved positions of the ones this reader resumes lie inside
        their current logs (kafeed.loader.resume)."""
        starts = self._shards.starts
        check_starts(starts, every, owned, self._shards.known)
        for key in sorted(owned & set(starts)):
            start = starts[key]
            topic, partition = parse_key(key)
            low, high = watermarks(self._consumer, topic, partition, self.settings)
            self._log_starts[key] = low
            source = self._cold_tier.sources.get(topic)
            if source is not None:
                low = source.floor(key, partition, low, start.next)
            check_positions(key, start.next, start.read, low, high)


    def _add_partition(self, topic: str, partition: int, committed: int | None = None) -> Partition:
        key = partition_key(topic, partition)
        start = self._shards.starts.get(key)
        if start is None:
            if committed is not None and committed >= 0:
                first = committed
            else:
                first = resolve_start(self._consumer, topic, partition, self.settings)
                source = self._cold_tier.sources.get(topic)
                if source is not None:
                    first = source.cold_start(key, partition, first, self._log_start(key))
            end = resolve_end(self._consumer, topic, partition, self.settings)
            start = PartitionStart(next=first, read=first, end=end)
        part = partition_at(key, topic, partition, start, self._decoder.for_partition(topic, partition))
        if topic in self._cold_tier.sources and not part.fetch_done and part.seek < self._log_start(key):
            self._cold_tier.begin(part, self._log_start(key))
        self._shards.add(part)
        self._by_tp[(topic, partition)] = part
        return part

    def _assign_all(self) -> None:
        from kafeed.kafka.types import TopicPartition

        tps = [TopicPartition(p.topic, p.partition, p.seek) for p in self._shards.parts
               if not p.fetch_done and p.cold_until is None]
        self._consumer.assign(tps)

    def _log_start(self, key: str) -> int:
        if key not in self._log_starts:
            self._log_starts[key] = watermarks(self._consumer, *parse_key(key), self.settings)[0]
        return self._log_starts[key]

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        committed = {}
        try:
            for tp in consumer.committed(partitions, timeout=10):
                committed[(tp.topic, tp.partition)] = tp.offset
        except Exception as exc:
            log.warning("kafeed loader: could not read committed offsets (%s); using start.", exc)
        for tp in partitions:
            part = self._by_tp.get((tp.topic, tp.partition))
            if part is None:
                part = self._add_partition(tp.topic, tp.partition, committed.get((tp.topic, tp.partition)))
            tp.offset = part.seek
        consumer.assign(partitions)
        self._assigned_once = True
        log.info("kafeed loader: group %s assigned %s", self.settings.group,
                 ", ".join(f"{tp.topic}:{tp.partition}" for tp in partitions))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        revoked = [part for tp in partitions if (part := self._by_tp.pop((tp.topic, tp.partition), None))]
        for part in revoked:
            self.read_ahead.dropped(sum(entry[3] for entry in part.queue))
        self._shards.remove([part.key for part in revoked])
        try:
            consumer.unassign()
        except Exception as exc:
            log.debug("kafeed loader: unassign failed: %s", exc)

