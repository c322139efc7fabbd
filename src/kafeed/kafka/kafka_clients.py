"""KafkaClients: every client of one cluster connection, built in one place.

It builds consumers, share consumers, producers, the transactional producer and admin
clients from one :class:`~kafeed.config.ConnectionSettings`, and reads a topic to its end
(:mod:`kafeed.kafka.reading`, one implementation, one error behaviour). Errors building a
client leave as :class:`~kafeed.errors.KafeedError`. :class:`kafeed.kafka.fake.FakeKafka`
has the same methods, in memory, for unit tests.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError, KafkaOperationError
from kafeed.kafka.clients import client_config
from kafeed.kafka.producer import TransactionalProducer
from kafeed.kafka.reading import TopicReader, reader_config
from kafeed.kafka.translate import translate_kafka_error


class KafkaClients:
    """Every Kafka client of one cluster connection, and topics read to their end.

    Built from a :class:`~kafeed.config.ConnectionSettings`; each builder merges
    :func:`client_config` (connection, security, logger, statistics for ``stage``) with
    the caller's ``extra``. A client that cannot be built raises a
    :class:`~kafeed.errors.KafeedError`; calls on a built client raise confluent-kafka's
    ``KafkaException``, which :meth:`translate` (or :func:`translate_kafka_error`) turns
    into one. :class:`kafeed.kafka.fake.FakeKafka` has the same methods, in memory.
    """

    def __init__(self, connection: ConnectionSettings) -> None:
        self.connection = connection

    translate = staticmethod(translate_kafka_error)

    def config(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> dict[str, Any]:
        """The librdkafka config of a client of this connection (see :func:`client_config`)."""
        return client_config(self.connection, extra, stage=stage)

    def consumer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Any:
        """A ``Consumer`` with ``extra`` as given (group, isolation, commits are the caller's)."""
        from confluent_kafka import Consumer

        return self._built("a consumer", lambda: Consumer(self.config(extra, stage=stage)))

    def read_committed_consumer(self, extra: Mapping[str, Any] | None = None, *,
                                stage: str | None = None) -> Any:
        """A consumer that sees only committed transactions and never commits on its own."""
        return self.consumer({"enable.auto.commit": False, "isolation.level": "read_committed",
                              **(extra or {})}, stage=stage)

    def share_consumer(self, extra: Mapping[str, Any] | None = None) -> Any:
        """A ``ShareConsumer`` (KIP-932 share group member)."""
        from confluent_kafka import ShareConsumer

        return self._built("a share consumer", lambda: ShareConsumer(self.config(extra)))

    def producer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Any:
        """A plain (non-transactional) ``Producer``."""
        from confluent_kafka import Producer

        return self._built("a producer", lambda: Producer(self.config(extra, stage=stage)))

    def transactional_producer(self, *, transactional_id: str, stage: str,
                               config: Mapping[str, Any] | None = None,
                               timeout_s: float = 60.0) -> TransactionalProducer:
        """The one transactional producer (:class:`~kafeed.kafka.TransactionalProducer`)."""
        return TransactionalProducer(self.connection, transactional_id=transactional_id, stage=stage,
                                     config=config, timeout_s=timeout_s)

    def admin(self) -> Any:
        """An ``AdminClient``."""
        from confluent_kafka.admin import AdminClient

        return self._built("an admin client", lambda: AdminClient(self.config()))

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
