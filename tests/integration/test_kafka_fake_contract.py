"""FakeKafka keeps the broker's contract where unit tests rely on it: one scenario list, run
against the fake and against the session's real broker.

Each scenario gets a :class:`Cluster` (its clients and a fresh topic factory) and asserts
only what both must agree on: which partition a key lands in is the client's hash (murmur2
on the broker, crc32 in the fake), so only "one key, one partition, in order" is checked.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from kafeed.errors import ReadIncomplete
from kafeed.kafka import FakeKafka, KafkaClients, TransactionalProducer
from kafeed.kafka.types import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    AcknowledgeType,
    IsolationLevel,
    OffsetSpec,
    TopicPartition,
)


@dataclass
class Cluster:
    clients: KafkaClients
    topic: Callable[[int], str]  # a fresh topic with this many partitions

    def produce(self, topic: str, records: list[tuple[bytes | None, bytes, int]]) -> None:
        """``(key, value, partition)`` records (partition -1: by key), acknowledged on return."""
        producer = self.clients.producer()
        for key, value, partition in records:
            producer.produce(topic, value, key, partition=partition)
        assert producer.flush(10) == 0

    def transactional(self, topic: str) -> TransactionalProducer:
        producer = self.clients.transactional_producer(transactional_id=f"contract-{topic}", stage="contract")
        producer.init()
        return producer

    def from_start(self, topic: str, partitions: int, **extra: Any) -> Any:
        consumer = self.clients.consumer({"group.id": f"contract-{uuid.uuid4().hex[:8]}", **extra})
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        return consumer


def _consume(consumer: Any, count: int, timeout_s: float = 15.0) -> list[Any]:
    """``count`` records (end-of-partition events skipped), or fewer when ``timeout_s`` passes."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        got += [m for m in consumer.consume(num_messages=count - len(got), timeout=0.2) if m.error() is None]
    return got


def _settled(read: Callable[[], Any], expected: Any, timeout_s: float = 10.0) -> Any:
    """``read()`` once it returns ``expected`` (or its last answer after ``timeout_s``): the broker
    writes a transaction's commit markers after commit_transaction returns."""
    deadline = time.monotonic() + timeout_s
    while (got := read()) != expected and time.monotonic() < deadline:
        time.sleep(0.05)
    return got


def _offsets(got: list[Any]) -> list[tuple[int, int, bytes | None]]:
    return sorted((m.partition(), m.offset(), m.value()) for m in got)


# -- the scenarios -------------------------------------------------------------------------------

def keyed_records_keep_one_partition_in_order(c: Cluster) -> None:
    topic = c.topic(3)
    c.produce(topic, [(b"k%d" % (i % 4), b"v%d" % i, -1) for i in range(12)])
    consumer = c.from_start(topic, 3)
    got = _consume(consumer, 12)
    consumer.close()
    assert len(got) == 12
    for key in {m.key() for m in got}:
        mine = sorted((m for m in got if m.key() == key), key=lambda m: m.offset())
        assert len({m.partition() for m in mine}) == 1
        assert [m.value() for m in mine] == [b"v%d" % i for i in range(12) if b"k%d" % (i % 4) == key]
    for p in range(3):
        assert sorted(m.offset() for m in got if m.partition() == p) == list(range(
            sum(m.partition() == p for m in got)))


def committed_offsets_are_where_a_new_member_starts(c: Cluster) -> None:
    topic = c.topic(2)
    c.produce(topic, [(None, b"%d:%d" % (p, i), p) for p in range(2) for i in range(5)])
    group = f"g-{topic}"
    first = c.clients.consumer({"group.id": group, "enable.auto.commit": False})
    first.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    first.close()
    second = c.clients.consumer({"group.id": group, "enable.auto.commit": False,
                                 "auto.offset.reset": "earliest"})
    assert [tp.offset for tp in second.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)],
                                                 timeout=10)] == [3, OFFSET_INVALID]
    second.subscribe([topic])
    got = _consume(second, 7)
    second.close()
    assert _offsets(got) == [(0, 3, b"0:3"), (0, 4, b"0:4")] + [(1, i, b"1:%d" % i) for i in range(5)]


