"""The dedup changelog on Kafka: topic setup and rebuilding a partition's seen-set.

Changelog partition ``p`` holds the hashes first seen in input partition ``p``
(co-partitioned, as in Kafka Streams), so taking over input partition ``p`` means
reading one changelog partition from the start to its end, read_committed.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterable
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafkaOperationError, TopicError, translate_kafka_error
from kafeed.prepare.dedup import parse_changelog_record
from kafeed.prepare.settings import PrepareSettings
from kafeed.topics import TopicAdmin, plan_topic

log = logging.getLogger("kafeed")


def _partitions(admin: TopicAdmin, name: str, timeout_s: float = 15.0) -> int:
    """Partition count of ``name``, waiting a little for a topic that is still being created."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            info = admin.describe(name, sizes=False)
            if info.partitions and all(p.leader is not None and p.leader >= 0 for p in info.partitions):
                return len(info.partitions)
        except TopicError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise TopicError(f"Topic {name!r} has partitions without a leader.",
                             hint="Check the brokers with `kafeed broker status`.")
        time.sleep(0.2)


def ensure_topics(admin: TopicAdmin, settings: PrepareSettings) -> int:
    """Check the input exists, create output / DLQ / changelog when missing; the input's partitions."""
    if not admin.exists(settings.input):
        raise TopicError(f"Input topic {settings.input!r} does not exist.",
                         hint="Create it with `kafeed topic create` or write to it with `kafeed ingest`.")
    partitions = _partitions(admin, settings.input)
    brokers = admin.broker_count()
    wanted = [(settings.output, False), (settings.dlq_topic, False)]
    if settings.dedup.enabled:
        wanted.append((settings.changelog_topic, True))
    for name, compact in wanted:
        if admin.exists(name):
            continue
        if not settings.create_topics:
            raise TopicError(f"Topic {name!r} does not exist.",
                             hint="Create it, or let prepare create it (create_topics = true).")
        if not admin.create(plan_topic(name, brokers=brokers, partitions=partitions, compact=compact,
                                       compression="lz4"), exist_ok=True):
            _partitions(admin, name)  # another worker created it just now: wait until it is visible
    if settings.dedup.enabled:
        have = _partitions(admin, settings.changelog_topic)
        if have < partitions:
            raise TopicError(
                f"Dedup changelog {settings.changelog_topic!r} has {have} partitions but input "
                f"{settings.input!r} has {partitions}.",
                hint="Add partitions to the changelog to match (they must be co-partitioned).")
    return partitions


def rebuild_seen(
    connection: ConnectionSettings, topic: str, partitions: Iterable[int], *, timeout_s: float,
) -> dict[int, set[bytes]]:
    """Every hash in changelog ``topic`` for ``partitions``, read_committed up to the end."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    wanted = sorted(set(partitions))
    seen: dict[int, set[bytes]] = {p: set() for p in wanted}
    if not wanted:
        return seen
    conf: dict[str, Any] = connection.client_config() | {
        "group.id": f"kafeed-dedup-rebuild-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "enable.partition.eof": True,
        "fetch.max.bytes": 52_428_800,
        "logger": logging.getLogger("kafeed.librdkafka"),
    }
    consumer = Consumer(conf)
    try:
        ends: dict[int, int] = {}
        for p in wanted:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high > low:
                ends[p] = high
        if not ends:
            return seen
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + timeout_s
        pending = set(ends)
        while pending:
            if time.monotonic() > deadline:
                raise KafkaOperationError(
                    f"Could not rebuild dedup state from {topic!r} partitions {sorted(pending)} "
                    f"within {timeout_s:.0f}s.",
                    hint="A transaction may still be open there; retry, or raise dedup.rebuild_timeout_s.")
            for msg in consumer.consume(num_messages=10_000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        if msg.offset() >= ends.get(msg.partition(), 0):
                            pending.discard(msg.partition())
                        continue
                    raise translate_kafka_error(
                        err, action=f"read dedup changelog {topic!r}") from None
                key = msg.key()
                if key is None:
                    continue
                try:
                    part, digests = parse_changelog_record(key, msg.value())
                except ValueError as exc:
                    log.warning("skipping a changelog record of %s/%d@%d: %s", topic, msg.partition(),
                                msg.offset(), exc)
                    continue
                seen.setdefault(part, set()).update(digests)
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
    finally:
        consumer.close()
    log.debug("rebuilt dedup state of %s: %s", topic, {p: len(s) for p, s in seen.items()})
    return seen
