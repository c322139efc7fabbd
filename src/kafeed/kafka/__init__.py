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
repeated range reads), ``read_to_end`` and ``translate``. :class:`FakeKafka` has the same
methods over an in-memory cluster (topics, partitions, transactions, group offsets), for
unit tests. confluent-kafka's value types (``TopicPartition``, ``OFFSET_BEGINNING``,
``KafkaError``, ``NewTopic``, ``ConfigResource`` ...) come from :mod:`kafeed.kafka.types`,
imported inside the function that needs them so ``import kafeed`` stays light.

Errors enter the :class:`~kafeed.errors.KafeedError` tree through
:func:`translate_kafka_error`, here and nowhere else. Also here: the transactional
producer, dead-letter headers, drains, and ``list_offsets`` (partition starts and ends,
asked again while leadership moves). ``admin_client(connection)`` and
``read_committed_consumer(connection, ...)`` are the older spellings of
``KafkaClients(connection).admin()`` and ``.read_committed_consumer(...)``, kept while
their last callers move.
"""

from typing import TYPE_CHECKING, Any

from kafeed.kafka.clients import (
    admin_client,
    client_config,
    close_consumer,
    read_committed_consumer,
    security_failure,
)
from kafeed.kafka.consumer_errors import final_consumer_error
from kafeed.kafka.deadletters import dead_letter_headers, fit_value
from kafeed.kafka.delivery import DeliveryFailure, error_text, is_fatal, undelivered_error
from kafeed.kafka.drain import SESSION_TIMEOUT_MS, Drain, group_positions, stall_seconds, topic_id
from kafeed.kafka.kafka_clients import KafkaClients
from kafeed.kafka.offsets import list_offsets
from kafeed.kafka.producer import RECORD_OVERHEAD, TransactionalProducer
from kafeed.kafka.reading import TopicReader
from kafeed.kafka.translate import translate_kafka_error

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
    "DeliveryFailure",
    "Drain",
    "FakeKafka",
    "KafkaClients",
    "TopicReader",
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
    "list_offsets",
    "read_committed_consumer",
    "security_failure",
    "stall_seconds",
    "topic_id",
    "translate_kafka_error",
    "undelivered_error",
]
