"""Checks before anything is written: broker reachable, topic present, its size limit, helper topics."""

from __future__ import annotations

from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError, translate_kafka_error
from kafeed.ingest.progress import PROGRESS_TOPIC
from kafeed.topics import TopicAdmin, plan_topic
from kafeed.topics.admin import ensure_reachable

DEFAULT_MAX_MESSAGE_BYTES = 1_048_588  # the broker default of message.max.bytes


def max_message_bytes(admin: TopicAdmin, topic: str) -> int:
    """The topic's effective ``max.message.bytes`` (default included); TopicError when it is missing."""
    from confluent_kafka.admin import ConfigResource

    if not admin.exists(topic):
        raise TopicError(f"Topic {topic!r} does not exist.",
                         hint=f"Create it first: kafeed topic create {topic} --partitions N.")
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin._admin.describe_configs([res], request_timeout=admin.timeout)[res].result(
            timeout=admin.timeout)
    except Exception as exc:
        raise translate_kafka_error(exc, action=f"describe topic {topic!r}", kind=TopicError) from exc
    entry = entries.get("max.message.bytes")
    return int(entry.value) if entry is not None and entry.value else DEFAULT_MAX_MESSAGE_BYTES


def prepare_topics(settings: ConnectionSettings, topic: str, *, timeout: float) -> tuple[int, int]:
    """Fail fast on an unreachable cluster or a missing topic; create the DLQ and progress topics.

    Returns ``(topic max.message.bytes, dlq max.message.bytes)``.
    """
    brokers = ensure_reachable(settings, timeout=timeout)
    admin = TopicAdmin(settings, timeout=max(timeout, 15.0))
    limit = max_message_bytes(admin, topic)
    dlq = f"{topic}.dlq"
    admin.create(plan_topic(dlq, brokers=brokers, partitions=1), exist_ok=True)
    admin.create(plan_topic(PROGRESS_TOPIC, brokers=brokers, partitions=1, compact=True), exist_ok=True)
    return limit, max_message_bytes(admin, dlq)
