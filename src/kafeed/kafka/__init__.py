"""The Kafka boundary: the only importer of confluent_kafka.

:class:`KafkaClients` (built from a :class:`~kafeed.config.ConnectionSettings`) is where
every stage gets its clients::

    clients = KafkaClients(connection)
    consumer = clients.read_committed_consumer({"group.id": "g"}, stage="prepare")
    producer = clients.transactional_producer(transactional_id="t", stage="prepare")
    admin = clients.admin()
    records = clients.read_to_end("topic")    # every committed record, or ReadIncomplete

Its methods: ``config``, ``consumer``, ``read_committed_consumer``, ``share_consumer``,
``producer``, ``transactional_producer``, ``admin``, ``reader`` (a :class:`TopicReader` for
repeated range reads) and ``read_to_end``. The clients they build are typed wrappers
(:class:`Consumer`, :class:`ShareConsumer`, :class:`Producer`, :class:`Admin`, and the
:class:`TransactionalProducer`) whose calls, and the futures an admin request returns, raise
:class:`~kafeed.errors.KafeedError`: librdkafka's errors are translated here
(:mod:`kafeed.kafka.translate`) and nowhere else, its code kept on the error, and the cases a
caller branches on have classes of their own (``BrokerUnavailable``, ``NotAuthorized``,
``TopicExists``, ``UnknownTopic``). An error a consumed message carries is read with
:func:`message_event` (the end of a partition, an offset reset, a retried condition; it
raises the errors that end a run), so no module outside this package names librdkafka's codes.
:class:`FakeKafka` has the same methods over an in-memory cluster (topics, partitions,
transactions, group offsets), for unit tests. confluent-kafka's value types
(``TopicPartition``, ``OFFSET_BEGINNING``, ``NewTopic``, ``ConfigResource`` ...) come from
:mod:`kafeed.kafka.types`, imported inside the function that needs them so ``import kafeed``
stays light.

Also here: dead-letter headers, drains, and ``list_offsets`` (partition starts and ends,
asked again while leadership moves).
"""

from typing import TYPE_CHECKING, Any

from kafeed.kafka.admin import Admin
from kafeed.kafka.clients import client_config, close_consumer, security_failure
from kafeed.kafka.consumer import Consumer, ShareConsumer
from kafeed.kafka.consumer_errors import MessageEvent, final_consumer_error, message_event
from kafeed.kafka.deadletters import dead_letter_headers, fit_value
from kafeed.kafka.delivery import DeliveryFailure, error_text, is_fatal, undelivered_error
from kafeed.kafka.drain import SESSION_TIMEOUT_MS, Drain, group_positions, stall_seconds, topic_id
from kafeed.kafka.kafka_clients import KafkaClients
from kafeed.kafka.offsets import list_offsets
from kafeed.kafka.producer import RECORD_OVERHEAD, Producer, TransactionalProducer
from kafeed.kafka.reading import TopicReader

if TYPE_CHECKING:
    from kafeed.kafka.fake import FakeKafka


def __getattr__(name: str) -> Any:
    # The in-memory fake is for tests: a program that never asks for it never loads it.
    if name == "FakeKafka":
        from kafeed.kafka.fake import FakeKafka

        return FakeKafka
    raise AttributeError(f"module 'kafeed.kafka' has no attribute {name!r}")

__all__ = [
    "RECORD_OVERHEAD",
    "SESSION_TIMEOUT_MS",
    "Admin",
    "Consumer",
    "DeliveryFailure",
    "Drain",
    "FakeKafka",
    "KafkaClients",
    "MessageEvent",
    "Producer",
    "ShareConsumer",
    "TopicReader",
    "TransactionalProducer",
    "client_config",
    "close_consumer",
    "dead_letter_headers",
    "error_text",
    "final_consumer_error",
    "fit_value",
    "group_positions",
    "is_fatal",
    "list_offsets",
    "message_event",
    "security_failure",
    "stall_seconds",
    "topic_id",
    "undelivered_error",
]
