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
import time
import uuid
from collections.abc import Iterable

from kafeed.config import ConnectionSettings
from kafeed.errors import KafkaOperationError, translate_kafka_error
from kafeed.kafka import read_committed_consumer

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


def _read_range(consumer: object, topic: str, partition: int, start: int, end: int,
                deadline: float) -> list[tuple[int, bytes, bytes | None]]:
    from confluent_kafka import KafkaError, TopicPartition

    out: list[tuple[int, bytes, bytes | None]] = []
    if start >= end:
        return out
    consumer.assign([TopicPartition(topic, partition, start)])  # type: ignore[attr-defined]
    while True:
        if time.monotonic() > deadline:
            raise KafkaOperationError(
                f"Could not read state changelog {topic!r} partition {partition} in time.",
                hint="A transaction may still be open there; retry, or raise the rebuild timeout "
                "(prepare: dedup.rebuild_timeout_s).")
        for msg in consumer.consume(num_messages=10_000, timeout=0.5):  # type: ignore[attr-defined]
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= end:
                        return out
                    continue
                raise translate_kafka_error(err, action=f"read state changelog {topic!r}") from None
            if msg.offset() >= end:
                return out
            key = msg.key()
            if key is not None:
                out.append((msg.offset(), key, msg.value()))
            if msg.offset() + 1 >= end:
                return out


def read_from_snapshot(
    connection: ConnectionSettings, topic: str, partitions: Iterable[int], *, timeout_s: float,
    first_window: int = 256,
) -> tuple[dict[int, list[Entry]], int]:
    """Per partition the records from its newest snapshot on (all of them if none), and how many were read."""
    from confluent_kafka import TopicPartition

    wanted = sorted(set(partitions))
    entries: dict[int, list[Entry]] = {p: [] for p in wanted}
    if not wanted:
        return entries, 0
    consumer = read_committed_consumer(connection, {
        "group.id": f"kafeed-state-rebuild-{uuid.uuid4().hex[:8]}",
        "enable.partition.eof": True,
        "fetch.max.bytes": 52_428_800,
    })
    read = 0
    deadline = time.monotonic() + timeout_s
    try:
        for p in wanted:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            window, start = first_window, max(low, high - first_window)
            records = _read_range(consumer, topic, p, start, high, deadline)
            read += len(records)
            while True:
                marker = next(((off, parsed) for off, k, v in reversed(records)
                               if (parsed := parse_snapshot_end(k, v)) is not None), None)
                if marker is not None:
                    offset, (chunks, _) = marker
                    first = offset - chunks
                    if first < start:
                        before = _read_range(consumer, topic, p, first, start, deadline)
                        read += len(before)
                        records = before + records
                    entries[p] = [(k, v) for off, k, v in records if off >= first]
                    break
                if start <= low:
                    entries[p] = [(k, v) for _, k, v in records]
                    break
                window *= 4
                new_start = max(low, high - window)
                more = _read_range(consumer, topic, p, new_start, start, deadline)
                read += len(more)
                records = more + records
                start = new_start
    finally:
        consumer.close()
    return entries, read
