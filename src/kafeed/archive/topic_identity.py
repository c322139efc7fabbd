"""Which topic a table's positions belong to.

The table records the topic's id beside its positions; a sink refuses a topic of the same
name with another id (deleted and created again), whose records the positions do not describe.
"""

from __future__ import annotations

from typing import Any

from kafeed.archive.position import read_positions, read_summary
from kafeed.errors import ResumeMismatch, TopicError
from kafeed.kafka.drain import topic_ends


def existing_topic_metadata(client: Any, topic: str, *, hint: str) -> Any:
    """The cluster metadata for ``topic`` (a consumer's or admin's ``list_topics``), refusing a
    topic that does not exist with ``hint``."""
    meta = client.list_topics(topic, timeout=15)
    info = meta.topics.get(topic)
    if info is None or info.error is not None or not info.partitions:
        raise TopicError(f"Topic {topic!r} does not exist.", hint=hint)
    return meta


def cluster_id_of(consumer: Any, topic: str) -> str:
    """The Kafka cluster's id, checking on the way that ``topic`` exists."""
    meta = existing_topic_metadata(consumer, topic, hint="Create it, or check --topic and --bootstrap.")
    return str(meta.cluster_id)


def check_same_topic(table: Any, admin: Any, *, name: str, topic: str, topic_id: str, key: str,
                     id_key: str) -> None:
    """Refuse a topic deleted and created again since the table ``name``'s positions were written.

    ``key`` and ``id_key`` are the snapshot summary keys of the positions and the topic id."""
    stored = read_summary(table, id_key)
    if stored is not None:
        if stored != topic_id:
            raise _recreated(name, topic, f"its positions belong to topic id {stored}, the topic now has "
                                          f"id {topic_id}")
        return
    # A table written before the id was recorded: positions past the topic's end tell.
    positions = read_positions(table, key)
    if positions:
        ends = topic_ends(admin, topic)
        past = sorted(p for p, pos in positions.items() if pos > ends.get(p, (0, 0))[1])
        if past:
            raise _recreated(name, topic, f"its positions of partition(s) {', '.join(map(str, past))} "
                                          "lie past the topic's end")


def _recreated(name: str, topic: str, why: str) -> ResumeMismatch:
    return ResumeMismatch(
        f"Table {name!r} archived an earlier topic named {topic!r}, which was deleted and "
        f"created again: {why}.",
        hint="Archive the new topic into a new table (--table); the old records stay in this one.")
