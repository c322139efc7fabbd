"""Checks before anything is written: broker reachable, topic present, its size limit, helper topics."""

from __future__ import annotations

from kafeed.config import ConnectionSettings
from kafeed.ingest.progress import PROGRESS_TOPIC
from kafeed.topics import TopicAdmin, plan_topic
from kafeed.topics.admin import ensure_reachable


def prepare_topics(settings: ConnectionSettings, topic: str, *, timeout: float) -> tuple[int, int]:
    """Fail fast on an unreachable cluster or a missing topic; create the DLQ and progress topics.

    Returns ``(topic max.message.bytes, dlq max.message.bytes)``.
    """
    brokers = ensure_reachable(settings, timeout=timeout)
    admin = TopicAdmin(settings, timeout=max(timeout, 15.0))
    limit = admin.max_message_bytes(topic)
    dlq = f"{topic}.dlq"
    created = admin.create(plan_topic(dlq, brokers=brokers, partitions=1), exist_ok=True)
    admin.create(plan_topic(PROGRESS_TOPIC, brokers=brokers, partitions=1, compact=True), exist_ok=True)
    # On several nodes the broker asked next may not list the DLQ just created yet.
    return limit, admin.max_message_bytes(dlq, just_created=created)
