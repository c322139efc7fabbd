"""State snapshots in a changelog, so taking over a partition reads the snapshot plus its tail.

A stage with :attr:`~kafeed.stream.Stage.snapshots` writes, from time to time and in
a batch's transaction, its whole state of a partition as ``chunks`` changelog records
followed by one end marker (:func:`snapshot_end`). The records of one transaction
in one partition have consecutive offsets, so the marker at offset ``E`` with
``chunks`` = C says the snapshot starts at ``E - C``. :func:`read_from_snapshot`
reads the changelog partition backwards in growing windows from its end (the first
one as many offsets as the stage expects a snapshot and its tail to span) until it
meets the newest marker, and returns the records from the snapshot's first chunk
on: restart cost follows the state's size plus the tail since the snapshot, not the
history. Compaction shrinks the rest once the stage reuses its keys (it does).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from kafeed.kafka import KafkaClients, TopicReader
from kafeed.stream.topics import REBUILD_HINT

SNAPSHOT_END = b"\x00kafeed.snapshot-end"
_COUNT = struct.Struct(">iI")  # partition, chunk count

Entry = tuple[bytes, bytes | None]


def snapshot_end(partition: int, chunks: int, payload: bytes = b"") -> tuple[bytes, bytes]:
    """The marker record (key, value) that closes a snapshot of ``chunks`` records."""
    return SNAPSHOT_END + struct.pack(">i", partition), _COUNT.pack(partition, chunks) + payload


def parse_snapshot_end(key: bytes, value: bytes | None) -> tuple[int, bytes] | None:
    """(chunk count, payload) when ``key`` is a marker, else None."""
    if not key.startswith(SNAPSHOT_END) or value is None or len(value) < _COUNT.size:
        return None
    return _COUNT.unpack_from(value)[1], value[_COUNT.size:]


def _read_range(reader: TopicReader, topic: str, partition: int, start: int, end: int,
                timeout_s: float) -> list[tuple[int, bytes, bytes | None]]:
    got = reader.read(topic, {partition: (start, end)}, timeout_s=timeout_s, hint=REBUILD_HINT)
    return [(msg.offset(), msg.key(), msg.value()) for msg in got if msg.key() is not None]


def read_from_snapshot(
    clients: KafkaClients, topic: str, partitions: Iterable[int], *, timeout_s: float,
    first_window: int = 256,
) -> tuple[dict[int, list[Entry]], int]:
    """Per partition the records from its newest snapshot on (all of them if none), and how many were read."""
    wanted = sorted(set(partitions))
    entries: dict[int, list[Entry]] = {p: [] for p in wanted}
    if not wanted:
        return entries, 0
    read = 0
    with clients.reader(what="state rebuild") as reader:
        marks = reader.watermarks(topic, wanted, timeout_s=timeout_s)
        for p in wanted:
            low, high = marks[p]
            window, start = first_window, max(low, high - first_window)
            records = _read_range(reader, topic, p, start, high, timeout_s)
            read += len(records)
            while True:
                marker = next(((off, parsed) for off, k, v in reversed(records)
                               if (parsed := parse_snapshot_end(k, v)) is not None), None)
                if marker is not None:
                    offset, (chunks, _) = marker
                    first = offset - chunks
                    if first < start:
                        before = _read_range(reader, topic, p, first, start, timeout_s)
                        read += len(before)
                        records = before + records
                    entries[p] = [(k, v) for off, k, v in records if off >= first]
                    break
                if start <= low:
                    entries[p] = [(k, v) for _, k, v in records]
                    break
                window *= 4
                new_start = max(low, high - window)
                more = _read_range(reader, topic, p, new_start, start, timeout_s)
                read += len(more)
                records = more + records
                start = new_start
    return entries, read
