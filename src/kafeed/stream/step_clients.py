"""The consumer and the transactional producer of a stream step, configured from its settings."""

from __future__ import annotations

from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients, TransactionalProducer
from kafeed.stream.settings import StreamSettings


def make_producer(connection: ConnectionSettings, settings: StreamSettings, stage: str, *,
                  transactional_id: str, max_message_bytes: int) -> TransactionalProducer:
    """An initialised transactional producer whose records fit ``max_message_bytes``."""
    k = settings.kafka
    producer = TransactionalProducer(connection, transactional_id=transactional_id,
                                     stage=stage, timeout_s=k.transaction_timeout_ms / 1000,
                                     config={
        "transaction.timeout.ms": k.transaction_timeout_ms,
        "message.timeout.ms": k.effective_message_timeout_ms(),
        "linger.ms": k.linger_ms,
        "compression.type": k.compression,
        "queue.buffering.max.messages": max(100_000, 4 * k.batch_size),
        "message.max.bytes": max(max_message_bytes + 1024, 1_000_000),
    })
    producer.init()
    return producer


def make_consumer(connection: ConnectionSettings, settings: StreamSettings, stage: str) -> Any:
    """A read_committed consumer of the step's group that commits only inside transactions."""
    k = settings.kafka
    return KafkaClients(connection).consumer({
        "group.id": settings.group,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed",
        "auto.offset.reset": k.auto_offset_reset,
        "partition.assignment.strategy": "cooperative-sticky",
        "session.timeout.ms": k.session_timeout_ms,
        "fetch.max.bytes": k.fetch_max_bytes,
        "max.partition.fetch.bytes": k.max_partition_fetch_bytes,
    }, stage=stage)
