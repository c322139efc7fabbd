"""A stage's topics: check the input, create outputs, dead letters and changelog, read a changelog.

Changelog partition ``p`` holds the state of input partition ``p`` (co-partitioned,
as in Kafka Streams), so taking over input partition ``p`` means reading one
changelog partition from the start to its end, read_committed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from kafeed.errors import TopicError
from kafeed.kafka import KafkaClients
from kafeed.stream.settings import StreamSettings
from kafeed.topics import TopicAdmin, plan_topic

log = logging.getLogger("kafeed")

ChangelogEntries = dict[int, list[tuple[bytes, bytes | None]]]
REBUILD_HINT = ("A transaction may still be open there; retry, or raise the rebuild timeout "
                "(prepare: dedup.rebuild_timeout_s).")


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


def ensure_topics(admin: TopicAdmin, settings: StreamSettings) -> int:
    """Check the inputs exist, create outputs / DLQ / changelog when missing (with as many
    partitions as the largest input); the largest input's partition count."""
    for name in settings.inputs:
        if not admin.exists(name):
            raise TopicError(f"Input topic {name!r} does not exist.",
                             hint="Create it with `kafeed topic create` or write to it with `kafeed ingest`.")
    partitions = max(_partitions(admin, name) for name in settings.inputs)
    brokers = admin.broker_count()
    wanted = [(name, False) for name in (*settings.outputs, settings.dlq_topic)]
    if settings.changelog_topic is not None:
        wanted.append((settings.changelog_topic, True))
    for name, compact in wanted:
        if admin.exists(name):
            continue
        if not settings.create_topics:
            raise TopicError(f"Topic {name!r} does not exist.",
                             hint="Create it, or let the stage create it (create_topics = true).")
        if not admin.create(plan_topic(name, brokers=brokers, partitions=partitions, compact=compact,
                                       compression="lz4"), exist_ok=True):
            _partitions(admin, name)  # another worker created it just now: wait until it is visible
    if settings.changelog_topic is not None:
        have = _partitions(admin, settings.changelog_topic)
        if have < partitions:
            raise TopicError(
                f"State changelog {settings.changelog_topic!r} has {have} partitions but input "
                f"{settings.inputs[0]!r} has {partitions}.",
                hint="Add partitions to the changelog to match (they must be co-partitioned).")
    return partitions


def read_changelog(
    clients: KafkaClients, topic: str, partitions: Iterable[int], *, timeout_s: float,
) -> ChangelogEntries:
    """Every (key, value) in changelog ``topic`` for ``partitions``, read_committed up to the end."""
    wanted = sorted(set(partitions))
    entries: ChangelogEntries = {p: [] for p in wanted}
    if not wanted:
        return entries
    for msg in clients.read_to_end(topic, wanted, timeout_s=timeout_s, hint=REBUILD_HINT):
        key = msg.key()
        if key is not None:
            entries[msg.partition()].append((key, msg.value()))
    log.debug("read changelog %s: %s", topic, {p: len(e) for p, e in entries.items()})
    return entries
