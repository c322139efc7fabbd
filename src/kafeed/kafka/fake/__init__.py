"""FakeKafka: the Kafka boundary in memory, for unit tests (as httpx ships ``MockTransport``).

``FakeKafka()`` has :class:`~kafeed.kafka.KafkaClients`'s methods; its clients keep
topics in this process: partitions, offsets, transactions that commit or abort (with
their control markers), read_committed visibility, consumer groups' committed offsets,
share groups. Consumers ``assign``/``subscribe``/``seek``/``position``/``committed``/
``consume``/``pause``/``resume``; :meth:`~kafeed.kafka.KafkaClients.read_to_end` runs the
real implementation on them, and ``transactional_producer`` is the real
:class:`~kafeed.kafka.TransactionalProducer` over a fake client.
:meth:`FakeKafka.fail` makes a later call of an operation raise a librdkafka error.
Values are confluent-kafka's own types (``TopicPartition``, ``KafkaError``).
"""

from kafeed.kafka.fake.cluster import FakeKafka
from kafeed.kafka.fake.records import FakeMessage

__all__ = ["FakeKafka", "FakeMessage"]
