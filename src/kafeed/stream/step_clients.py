"""The consumer and the transactional producer of a stream step, configured from its settings
(built by the step's :class:`~kafeed.kafka.KafkaClients`): built, closed, and its dead letters."""

from __future__ import annotations

import logging
from typing import Any

from kafeed.kafka import KafkaClients, TransactionalProducer, close_consumer, dead_letter_headers, fit_value
from kafeed.stream.records import DeadLetter
from kafeed.stream.settings import StreamSettings

# Closing the consumer (leave the group, settle the transaction in the revoke callback) is
# given this many session timeouts before the step goes on without it (close_consumer).
CLOSE_TIMEOUT_FACTOR = 3


def make_producer(clients: KafkaClients, settings: StreamSettings, stage: str, *,
                  transactional_id: str, max_message_bytes: int) -> TransactionalProducer:
    """An initialised transactional producer whose records fit ``max_message_bytes``."""
    k = settings.kafka
    config = {
        "transaction.timeout.ms": k.transaction_timeout_ms,
        "message.timeout.ms": k.effective_message_timeout_ms(),
        "linger.ms": k.linger_ms,
        "compression.type": k.compression,
        "queue.buffering.max.messages": max(100_000, 4 * k.batch_size),
        "message.max.bytes": max(max_message_bytes + 1024, 1_000_000),
    }
    producer = clients.transactional_producer(transactional_id=transactional_id, stage=stage,
                                              config=config, timeout_s=k.transaction_timeout_ms / 1000)
    producer.init()
    return producer


def make_consumer(clients: KafkaClients, settings: StreamSettings, stage: str) -> Any:
    """A read_committed consumer of the step's group that commits only inside transactions."""
    k = settings.kafka
    return clients.consumer({
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


def close_step_consumer(consumer: Any, settings: StreamSettings, stage: str) -> None:
    """Close the step's consumer, going on without it after a few session timeouts."""
    close_consumer(consumer, CLOSE_TIMEOUT_FACTOR * settings.kafka.session_timeout_ms / 1000,
                   what=f"{stage} consumer", failure_level=logging.WARNING)


def produce_dead_letter(producer: TransactionalProducer, bad: DeadLetter, *, topic: str, stage: str,
                        limit: int) -> None:
    """``bad``'s record to dead-letter ``topic``, its value cut to fit ``limit`` with the headers."""
    r = bad.record
    headers = dead_letter_headers(kind=bad.kind, reason=bad.reason, stage=stage,
                                  source=(r.topic, r.partition, r.offset), extra=r.headers)
    # Headers push a near-limit record over the limit; the source offset still finds it.
    value = fit_value(r.value, headers, limit)
    producer.produce(topic, value, r.key, headers=headers)
