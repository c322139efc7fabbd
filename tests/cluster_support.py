"""Plain client helpers for the tests of local clusters themselves."""

from __future__ import annotations

from confluent_kafka import Consumer, Producer, TopicPartition

from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin


def produce_numbered(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 30000})
    for i in range(start, start + n):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-all",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    admin = TopicAdmin(ConnectionSettings(bootstrap=bootstrap))
    info = admin.describe(topic, sizes=False)
    want = sum(p.high_watermark for p in info.partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    for _ in range(200):
        values += [m.value() for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
        if len(values) >= want:
            break
    consumer.close()
    return values
