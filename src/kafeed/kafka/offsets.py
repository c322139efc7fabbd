"""Partition offsets asked of the cluster, with one behaviour while leadership moves.

Right after a topic is created, a broker restarts or a leader is lost, a ListOffsets
request can come back ``NOT_LEADER_FOR_PARTITION`` (or another transient error) for a
few seconds. :func:`list_offsets` asks again, with backoff, until its deadline, and only
then raises a kafeed error. The drains, the mirror's progress and the trainer's lineage
starts go through it; the monitor's health poll and the trainer's lag gauge ask once and
take what comes back (a poll a few seconds later asks again).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from kafeed.kafka.translate import is_transient, translate_kafka_error

TopicPartitionKey = tuple[str, int]


def list_offsets(admin: Any, partitions: Iterable[TopicPartitionKey], *, latest: bool = True,
                 read_committed: bool = True, timeout: float = 15.0,
                 action: str = "read partition offsets") -> dict[TopicPartitionKey, int]:
    """``{(topic, partition): offset}``: each partition's end (the last stable offset when
    ``read_committed``, else the high watermark), or its log start when not ``latest``.

    A transient error is asked again until ``timeout``; anything else, or a transient
    error past the deadline, raises the translated error (``action`` completes "Could not").
    """
    from kafeed.kafka.types import IsolationLevel, OffsetSpec, TopicPartition

    wanted = list(dict.fromkeys(partitions))
    if not wanted:
        return {}
    spec = OffsetSpec.latest() if latest else OffsetSpec.earliest()
    isolation = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        left = max(0.5, deadline - time.monotonic())
        try:
            futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted},
                                         isolation_level=isolation, request_timeout=left)
            return {(tp.topic, tp.partition): int(f.result(timeout=left).offset)
                    for tp, f in futures.items()}
        except Exception as exc:
            if is_transient(exc) and time.monotonic() + delay < deadline:
                time.sleep(delay)
                delay = min(1.0, delay * 2)
                continue
            raise translate_kafka_error(exc, action=action) from exc