def an_aborted_transaction_is_invisible_to_read_committed(c: Cluster) -> None:
    topic = c.topic(1)
    producer = c.transactional(topic)
    producer.begin()
    producer.produce(topic, b"aborted", partition=0)
    assert producer.flush(10) == 0
    producer.abort()
    producer.begin()
    producer.produce(topic, b"committed", partition=0)
    producer.commit()
    # Each transaction's end is a control marker taking one offset.
    def visible() -> list[tuple[int, bytes]]:
        return [(m.offset(), m.value()) for m in c.clients.read_to_end(topic)]

    assert _settled(visible, [(2, b"committed")]) == [(2, b"committed")]
    uncommitted = c.from_start(topic, 1, **{"isolation.level": "read_uncommitted"})
    assert [(m.offset(), m.value()) for m in _consume(uncommitted, 2)] == [(0, b"aborted"), (2, b"committed")]
    assert uncommitted.get_watermark_offsets(TopicPartition(topic, 0), timeout=10) == (0, 4)
    uncommitted.close()


def sent_offsets_move_the_group_only_when_the_transaction_commits(c: Cluster) -> None:
    topic = c.topic(1)
    c.produce(topic, [(None, b"%d" % i, 0) for i in range(5)])
    consumer = c.clients.consumer({"group.id": f"g-{topic}", "enable.auto.commit": False})
    metadata = consumer.consumer_group_metadata()
    producer = c.transactional(topic)
    producer.begin()
    producer.send_offsets({(topic, 0): 2}, metadata)
    producer.abort()
    assert consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == OFFSET_INVALID
    producer.begin()
    producer.send_offsets({(topic, 0): 3}, metadata)
    producer.commit()
    assert _settled(lambda: consumer.committed([TopicPartition(topic, 0)], timeout=10)[0].offset, 3) == 3
    consumer.close()


def a_read_stops_at_the_ends_taken_when_it_began(c: Cluster) -> None:
    topic = c.topic(2)
    c.produce(topic, [(None, b"%d:%d" % (p, i), p) for p in range(2) for i in range(3)])
    with c.clients.reader() as reader:
        ends = reader.watermarks(topic)
        assert ends == {0: (0, 3), 1: (0, 3)}
        c.produce(topic, [(None, b"late", 0)])
        got = reader.read(topic, ends)
    assert _offsets(got) == [(p, i, b"%d:%d" % (p, i)) for p in range(2) for i in range(3)]
    assert len(c.clients.read_to_end(topic)) == 7


def an_open_transaction_holds_read_committed_back(c: Cluster) -> None:
    topic = c.topic(1)
    c.produce(topic, [(None, b"before", 0)])
    producer = c.transactional(topic)
    producer.begin()
    producer.produce(topic, b"open", partition=0)
    assert producer.flush(10) == 0
    admin = c.clients.admin()
    tp = TopicPartition(topic, 0)

    def latest(**kwargs: Any) -> int:
        return int(admin.list_offsets({tp: OffsetSpec.latest()}, **kwargs)[tp].result(timeout=10).offset)

    assert latest() == 2  # the high watermark counts the open record
    assert latest(isolation_level=IsolationLevel.READ_COMMITTED) == 1  # the last stable offset does not
    committed = c.from_start(topic, 1)
    uncommitted = c.from_start(topic, 1, **{"isolation.level": "read_uncommitted"})
    # A consumer's watermarks follow its isolation level: read_committed ends at the last stable offset.
    assert committed.get_watermark_offsets(tp, timeout=10) == (0, 1)
    assert uncommitted.get_watermark_offsets(tp, timeout=10) == (0, 2)
    committed.close()
    uncommitted.close()
    assert [m.value() for m in c.clients.read_to_end(topic)] == [b"before"]
    with c.clients.reader() as reader, pytest.raises(ReadIncomplete, match=r"partition 0 \(at 1 of 2\)"):
        reader.read(topic, {0: (0, 2)}, timeout_s=1.0)
    producer.commit()
    values = _settled(lambda: [m.value() for m in c.clients.read_to_end(topic)], [b"before", b"open"])
    assert values == [b"before", b"open"]


