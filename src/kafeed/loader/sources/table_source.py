"""Archived topics read from their Iceberg tables alone, as a source (kafeed.loader.sources.source).

With ``archive_only=True`` a loader reads each topic from the table ``kafeed archive`` keeps
of it (``archive=``), and never connects to the cluster: training from what was archived,
after the topic expired or without the cluster at hand. A shard is a Kafka partition of a
topic, under the same key and at the same offsets as in Kafka, and its records are handed
out interleaved, as a Kafka reader does: the windows, their shuffle, the sharding over
ranks and workers and the saved state are those of reading the topic from Kafka, as far as
the table goes. Each table is pinned to its snapshot as the reader opens, so a run reads
what was archived by then.

The rows are read as the cold tier reads them (kafeed.loader.sources.archive_table: offset ranges of
every partition in one scan, payloads decoded from the columns, a row kept raw decoded from
its bytes by kafeed.loader.sources.cold_tier).
"""

from __future__ import annotations

import math
import threading
from functools import partial

from kafeed.kafka import KafkaClients
from kafeed.loader.nodes.decode import RecordDecoder
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import owned, partition_key
from kafeed.loader.sources.cold_tier import COLD_CHUNK, ColdTier
from kafeed.loader.sources.partition import Partition
from kafeed.loader.sources.source import Shards
from kafeed.loader.state.checkpoint import check_positions
from kafeed.loader.state.resume import PartitionStart, check_starts, partition_at
from kafeed.loader.workers.parent import ParentWatch
from kafeed.loader.workers.prefetch import check_running


class TableSource:
    """The archive tables of ``settings`` for reader ``index`` of ``count``."""

    interleaved = True
    check_s = math.inf

    def __init__(self, settings: LoaderSettings, *, index: int, count: int,
                 parent: ParentWatch | None = None) -> None:
        self.settings = settings
        self.index = index
        self.count = count
        self.assigned = True
        self.opened = False
        # Bad rows are logged, never dead-lettered (archive_only allows no dlq_topic): the
        # clients make nothing.
        self._decoder = RecordDecoder(settings, KafkaClients(settings.connection))
        self._tier = ColdTier(settings, self._decoder)  # its tables, and how their rows decode
        self._parts: list[Partition] = []
        self._parent = parent
        self._stop: threading.Event | None = None

    def open(self, shards: Shards) -> None:
        tables = self._tier.tables
        every: list[tuple[str, int]] = []
        ends: dict[tuple[str, int], int] = {}
        for topic in sorted(tables):
            tables[topic].open(None)
            for partition, end in sorted(tables[topic].partitions().items()):
                every.append((topic, partition))
                ends[(topic, partition)] = end
        self.opened = True
        mine = owned(every, self.settings.mode, self.index, self.count)
        check_starts(shards.starts, every, {partition_key(*tp) for tp in mine}, shards.known)
        for topic, partition in mine:
            key = partition_key(topic, partition)
            end = ends[(topic, partition)]
            first = tables[topic].low(partition)
            first = end if first is None else first
            start = shards.starts.get(key) or PartitionStart(next=first, read=first, end=end)
            check_positions(key, start.next, start.read, first, end)
            part = partition_at(key, topic, partition, start, partial(self._tier.decode, topic))
            part.cold_pos = start.read  # the next offset to read from the table
            part.fetch_done = part.fetch_done or start.read >= end
            self._restore(shards, part)
            shards.add(part)
            self._parts.append(part)

    def _restore(self, shards: Shards, part: Partition) -> None:
        """Re-read the in-flight records of an exact resume (shuffle buffer, packer carry)."""
        if not part.restore:
            return
        wanted = (min(part.restore), max(part.restore) + 1)
        for entry in self._tier.tables[part.topic].read({part.partition: wanted})[part.partition]:
            if entry[0] in part.restore:
                shards.restore((part.key, entry[0]), part.decode(entry))
                part.stamps[entry[0]] = entry[2]
        part.in_flight &= set(part.stamps)  # a record the table no longer holds is not in flight
        part.restore.clear()

    def fill(self, wait: float, turn: Partition | None = None) -> int:
        """Queue the next rows of every partition below its cap, one scan per table."""
        check_running(self._parent, self._stop, self.index)
        limit = self.settings.queue_records
        wanted: dict[str, dict[int, tuple[int, int]]] = {}
        for part in self._parts:
            if not part.fetch_done and len(part.queue) < limit:
                stop = min(part.end or 0, part.cold_pos + max(limit, COLD_CHUNK))
                wanted.setdefault(part.topic, {})[part.partition] = (part.cold_pos, stop)
        queued = 0
        by_tp = {(p.topic, p.partition): p for p in self._parts}
        for topic, ranges in wanted.items():
            for partition, entries in self._tier.tables[topic].read(ranges).items():
                part = by_tp[(topic, partition)]
                part.queue.extend(entries)
                queued += len(entries)
                part.cold_pos = ranges[partition][1]
                part.fetch_done = part.cold_pos >= (part.end or 0)
        return queued

    def wake(self, part: Partition) -> None:
        """Tables are never paused."""

    def taken(self, nbytes: int) -> None:
        """Tables hold no read-ahead to account for."""

    def top_up(self, now: float) -> None:
        """Never due (``check_s`` is infinite)."""

    def check_decoded(self) -> None:
        self._decoder.check_end()

    def stop_on(self, stop: threading.Event) -> None:
        self._stop = stop

    def close(self) -> None:
        for table in self._tier.tables.values():
            table.release()
        self._decoder.close()
