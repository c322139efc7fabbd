"""A reader's cold tier: partitions read from their topic's archive table below the log start.

With ``archive=``, a partition whose position lies below its log start offset begins
*cold*: it is not assigned to the consumer, and :meth:`ColdTier.fetch` fills its queue
from the topic's Iceberg table (kafeed.loader.sources.archive_table) up to the log start; then
the partition is assigned to the consumer at that offset. Should retention overtake a
partition being read from Kafka, :meth:`ColdTier.overtaken` takes it back to the table
from where it stood. The records come in offset order either way, so the reader's order,
and its state, do not depend on the tier.

A partition's queue holds one tier's records at a time, and the partition decodes them as that
tier's (:attr:`kafeed.loader.sources.partition.Partition.decode`): a cold partition is assigned to the
consumer once its queue of table records is empty, and a partition overtaken by retention is
read from the table once its queue of Kafka records is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from kafeed.loader.nodes.decode import RecordDecoder
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.archive_table import ArchiveTable, RawRow
from kafeed.loader.sources.offsets import watermarks, with_retry
from kafeed.loader.sources.partition import Entry, Partition

log = logging.getLogger("kafeed")

# Offsets per partition read from an archive table at once: every scan reads whole data files
# (or row groups), so small ranges would read the same file again and again.
COLD_CHUNK = 65536


class ColdTier:
    """The archive tables of one reader's topics (``tables``) and its cold partitions."""

    def __init__(self, settings: LoaderSettings, decoder: RecordDecoder) -> None:
        self.settings = settings
        self._decoder = decoder
        self.tables = {topic: ArchiveTable(settings, topic, table)
                        for topic, table in settings.archive_tables().items()}
        self.parts: list[Partition] = []
        self._decodes: dict[str, Callable[[Entry], Any]] = {}  # partition key -> its table records' decode

    def open(self, consumer: Any) -> None:
        """Open the tables, checking they archive this cluster."""
        cluster_id = with_retry(lambda: consumer.list_topics(timeout=10).cluster_id,
                                action="read the cluster id", settings=self.settings)
        for table in self.tables.values():
            table.open(str(cluster_id))

    def begin(self, part: Partition, log_start: int) -> None:
        """Read ``part`` (its queue empty) from its table from its seek position up to ``log_start``."""
        part.cold_until, part.cold_pos = log_start, part.seek
        part.decode = self._cold_decode(part)
        self.parts.append(part)

    def _cold_decode(self, part: Partition) -> Callable[[Entry], Any]:
        """How ``part``'s table records decode (one function per partition: whether its queue
        holds table records is whether its decode is this one)."""
        if part.key not in self._decodes:
            self._decodes[part.key] = partial(self.decode, part.topic)
        return self._decodes[part.key]

    def decode(self, topic: str, entry: Entry) -> Any:
        """A table record's payload: decoded from its columns already, or from its bytes (a row
        the archive kept raw, or of another tokenizer) as a Kafka record's."""
        offset, payload, stamp, _nbytes, raw = entry
        if raw is not None:
            row: RawRow = raw
            return self._decoder.decode(topic, row.partition, (offset, row.value(), stamp, 0, row.key()))
        self._decoder.accept_cold(topic)
        return payload

    def fetch(self, by_tp: dict[tuple[str, int], Partition], consumer: Any,
              restore: Callable[[Partition, Entry, Callable[[Entry], Any]], None]) -> int:
        """Fill the queues of cold partitions from their archive tables (one scan per table);
        returns how many records were queued or restored (``restore(part, record, decode)``:
        an in-flight record of an exact resume, re-read). A partition read to its boundary
        goes on to Kafka once its queue is empty."""
        queued = 0
        limit = self.settings.queue_records
        for part in [p for p in self.parts if not p.queue]:
            if part.cold_until is not None and part.cold_pos >= part.cold_until:
                self._warm(part, consumer)
            else:
                part.decode = self._cold_decode(part)  # an overtaken partition's Kafka records are all taken
        wanted: dict[str, dict[int, tuple[int, int]]] = {}
        for part in self.parts:
            if (len(part.queue) < limit and part.cold_until is not None and part.cold_pos < part.cold_until
                    and part.decode is self._cold_decode(part)):
                stop = min(part.cold_until, part.cold_pos + max(limit, COLD_CHUNK))
                if part.end is not None:
                    stop = min(stop, part.end)
                wanted.setdefault(part.topic, {})[part.partition] = (part.cold_pos, stop)
        for topic, ranges in wanted.items():
            for partition, records in self.tables[topic].read(ranges).items():
                part = by_tp[(topic, partition)]
                queued += self._queue(part, records, restore)
                part.cold_pos = stop = ranges[partition][1]
                if part.end is not None and stop >= part.end:
                    part.fetch_done = True
                    part.cold_until = None
                    self.parts.remove(part)
        if not self.parts:
            for table in self.tables.values():
                table.release()
        return queued

    def _queue(self, part: Partition, entries: list[Entry],
               restore: Callable[[Partition, Entry, Callable[[Entry], Any]], None]) -> int:
        queued = 0
        for entry in entries:
            offset = entry[0]
            if offset < part.read:
                if offset in part.restore:
                    restore(part, entry, part.decode)
                    queued += 1
                continue
            part.queue.append(entry)
            queued += 1
        return queued

    def _warm(self, part: Partition, consumer: Any) -> None:
        """A cold partition read up to its boundary: on to Kafka, unless retention moved the
        log start further meanwhile (then the table serves up to the new one)."""
        from kafeed.kafka.types import TopicPartition

        low = watermarks(consumer, part.topic, part.partition, self.settings)[0]
        if low > part.cold_pos:
            self.tables[part.topic].check_reaches(part.key, part.partition, part.cold_pos, low)
            part.cold_until = low
            return
        log.info("kafeed loader: %s read from the archive table up to offset %d; on from Kafka",
                 part.key, part.cold_pos)
        part.cold_until = None
        part.decode = self._decoder.for_partition(part.topic, part.partition)
        self.parts.remove(part)
        consumer.incremental_assign([TopicPartition(part.topic, part.partition, part.cold_pos)])

    def overtaken(self, part: Partition, consumer: Any) -> None:
        """Retention deleted records of ``part`` (an archived topic's) before the consumer
        fetched them: read it from the table again, from where it stood."""
        from kafeed.kafka.types import TopicPartition

        pos = part.queued_to()
        if part.restore:
            pos = min(pos, min(part.restore))
        low = watermarks(consumer, part.topic, part.partition, self.settings)[0]
        self.tables[part.topic].check_reaches(part.key, part.partition, pos, low)
        log.info("kafeed loader: retention overtook %s at offset %d; reading it from the archive "
                 "table up to %d", part.key, pos, low)
        consumer.incremental_unassign([TopicPartition(part.topic, part.partition)])
        if part.paused:
            part.paused = False
        part.cold_until, part.cold_pos = low, pos
        self.parts.append(part)
