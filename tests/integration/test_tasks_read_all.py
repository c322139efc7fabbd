"""`kafeed tasks status` and `cancel` read queue topics to their end (KafkaClients.read_to_end):
a queue whose last records were aborted ends at its end of partition, not at the timeout."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Producer

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from tests.kafka_fixtures import TopicFactory


def test_read_all_ends_at_the_end_of_a_partition_that_ends_in_aborted_records(
        kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"t-{uuid.uuid4().hex}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(6):
        producer.produce(topic, value=f"kept-{i}".encode(), partition=i % 2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for i in range(4):
        producer.produce(topic, value=f"aborted-{i}".encode(), partition=i % 2)
    producer.flush(30)
    producer.abort_transaction(30)

    started = time.monotonic()
    records = KafkaClients(kafka).read_to_end(topic, timeout_s=20)
    took = time.monotonic() - started
    assert sorted(m.value() for m in records) == [f"kept-{i}".encode() for i in range(6)]
    assert took < 10, f"read_to_end waited {took:.1f} s for records that will never come"
