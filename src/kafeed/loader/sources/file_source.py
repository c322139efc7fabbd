"""Local Parquet or Arrow files as a source (kafeed.loader.sources.source): shard ``i`` is the
``i``-th file (kafeed.loader.sources.file_rows reads them), a record's position is its row.

Shards (files) are dealt round-robin to readers by number (kafeed.loader.sources.assignment), so
which reader reads which file depends only on the file list and the reader count. A reader
takes its files in turn, each from its first row to its end, a chunk (a row group) at a
time: one file is open at a time. The state is a Kafka reader's (kafeed.loader.state.checkpoint), a
shard per ``"<source name>:<file number>"`` key, the row as offset, and refuses files whose
row counts changed.
"""

from __future__ import annotations

import math
import threading
from itertools import repeat
from operator import itemgetter

from kafeed.errors import ResumeMismatch
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import owned, partition_key
from kafeed.loader.sources.file_rows import FileRows
from kafeed.loader.sources.partition import Partition
from kafeed.loader.sources.source import Shards
from kafeed.loader.state.checkpoint import RECREATED_HINT, check_positions
from kafeed.loader.state.resume import PartitionStart, check_starts, partition_at
from kafeed.loader.workers.parent import ParentWatch
from kafeed.loader.workers.prefetch import check_running

NO_TIMESTAMP = -1  # a row has no broker timestamp: no latency is reported for it
# A queued row's payload, decoded with its chunk (None: of another record kind).
_payload = itemgetter(1)


class FileSource:
    """The files of ``settings.files`` for reader ``index`` of ``count``, named
    ``settings.topics[0]`` (the source's name in the state and the metrics)."""

    interleaved = False
    check_s = math.inf

    def __init__(self, settings: LoaderSettings, *, index: int, count: int,
                 parent: ParentWatch | None = None) -> None:
        self.settings = settings
        self.name = settings.topics[0]
        self.index = index
        self.count = count
        self.assigned = True
        self.opened = False
        self._rows = FileRows(settings)
        self._parent = parent
        self._stop: threading.Event | None = None

    def open(self, shards: Shards) -> None:
        every = [(self.name, shard) for shard in self._rows.open()]
        self.opened = True
        mine = owned(every, self.settings.mode, self.index, self.count)
        check_starts(shards.starts, every, {partition_key(*tp) for tp in mine}, shards.known)
        for name, shard in mine:
            key = partition_key(name, shard)
            end = self._rows.rows(shard)
            start = shards.starts.get(key)
            if start is None:
                start = PartitionStart(next=0, read=0, end=end)
            elif start.end != end:
                raise ResumeMismatch(f"The saved loader state has {start.end} rows for shard {key} "
                                     f"({self._rows.paths[shard]}), which now has {end}: the file "
                                     "changed.", hint=RECREATED_HINT)
            check_positions(key, start.next, start.read, 0, end)
            part = partition_at(key, name, shard, start, _payload)
            part.fetch_done = part.fetch_done or start.read >= end
            self._restore(shards, part)
            shards.add(part)

    def _restore(self, shards: Shards, part: Partition) -> None:
        """Re-read the in-flight records of an exact resume (shuffle buffer, packer carry)."""
        wanted = sorted(part.restore)
        at = 0
        while at < len(wanted):
            first = wanted[at]
            payloads = self._rows.read(part.partition, first, wanted[-1] + 1 - first)
            if not payloads:
                break
            while at < len(wanted) and wanted[at] < first + len(payloads):
                shards.restore((part.key, wanted[at]), payloads[wanted[at] - first])
                part.stamps[wanted[at]] = NO_TIMESTAMP
                at += 1
        part.restore.clear()

    def fill(self, wait: float, turn: Partition | None = None) -> int:
        """Queue ``turn``'s next chunk of rows (its row group's rest, at most ``queue_records``)."""
        check_running(self._parent, self._stop, self.index)
        if turn is None or turn.fetch_done:
            return 0
        first = turn.read if not turn.queue else turn.queue[-1][0] + 1
        payloads = self._rows.read(turn.partition, first, self.settings.queue_records)
        if not payloads or first + len(payloads) >= (turn.end or 0):
            turn.fetch_done = True
        # The entries made by zip, in C: a generator's frame per row cost 0.1 ns per token.
        turn.queue.extend(zip(range(first, first + len(payloads)), payloads, repeat(NO_TIMESTAMP),
                              repeat(0), repeat(None)))
        return len(payloads)

    def wake(self, part: Partition) -> None:
        """Files are never paused."""

    def taken(self, nbytes: int) -> None:
        """Files hold no read-ahead to account for."""

    def top_up(self, now: float) -> None:
        """Never due (``check_s`` is infinite)."""

    def check_decoded(self) -> None:
        """Files are checked when their columns are read (kafeed.loader.sources.file_rows)."""

    def stop_on(self, stop: threading.Event) -> None:
        self._stop = stop

    def close(self) -> None:
        self._rows.close()
