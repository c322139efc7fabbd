"""The sink's side of the consumer: consumed messages into per-partition buffers, and the
group brought in line after each table commit (seeks where the table moved, offsets mirrored)."""

from __future__ import annotations

import logging
from typing import Any

from kafeed.archive.commit import CommitPlan
from kafeed.archive.rows import RecordBatch, RowMapper
from kafeed.kafka import message_event

log = logging.getLogger("kafeed")


def buffer_messages(msgs: list[Any], buffers: dict[int, RecordBatch], expected: dict[int, int | None],
                    eof: dict[int, bool], *, topic: str, group: str) -> int:
    """Add the records among ``msgs`` to their partition's buffer (partitions in ``expected``
    only) and note which partitions are at their end in ``eof``; the records taken."""
    taken = 0
    for msg in msgs:
        err = msg.error()
        if err is not None:
            if message_event(err, action=f"archive {topic!r} in group {group!r}") == "end":
                if msg.partition() in eof:
                    eof[msg.partition()] = True
                continue
            log.warning("kafeed archive: Kafka error (%s); retrying.", err.str())
            continue
        p = msg.partition()
        if p not in expected:
            continue
        if eof.get(p):
            eof[p] = False
        buffer = buffers.get(p)
        if buffer is None:
            buffer = buffers[p] = RecordBatch(topic)
        buffer.add_message(msg)
        taken += 1
    return taken


def follow_commit(consumer: Any, topic: str, plan: CommitPlan, expected: dict[int, int | None]) -> None:
    """After a table commit: the partitions' expected positions moved, the consumer sought
    where the table moved under it (``plan.resync``), the positions mirrored to the group."""
    from kafeed.kafka.types import OFFSET_BEGINNING, TopicPartition

    for p in plan.keep_from:
        expected[p] = plan.positions[p]
    for p, pos in plan.resync.items():
        if p in expected:
            expected[p] = pos
            try:
                consumer.seek(TopicPartition(topic, p, OFFSET_BEGINNING if pos is None else pos))
            except Exception as exc:
                log.debug("kafeed archive: seek of partition %d failed: %s", p, exc)
    mirror = [TopicPartition(topic, p, pos) for p, pos in plan.positions.items() if p in expected]
    if mirror:
        try:
            consumer.commit(offsets=mirror, asynchronous=True)
        except Exception as exc:  # the mirror is for lag monitoring only
            log.debug("kafeed archive: mirroring offsets to the group failed: %s", exc)


def chunk_rows(mapper: RowMapper, buffers: dict[int, RecordBatch]
               ) -> tuple[Any, dict[int, tuple[int, int]], int]:
    """The buffered records as one chunk: its rows (one table per partition, joined without
    copying, in (partition, offset) order), the offset range per partition and the value
    bytes."""
    import pyarrow as pa

    ranges: dict[int, tuple[int, int]] = {}
    for buffer in buffers.values():
        ranges |= buffer.ranges()
    rows = pa.concat_tables([mapper.rows(buffers[p]) for p in sorted(buffers)])
    return rows, ranges, sum(b.value_bytes for b in buffers.values())
