"""Creating and checking a task queue's topics and share group on the cluster."""

from __future__ import annotations

import logging
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, KafeedError, KafkaOperationError
from kafeed.kafka import KafkaClients
from kafeed.tasks.settings import QueueSettings
from kafeed.topics import TopicAdmin, plan_topic

log = logging.getLogger("kafeed")

#: The broker-side bounds of share.record.lock.duration.ms (group.share.{min,max}.record.lock.duration.ms).
MAX_LOCK_MS = 60_000

SHARE_HINT = ("Task queues need share groups (Kafka 4.x): enable them with "
              "`kafka-features upgrade --feature share.version=1` (2 for the broker-side dead-letter "
              "queue); `kafeed broker start` clusters have share.version=2.")


def ensure_topics(admin: TopicAdmin, settings: QueueSettings, kinds: list[str], *,
                  create_queues: bool = True) -> None:
    """Create what is missing: the results (compacted), parked and queue topics."""
    for kind in kinds:
        topic = settings.queue_topic(kind)
        if not create_queues and not admin.exists(topic):
            raise ConfigError(f"Unknown task kind {kind!r}: there is no queue topic {topic!r}.",
                              hint=f"Start a worker with `kafeed tasks worker --kind {kind}` first, "
                              "or submit with --create-queue.")
    brokers = admin.broker_count()
    admin.create(plan_topic(settings.results_topic, brokers=brokers, partitions=settings.partitions,
                            compact=True), exist_ok=True)
    admin.create(plan_topic(settings.parked_topic, brokers=brokers, partitions=1), exist_ok=True)
    if create_queues:
        for kind in kinds:
            admin.create(plan_topic(settings.queue_topic(kind), brokers=brokers,
                                    partitions=settings.partitions), exist_ok=True)
    check_results_compacted(admin, settings)


def check_results_compacted(admin: TopicAdmin, settings: QueueSettings) -> None:
    """Idempotency rests on the results topic keeping the last result per key forever."""
    policy = admin.describe(settings.results_topic, sizes=False).configs.get("cleanup.policy", "delete")
    if "compact" not in policy.split(","):
        raise ConfigError(
            f"The results topic {settings.results_topic!r} has cleanup.policy={policy}, not compact, "
            "so results (and with them idempotency) would be deleted.",
            hint=f"Run `kafka-configs --alter --entity-type topics --entity-name "
            f"{settings.results_topic} --add-config cleanup.policy=compact`, or use another --prefix.")


def lock_ms(timeout_s: float) -> int:
    """The share group's lock duration for a kind whose tasks take up to ``timeout_s``."""
    return max(1000, min(MAX_LOCK_MS, int(timeout_s * 1000)))


def configure_group(connection: ConnectionSettings, group: str, *, lock_duration_ms: int,
                    delivery_limit: int = 10, clients: KafkaClients | None = None) -> None:
    """Start the share group at the earliest task and lock each delivery for ``lock_duration_ms``.

    A broker without share groups refuses group configs; that is said in one sentence
    naming ``share.version``.
    """
    from kafeed.kafka.types import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    def entry(name: str, value: str) -> Any:
        return ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)

    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        entry("share.auto.offset.reset", "earliest"),
        entry("share.record.lock.duration.ms", str(lock_duration_ms)),
        entry("share.delivery.count.limit", str(delivery_limit)),
    ])
    admin = (clients or KafkaClients(connection)).admin()
    try:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)
    except KafeedError as exc:
        raise share_group_error(exc, group) from exc


def share_group_error(err: KafeedError, group: str) -> KafeedError:
    """A refused share-group config as one sentence: missing share groups or a bad value."""
    if not isinstance(err, KafkaOperationError):
        return err
    text = err.message.lower()
    if "must be in the range" in text:
        return ConfigError(f"The cluster refused share group {group!r}'s settings: {err.message}",
                           hint="Pick a --timeout within the broker's group.share.*.record.lock.duration.ms.")
    if "share" in text or "unknown" in text or "not supported" in text or "invalid_config" in text:
        return ConfigError(f"The cluster has no share groups enabled (feature share.version is 0), "
                           f"so it cannot hold task queues: {err.message}", hint=SHARE_HINT)
    return err
