"""One reader over a :class:`kafeed.loader.source.Source` read by position: local files.

Shards (files) are dealt round-robin to readers by number (kafeed.loader.assignment), so
which reader reads which file depends only on the file list and the reader count. A
reader takes its shards one after the other, in order, each from its first record to its
end, a chunk (a row group) at a time; records are handed out from the chunk without a
per-record lookup. Its state is a Kafka reader's (kafeed.loader.state): per shard, under
``"<source name>:<shard>"``, the next position, the first one not yet taken, the end and
what was delivered beyond the next; ``rr`` is the shard being read.
"""

from __future__ import annotations

import threading
from typing import Any

from kafeed.errors import ResumeMismatch
from kafeed.loader.assignment import assign, partition_key, warn_if_idle
from kafeed.loader.parent import ParentWatch
from kafeed.loader.partition import Partition
from kafeed.loader.prefetch import Stopped
from kafeed.loader.reader_state import ReaderState
from kafeed.loader.readers import Item, Ref
from kafeed.loader.record_kinds import KINDS
from kafeed.loader.resume import (
    PartitionStart,
    check_known_partitions,
    check_saved_partitions,
    done_at_open,
)
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.source import Source
from kafeed.loader.state import RECREATED_HINT, check_positions


class PositionReader(ReaderState):
    """Reader ``index`` of ``count`` of ``source``. Resume it with :meth:`load_state_dict`
    (exact) or :meth:`load_plan` (elastic) before :meth:`open`."""

    def __init__(self, settings: LoaderSettings, source: Source, *, index: int, count: int,
                 parent: ParentWatch | None = None) -> None:
        self.settings = settings
        self.source = source
        self.index = index
        self.count = count
        self.known: dict[str, int] = {}
        self.parts: list[Partition] = []
        self._by_key: dict[str, Partition] = {}
        self._starts: dict[str, PartitionStart] = {}
        self._restored: dict[Ref, Any] = {}
        self.rr = 0
        self.stats = {"records": 0, "bad": 0, "tokens": 0}
        self._count = KINDS[settings.kind].count
        self._parent = parent
        self._stop: threading.Event | None = None
        self._open_done = False
        self._handed = 0  # records delivered since the last drain
        # The chunk being handed out: its shard, first position, payloads and the next index.
        self._part: Any = None  # a Partition once a chunk was read
        self._first = 0
        self._payloads: list[Any] = []
        self._i = 0

    # -- lifecycle -------------------------------------------------------------------------
    def open(self) -> None:
        name = self.source.name
        every = [(name, shard) for shard in self.source.open()]
        self._open_done = True
        if self.settings.mode == "replicated":
            owned = every
        else:
            warn_if_idle(len(every), self.count)
            owned = assign(every, self.index, self.count)
        check_saved_partitions(self._starts, every)
        check_known_partitions(self._starts, {partition_key(*tp) for tp in owned}, self.known)
        for topic, shard in owned:
            key = partition_key(topic, shard)
            first, end = self.source.extent(shard)
            start = self._starts.get(key)
            if start is None:
                start = PartitionStart(next=first, read=first, end=end)
            elif start.end != end:
                raise ResumeMismatch(f"The saved loader state has {start.end} rows for shard {key}, "
                                     f"which now has {end}: the files changed.", hint=RECREATED_HINT)
            check_positions(key, start.next, start.read, first, end)
            part = Partition(key=key, topic=topic, partition=shard, read=start.read, end=end,
                             delivered=set(start.delivered), partial=dict(start.partial),
                             restore=set(start.restore), in_flight=set(start.restore), seek=start.next)
            part.fetch_done = done_at_open(start) or start.read >= end
            self.parts.append(part)
            self._by_key[key] = part
        self._restore()

    def close(self) -> None:
        self.source.close()
        self._payloads = []

    def stop_on(self, stop: threading.Event) -> None:
        """Reading raises :class:`kafeed.loader.prefetch.Stopped` once ``stop`` is set."""
        self._stop = stop

    def _restore(self) -> None:
        """Re-read the in-flight records of an exact resume (shuffle buffer, packer carry)."""
        for part in self.parts:
            wanted = sorted(part.restore)
            at = 0
            while at < len(wanted):
                chunk = self.source.read(part.partition, wanted[at], wanted[-1] + 1 - wanted[at])
                if not chunk.payloads:
                    break
                while at < len(wanted) and wanted[at] < chunk.stop:
                    self._restored[(part.key, wanted[at])] = chunk.payloads[wanted[at] - chunk.first]
                    at += 1
            part.restore.clear()

    # -- taking records --------------------------------------------------------------------
    @property
    def exhausted(self) -> bool:
        return self._open_done and self._i >= len(self._payloads) and all(p.fetch_done for p in self.parts)

    def check_decoded(self) -> None:
        """Files are checked when their columns are read (kafeed.loader.file_source)."""

    def take(self, wait: float | None = None) -> Item | None:
        """The next record in order; ``None`` when every shard was read to its end."""
        while True:
            i = self._i
            if i < len(self._payloads):
                self._i = i + 1
                part = self._part
                pos = self._first + i
                part.read = pos + 1
                if pos in part.delivered:
                    continue
                payload = self._payloads[i]
                if payload is None:
                    self.stats["bad"] += 1
                    part.delivered.add(pos)
                    continue
                part.in_flight.add(pos)
                self.stats["records"] += 1
                self.stats["tokens"] += self._count(payload)
                return (part.key, pos), payload, part.partial.pop(pos, 0) if part.partial else 0
            if not self._next_chunk():
                self.rr = 0  # canonical at the end, as a Kafka reader's
                return None

    def _next_chunk(self) -> bool:
        if self._parent is not None:
            self._parent.check()
        if self._stop is not None and self._stop.is_set():
            raise Stopped(f"reader {self.index} was stopped")
        for rr, part in enumerate(self.parts):
            if part.fetch_done:
                continue
            chunk = self.source.read(part.partition, part.read, self.settings.queue_records)
            if chunk.stop >= (part.end or 0) or not chunk.payloads:
                part.fetch_done = True
            self._part, self._first, self._payloads = part, chunk.first, chunk.payloads
            self._i, self.rr = 0, rr
            if chunk.payloads:
                return True
        self._payloads = []
        return False

    def delivered(self, ref: Ref, *, handed_out: bool = True) -> None:
        """Mark a taken record as delivered (see KafkaReader.delivered)."""
        part = self._by_key[ref[0]]
        part.in_flight.discard(ref[1])
        part.delivered.add(ref[1])
        if handed_out:
            self._handed += 1
        if len(part.delivered) > 4096 + 4 * len(part.in_flight):
            part.prune()

    def drain_delivered(self) -> tuple[dict[str, int], list[int]]:
        """Records delivered since the last drain (files carry no timestamps)."""
        handed, self._handed = self._handed, 0
        return ({self.source.name: handed} if handed else {}), []

    def _opened(self) -> bool:
        return self._open_done