def deleted_records_move_the_log_start(c: Cluster) -> None:
    topic = c.topic(1)
    c.produce(topic, [(None, b"%d" % i, 0) for i in range(5)])
    admin = c.clients.admin()
    for future in admin.delete_records([TopicPartition(topic, 0, 3)]).values():
        future.result(timeout=10)
    tp = TopicPartition(topic, 0)
    consumer = c.from_start(topic, 1)
    assert consumer.get_watermark_offsets(tp, timeout=10) == (3, 5)
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result(timeout=10).offset == 3
    assert [(m.offset(), m.value()) for m in _consume(consumer, 2)] == [(3, b"3"), (4, b"4")]
    consumer.close()
    assert [m.offset() for m in c.clients.read_to_end(topic)] == [3, 4]


def a_released_share_delivery_goes_to_the_next_member(c: Cluster) -> None:
    from kafeed.tasks.queue import configure_group

    topic = c.topic(1)
    c.produce(topic, [(None, b"%d" % i, 0) for i in range(3)])
    group = f"share-{topic}"
    configure_group(c.clients.connection, group, lock_duration_ms=15_000, clients=c.clients)

    def member() -> Any:
        consumer = c.clients.share_consumer({"group.id": group, "share.acknowledgement.mode": "explicit"})
        consumer.subscribe([topic])
        return consumer

    def poll(consumer: Any, count: int) -> list[Any]:
        got: list[Any] = []
        deadline = time.monotonic() + 15
        while len(got) < count and time.monotonic() < deadline:
            got += [m for m in consumer.poll(0.5) if m.error() is None]
        return got

    first = member()
    got = poll(first, 3)
    assert [m.value() for m in got] == [b"0", b"1", b"2"]
    first.acknowledge(got[0], AcknowledgeType.ACCEPT)
    first.acknowledge(got[1], AcknowledgeType.RELEASE)
    first.acknowledge(got[2], AcknowledgeType.REJECT)
    first.commit_sync()
    first.close()
    second = member()
    again = poll(second, 1)
    assert [(m.offset(), m.value()) for m in again] == [(1, b"1")]
    second.acknowledge(again[0], AcknowledgeType.ACCEPT)
    second.commit_sync()
    second.close()


def a_paused_partition_hands_out_nothing_until_it_is_resumed(c: Cluster) -> None:
    topic = c.topic(2)
    c.produce(topic, [(None, b"%d:%d" % (p, i), p) for p in range(2) for i in range(4)])
    consumer = c.from_start(topic, 2)
    consumer.pause([TopicPartition(topic, 0)])
    assert _offsets(_consume(consumer, 4)) == [(1, i, b"1:%d" % i) for i in range(4)]
    assert _consume(consumer, 1, timeout_s=1.0) == []
    consumer.resume([TopicPartition(topic, 0)])
    got = _consume(consumer, 4)
    consumer.close()
    assert _offsets(got) == [(0, i, b"0:%d" % i) for i in range(4)]


SCENARIOS = [
    a_paused_partition_hands_out_nothing_until_it_is_resumed,
    keyed_records_keep_one_partition_in_order,
    committed_offsets_are_where_a_new_member_starts,
    an_aborted_transaction_is_invisible_to_read_committed,
    sent_offsets_move_the_group_only_when_the_transaction_commits,
    a_read_stops_at_the_ends_taken_when_it_began,
    an_open_transaction_holds_read_committed_back,
    deleted_records_move_the_log_start,
    a_released_share_delivery_goes_to_the_next_member,
]


@pytest.fixture(params=["fake", "broker"])
def cluster(request: pytest.FixtureRequest) -> Cluster:
    if request.param == "fake":
        fake = FakeKafka()

        def fake_topic(partitions: int) -> str:
            name = f"contract-{uuid.uuid4().hex[:8]}"
            fake.create_topic(name, partitions)
            return name

        return Cluster(fake, fake_topic)
    connection = request.getfixturevalue("kafka")
    make_topic = request.getfixturevalue("make_topic")
    return Cluster(KafkaClients(connection), lambda partitions: make_topic(partitions, prefix="contract"))


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_fake_keeps_the_brokers_contract(cluster: Cluster, scenario: Callable[[Cluster], None]) -> None:
    scenario(cluster)
