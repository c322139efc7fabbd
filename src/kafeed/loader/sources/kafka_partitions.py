"""Which partitions a Kafka reader reads, and where each starts: static or replicated
assignment at open, the group's callbacks in group mode, the saved positions checked against
the logs as they are now (kafeed.loader.state.resume), and the cold tier's start below a log start.

:class:`KafkaPartitions` keeps that bookkeeping for one consumer; the fetcher
(kafeed.loader.sources.kafka_fetch) looks records' partitions up in its ``by_tp``.
"""

from __future__ import annotations

import logging
from typing import Any

from kafeed.loader.nodes.decode import RecordDecoder
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import owned, parse_key, partition_key
from kafeed.loader.sources.cold_tier import ColdTier
from kafeed.loader.sources.offsets import list_partitions, resolve_end, resolve_start, watermarks
from kafeed.loader.sources.partition import Partition
from kafeed.loader.sources.read_ahead import ReadAhead
from kafeed.loader.sources.source import Shards
from kafeed.loader.state.checkpoint import check_positions
from kafeed.loader.state.resume import PartitionStart, check_starts, partition_at

log = logging.getLogger("kafeed")


class KafkaPartitions:
    """The partitions of ``consumer`` that reader ``index`` of ``count`` reads, added to its
    ``shards`` (kafeed.loader.sources.source.Shards)."""

    def __init__(self, settings: LoaderSettings, consumer: Any, shards: Shards, *, index: int,
                 count: int, decoder: RecordDecoder, cold_tier: ColdTier, ahead: ReadAhead) -> None:
        self._settings = settings
        self._consumer = consumer
        self._shards = shards
        self._index = index
        self._count = count
        self._decoder = decoder
        self._cold_tier = cold_tier
        self._ahead = ahead
        self.by_tp: dict[tuple[str, int], Partition] = {}  # the reader's, by (topic, partition)
        self._log_starts: dict[str, int] = {}
        self.assigned = settings.mode != "group"  # a group's partitions come in a callback

    def open(self) -> None:
        """Take this reader's partitions: now (static, replicated) or as the group assigns
        them (``group``), each checked against the state first."""
        settings, consumer = self._settings, self._consumer
        starts = self._shards.starts
        if settings.mode == "group":
            if starts:  # assignments come later, in a callback: check every saved partition now
                self._check_starts(list_partitions(consumer, settings), set(starts))
            consumer.subscribe(list(settings.topics), on_assign=self._on_assign,
                               on_revoke=self._on_revoke, on_lost=self._on_revoke)
            return
        every = list_partitions(consumer, settings)
        if self._cold_tier.tables:
            self._cold_tier.open(consumer)
        mine = owned(every, settings.mode, self._index, self._count)
        self._check_starts(every, {partition_key(t, p) for t, p in mine})
        for topic, p in mine:
            self._add(topic, p)
        self._assign_all()

    def _check_starts(self, every: list[tuple[str, int]], owned: set[str]) -> None:
        """Before anything is fetched: every saved partition exists, every owned one older than
        the state is in it, and the saved positions of the ones this reader resumes lie inside
        their current logs (kafeed.loader.state.resume)."""
        starts = self._shards.starts
        check_starts(starts, every, owned, self._shards.known)
        for key in sorted(owned & set(starts)):
            start = starts[key]
            topic, partition = parse_key(key)
            low, high = watermarks(self._consumer, topic, partition, self._settings)
            self._log_starts[key] = low
            table = self._cold_tier.tables.get(topic)
            if table is not None:
                low = table.floor(key, partition, low, start.next)
            check_positions(key, start.next, start.read, low, high)

    def _add(self, topic: str, partition: int, committed: int | None = None) -> Partition:
        key = partition_key(topic, partition)
        start = self._shards.starts.get(key)
        if start is None:
            if committed is not None and committed >= 0:
                first = committed
                marks = None
            else:
                # one request for the start and the end
                marks = watermarks(self._consumer, topic, partition, self._settings)
                first = resolve_start(self._consumer, topic, partition, self._settings, marks)
                table = self._cold_tier.tables.get(topic)
                if table is not None:
                    first = table.cold_start(key, partition, first, self._log_start(key))
            end = resolve_end(self._consumer, topic, partition, self._settings, marks)
            start = PartitionStart(next=first, read=first, end=end)
        part = partition_at(key, topic, partition, start, self._decoder.for_partition(topic, partition))
        if topic in self._cold_tier.tables and not part.fetch_done and part.seek < self._log_start(key):
            self._cold_tier.begin(part, self._log_start(key))
        self._shards.add(part)
        self.by_tp[(topic, partition)] = part
        return part

    def _assign_all(self) -> None:
        from kafeed.kafka.types import TopicPartition

        tps = [TopicPartition(p.topic, p.partition, p.seek) for p in self._shards.parts
               if not p.fetch_done and p.cold_until is None]
        self._consumer.assign(tps)

    def _log_start(self, key: str) -> int:
        if key not in self._log_starts:
            self._log_starts[key] = watermarks(self._consumer, *parse_key(key), self._settings)[0]
        return self._log_starts[key]

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        committed = {}
        try:
            for tp in consumer.committed(partitions, timeout=10):
                committed[(tp.topic, tp.partition)] = tp.offset
        except Exception as exc:
            log.warning("kafeed loader: could not read committed offsets (%s); using start.", exc)
        for tp in partitions:
            part = self.by_tp.get((tp.topic, tp.partition))
            if part is None:
                part = self._add(tp.topic, tp.partition, committed.get((tp.topic, tp.partition)))
            tp.offset = part.seek
        consumer.assign(partitions)
        self.assigned = True
        log.info("kafeed loader: group %s assigned %s", self._settings.group,
                 ", ".join(f"{tp.topic}:{tp.partition}" for tp in partitions))

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        revoked = [part for tp in partitions if (part := self.by_tp.pop((tp.topic, tp.partition), None))]
        for part in revoked:
            self._ahead.dropped(sum(entry[3] for entry in part.queue))
        self._shards.remove([part.key for part in revoked])
        try:
            consumer.unassign()
        except Exception as exc:
            log.debug("kafeed loader: unassign failed: %s", exc)
