"""KafkaClients: every client of one cluster connection, built in one place.

It builds consumers, share consumers, producers, the transactional producer and admin
clients from one :class:`~kafeed.config.ConnectionSettings`, and reads a topic to its end
(:mod:`kafeed.kafka.reading`, one implementation, one error behaviour). The clients are the
typed ones (:class:`~kafeed.kafka.consumer.Consumer`, :class:`~kafeed.kafka.consumer.ShareConsumer`,
:class:`~kafeed.kafka.producer.Producer`, :class:`~kafeed.kafka.admin.Admin`): building one
and every call on it raise :class:`~kafeed.errors.KafeedError`, never librdkafka's exceptions.
:class:`kafeed.kafka.fake.FakeKafka` has the same methods, in memory, for unit tests.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError, KafkaOperationError
from kafeed.kafka.admin import Admin
from kafeed.kafka.clients import client_config
from kafeed.kafka.consumer import Consumer, ShareConsumer
from kafeed.kafka.producer import Producer, TransactionalProducer
from kafeed.kafka.reading import TopicReader, reader_config
from kafeed.kafka.translate import translate_kafka_error


class KafkaClients:
    """Every Kafka client of one cluster connection, and topics read to their end.

    Built from a :class:`~kafeed.config.ConnectionSettings`; each builder merges
    :func:`client_config` (connection, security, logger, statistics for ``stage``) with
    the caller's ``extra``. A client that cannot be built, and every call on a built one,
    raise a :class:`~kafeed.errors.KafeedError`. :class:`kafeed.kafka.fake.FakeKafka` has
    the same methods, in memory.
    """

    def __init__(self, connection: ConnectionSettings) -> None:
        self.connection = connection

    def config(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> dict[str, Any]:
        """The librdkafka config of a client of this connection (see :func:`client_config`)."""
        return client_config(self.connection, extra, stage=stage)

    def consumer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Consumer:
        """A :class:`Consumer` with ``extra`` as given (group, isolation, commits are the caller's)."""
        from confluent_kafka import Consumer as Client

        conf = self.config(extra, stage=stage)
        return Consumer(self._built("a consumer", lambda: Client(conf)), what=consumer_name(conf))

    def read_committed_consumer(self, extra: Mapping[str, Any] | None = None, *,
                                stage: str | None = None) -> Consumer:
        """A consumer that sees only committed transactions and never commits on its own."""
        return self.consumer({"enable.auto.commit": False, "isolation.level": "read_committed",
                              **(extra or {})}, stage=stage)

    def share_consumer(self, extra: Mapping[str, Any] | None = None) -> ShareConsumer:
        """A :class:`ShareConsumer` (KIP-932 share group member)."""
        from confluent_kafka import ShareConsumer as Client

        return ShareConsumer(self._built("a share consumer", lambda: Client(self.config(extra))),
                             what=f"a member of share group {(extra or {}).get('group.id')!r}")

    def producer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Producer:
        """A plain (non-transactional) :class:`Producer`."""
        from confluent_kafka import Producer as Client

        return Producer(self._built("a producer", lambda: Client(self.config(extra, stage=stage))))

    def transactional_producer(self, *, transactional_id: str, stage: str,
                               config: Mapping[str, Any] | None = None,
                               timeout_s: float = 60.0) -> TransactionalProducer:
        """The one transactional producer (:class:`~kafeed.kafka.TransactionalProducer`)."""
        return TransactionalProducer(self.connection, transactional_id=transactional_id, stage=stage,
                                     config=config, timeout_s=timeout_s)

    def admin(self) -> Admin:
        """An :class:`Admin` client."""
        from confluent_kafka.admin import AdminClient

        return Admin(self._built("an admin client", lambda: AdminClient(self.config())))

    def reader(self, *, what: str = "reader") -> TopicReader:
        """A :class:`~kafeed.kafka.reading.TopicReader` on a fresh read_committed consumer; close it."""
        return TopicReader(self.read_committed_consumer(reader_config()), what=what)

    def read_to_end(self, topic: str, partitions: Collection[int] | None = None, *,
                    timeout_s: float = 30.0, hint: str | None = None) -> list[Any]:
        """Every committed record of ``topic`` (of ``partitions``) up to the end it has now.

        Raises :class:`~kafeed.errors.ReadIncomplete` naming the partitions left when the read
        stops moving for ``timeout_s``; never returns part of the topic.
        """
        with self.reader(what=f"reader of {topic}") as reader:
            return reader.read_to_end(topic, partitions, timeout_s=timeout_s, hint=hint)

    @staticmethod
    def _built(what: str, build: Callable[[], Any]) -> Any:
        try:
            return build()
        except KafeedError:
            raise
        except Exception as exc:
            raise translate_kafka_error(exc, action=f"create {what}", kind=KafkaOperationError) from exc


def consumer_name(conf: Mapping[str, Any]) -> str:
    """How a consumer is named in its errors: by its group, when it has one."""
    group = conf.get("group.id")
    return f"the consumer of group {group!r}" if group else "a consumer"
