"""The Kafka boundary: client configs, the transactional producer, dead-letter headers, drains.

Everything kafeed says to librdkafka that more than one stage needs goes through
here once. Errors enter the :class:`~kafeed.errors.KafeedError` tree through
:func:`kafeed.errors.translate_kafka_error`.
"""

from kafeed.kafka.clients import (
    admin_client,
    client_config,
    close_consumer,
    read_committed_consumer,
    security_failure,
)
from kafeed.kafka.consumer_errors import final_consumer_error
from kafeed.kafka.deadletters import dead_letter_headers, fit_value
from kafeed.kafka.drain import SESSION_TIMEOUT_MS, Drain, group_positions, stall_seconds, topic_id
from kafeed.kafka.producer import (
    RECORD_OVERHEAD,
    DeliveryFailure,
    TransactionalProducer,
    error_text,
    is_fatal,
    undelivered_error,
)

__all__ = [
    "RECORD_OVERHEAD",
    "SESSION_TIMEOUT_MS",
    "DeliveryFailure",
    "Drain",
    "TransactionalProducer",
    "admin_client",
    "client_config",
    "close_consumer",
    "dead_letter_headers",
    "error_text",
    "final_consumer_error",
    "fit_value",
    "group_positions",
    "is_fatal",
    "read_committed_consumer",
    "security_failure",
    "stall_seconds",
    "topic_id",
    "undelivered_error",
]
