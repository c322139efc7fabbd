"""KafkaClients and FakeKafka, its in-memory twin: partitions, transactions, groups, the one read-to-end."""

from __future__ import annotations

import pytest

from kafeed.errors import BrokerUnavailable, KafkaOperationError, ReadIncomplete, TopicError, TopicExists
from kafeed.kafka import FakeKafka, KafkaClients, TransactionalProducer, is_fatal
from kafeed.kafka.translate import translate_kafka_error
from kafeed.kafka.types import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition


def _fake(partitions: int = 2) -> FakeKafka:
    fake = FakeKafka()
    fake.create_topic("t", partitions)
    return fake


def test_the_fake_is_a_kafka_clients_object() -> None:
    assert isinstance(FakeKafka(), KafkaClients)


def test_produce_then_consume_from_an_assigned_offset() -> None:
    fake = _fake()
    producer = fake.producer()
    for i in range(5):
        producer.produce("t", b"v%d" % i, b"k", partition=1)
    consumer = fake.consumer({"group.id": "g"})
    consumer.assign([TopicPartition("t", 1, 2)])
    got = consumer.consume(num_messages=10, timeout=0)
    assert [(m.partition(), m.offset(), m.value()) for m in got] == [(1, 2, b"v2"), (1, 3, b"v3"),
                                                                     (1, 4, b"v4")]
    assert consumer.position([TopicPartition("t", 1)])[0].offset == 5
    consumer.seek(TopicPartition("t", 1, 0))
    assert consumer.consume(num_messages=1, timeout=0)[0].value() == b"v0"


def test_keyed_records_keep_their_partition() -> None:
    fake = _fake(4)
    producer = fake.producer()
    for _ in range(3):
        producer.produce("t", b"v", b"same-key")
    assert sum(len(fake.records("t", p)) == 3 for p in range(4)) == 1


def test_read_committed_sees_a_transaction_only_once_it_commits() -> None:
    fake = _fake(1)
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    assert isinstance(producer, TransactionalProducer)  # the real one, over a fake client
    producer.init()
    producer.begin()
    producer.produce("t", b"a", partition=0)
    consumer = fake.read_committed_consumer({"group.id": "g", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("t", 0, OFFSET_BEGINNING)])
    assert consumer.consume(num_messages=10, timeout=0) == []
    producer.commit()
    assert [m.value() for m in consumer.consume(num_messages=10, timeout=0)] == [b"a"]


def test_an_aborted_transaction_is_skipped_and_its_marker_takes_an_offset() -> None:
    fake = _fake(1)
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    producer.init()
    producer.begin()
    producer.produce("t", b"gone", partition=0)
    producer.abort()
    producer.begin()
    producer.produce("t", b"kept", partition=0)
    producer.commit()
    assert fake.records("t", 0) == [(2, None, b"kept")]  # 0: aborted record, 1: its abort marker
    assert fake.read_to_end("t")[0].offset() == 2


def test_offsets_sent_in_a_transaction_commit_with_it() -> None:
    fake = _fake(1)
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    producer.init()
    producer.begin()
    producer.send_offsets({("t", 0): 7}, "g")
    consumer = fake.consumer({"group.id": "g"})
    assert consumer.committed([TopicPartition("t", 0)])[0].offset < 0
    producer.commit()
    assert consumer.committed([TopicPartition("t", 0)])[0].offset == 7


def test_a_new_instance_of_a_transactional_id_fences_the_old_and_aborts_its_transaction() -> None:
    fake = _fake(1)
    old = fake.transactional_producer(transactional_id="tx", stage="test")
    old.init()
    old.begin()
    old.produce("t", b"left open", partition=0)
    new = fake.transactional_producer(transactional_id="tx", stage="test")
    new.init()
    assert fake.records("t", 0) == []
    with pytest.raises(KafkaOperationError) as caught:
        old.commit()
    assert is_fatal(caught.value) and caught.value.code == KafkaError._FENCED


def test_an_injected_abortable_commit_error_is_recovered_by_the_real_producer() -> None:
    fake = _fake(1)
    fake.fail("commit_transaction", KafkaError._STATE, txn_requires_abort=True)
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    producer.init()
    producer.begin()
    producer.produce("t", b"x", partition=0)
    with pytest.raises(KafkaOperationError) as caught:
        producer.commit()
    assert producer.recover(caught.value) is False  # aborted, not rebuilt
    producer.begin()
    producer.produce("t", b"y", partition=0)
    producer.commit()
    assert [v for _, _, v in fake.records("t", 0)] == [b"y"]


def test_read_to_end_reads_every_partition_to_the_end_it_had() -> None:
    fake = _fake(3)
    producer = fake.producer()
    for p in (0, 2):
        for i in range(4):
            producer.produce("t", b"%d-%d" % (p, i), partition=p)
    got = fake.read_to_end("t")
    assert sorted(m.value() for m in got) == sorted(b"%d-%d" % (p, i) for p in (0, 2) for i in range(4))


def test_read_to_end_stops_below_an_open_transaction() -> None:
    fake = _fake(2)
    fake.producer().produce("t", b"done", partition=0)
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    producer.init()
    producer.begin()
    producer.produce("t", b"open", partition=1)
    # A read_committed consumer's end is the last stable offset, as on the broker.
    assert [m.value() for m in fake.read_to_end("t", timeout_s=0.3)] == [b"done"]
    producer.commit()
    assert sorted(m.value() for m in fake.read_to_end("t")) == [b"done", b"open"]


def test_a_read_fails_naming_what_is_left_and_never_returns_part() -> None:
    fake = _fake(2)
    fake.producer().produce("t", b"done", partition=0)
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    producer.init()
    producer.begin()
    producer.produce("t", b"open", partition=1)  # an open transaction holds partition 1 back
    with fake.reader() as reader, pytest.raises(ReadIncomplete) as caught:
        reader.read("t", {0: (0, 1), 1: (0, 1)}, timeout_s=0.3)
    assert "partition 1 (at 0 of 1)" in caught.value.message
    assert caught.value.hint


def test_read_to_end_of_a_missing_topic_is_a_topic_error() -> None:
    with pytest.raises(TopicError, match="'nope' does not exist"):
        FakeKafka().read_to_end("nope")


def test_an_authorization_error_ends_a_read_at_once() -> None:
    fake = _fake(1)
    fake.producer().produce("t", b"x", partition=0)
    fake.fail("consume", KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed")
    with pytest.raises(KafkaOperationError, match="not allowed"):
        fake.read_to_end("t")


def test_translate_keeps_the_code_and_tells_transport_failures_apart() -> None:
    down = translate_kafka_error(KafkaException(KafkaError(KafkaError._TRANSPORT, "refused")),
                                 action="list topics")
    assert isinstance(down, BrokerUnavailable) and down.code == KafkaError._TRANSPORT
    refused = translate_kafka_error(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "no."),
                                    action="read 't'", kind=TopicError)
    assert isinstance(refused, TopicError) and refused.message == "Could not read 't': no."


def test_share_consumers_split_the_records_and_a_release_hands_one_out_again() -> None:
    from kafeed.kafka.types import AcknowledgeType

    fake = _fake(2)
    producer = fake.producer()
    for i in range(4):
        producer.produce("t", b"%d" % i, partition=i % 2)
    first = fake.share_consumer({"group.id": "s", "max.poll.records": 3})
    second = fake.share_consumer({"group.id": "s"})
    first.subscribe(["t"])
    second.subscribe(["t"])
    got = first.poll(0)
    rest = second.poll(0)
    assert len(got) == 3 and len(rest) == 1  # each record locked to one member
    for msg in got[:2]:
        first.acknowledge(msg, AcknowledgeType.ACCEPT)
    first.acknowledge(got[2], AcknowledgeType.RELEASE)
    again = second.poll(0)
    assert [m.offset() for m in again] == [got[2].offset()]
    second.close()  # unacknowledged: both of second's records go back
    assert len(first.poll(0)) == 2


def test_the_admin_creates_topics_with_configs_and_answers_describe() -> None:
    from kafeed.kafka.types import ConfigResource, NewTopic, OffsetSpec, TopicPartition

    fake = FakeKafka()
    admin = fake.admin()
    admin.create_topics([NewTopic("c", num_partitions=3, config={"cleanup.policy": "compact"})])["c"].result()
    assert sorted(admin.list_topics("c").topics["c"].partitions) == [0, 1, 2]
    res = ConfigResource(ConfigResource.Type.TOPIC, "c")
    assert admin.describe_configs([res])[res].result()["cleanup.policy"].value == "compact"
    with pytest.raises(TopicExists, match=r"^Could not create topic 'c': ") as exists:
        admin.create_topics([NewTopic("c", num_partitions=1)])["c"].result()
    assert isinstance(exists.value.__cause__, KafkaException)
    fake.producer().produce("c", b"x", partition=2)
    ends = admin.list_offsets({TopicPartition("c", 2): OffsetSpec.latest()})
    assert [f.result().offset for f in ends.values()] == [1]


def test_a_stalled_consume_returns_nothing_and_the_next_one_goes_on() -> None:
    fake = _fake(1)
    fake.producer().produce("t", b"x", partition=0)
    consumer = fake.consumer({"group.id": "g"})
    consumer.assign([TopicPartition("t", 0, 0)])
    fake.stall("consume", nth=(1,))
    assert consumer.consume(num_messages=5, timeout=5) == []  # at once, not after the timeout
    assert [m.value() for m in consumer.consume(num_messages=5, timeout=0)] == [b"x"]


def test_deletions_are_logged_with_the_transactions_committed_by_then() -> None:
    fake = _fake(1)
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    producer.init()
    producer.begin()
    producer.produce("t", b"a", partition=0)
    producer.send_offsets({("t", 0): 1}, "g")
    producer.commit()
    fake.admin().delete_records([TopicPartition("t", 0, 1)])
    assert fake.transactions == [{("t", 0): 1}]
    assert fake.deletions == [("t", {0: 1}, 1)]
    assert fake.records("t", 0) == []


def test_a_client_that_cannot_be_built_is_one_kafeed_sentence() -> None:
    from kafeed.config import ConnectionSettings

    clients = KafkaClients(ConnectionSettings(bootstrap="localhost:1"))
    with pytest.raises(KafkaOperationError, match=r"^Could not create a consumer: .*no\.such\.property"):
        clients.consumer({"group.id": "g", "no.such.property": 1})
    built = clients.read_committed_consumer({"group.id": "g"}, stage="prepare")
    built.close()


def test_group_positions_asks_again_while_the_coordinator_moves() -> None:
    from kafeed.kafka import group_positions

    fake = _fake(2)
    fake.groups["g"] = {("t", 0): 5}
    fake.fail("committed", KafkaError.NOT_COORDINATOR, "Broker: Not coordinator")
    consumer = fake.consumer({"group.id": "g"})
    assert group_positions(consumer, "t", [0, 1], timeout=5) == {0: 5, 1: None}
    fake.fail("committed", KafkaError.GROUP_AUTHORIZATION_FAILED, "denied")
    with pytest.raises(KafkaOperationError, match="denied"):
        group_positions(consumer, "t", [0], timeout=5)


def test_list_offsets_asks_again_while_leadership_moves_and_stops_on_a_final_error() -> None:
    from kafeed.kafka import list_offsets

    fake = _fake(2)
    for i in range(3):
        fake.producer().produce("t", b"%d" % i, partition=1)
    admin = fake.admin()
    fake.fail("list_offsets", KafkaError.NOT_LEADER_FOR_PARTITION, "Broker: Not leader for partition")
    fake.fail("list_offsets", KafkaError.LEADER_NOT_AVAILABLE, "Broker: Leader not available", nth=2)
    assert list_offsets(admin, [("t", 0), ("t", 1)], timeout=5) == {("t", 0): 0, ("t", 1): 3}
    fake.fail("list_offsets", KafkaError.TOPIC_AUTHORIZATION_FAILED, "denied")
    with pytest.raises(KafkaOperationError, match=r"^Could not read the ends: denied"):
        list_offsets(admin, [("t", 0)], timeout=5, action="read the ends")  # asked again, it would pass


def test_list_offsets_gives_up_on_a_transient_error_at_its_deadline() -> None:
    from kafeed.kafka import list_offsets

    fake = _fake(1)
    for n in range(1, 40):
        fake.fail("list_offsets", KafkaError.NOT_LEADER_FOR_PARTITION, "Broker: Not leader", nth=n)
    with pytest.raises(KafkaOperationError, match="Not leader"):
        list_offsets(fake.admin(), [("t", 0)], timeout=0.5)


def test_deleted_records_move_the_log_start_and_list_offsets_follows_the_isolation_level() -> None:
    from kafeed.kafka.types import IsolationLevel, OffsetSpec

    fake = _fake(1)
    for i in range(4):
        fake.producer().produce("t", b"%d" % i, partition=0)
    admin = fake.admin()
    admin.delete_records([TopicPartition("t", 0, 3)])
    tp = TopicPartition("t", 0)
    assert fake.consumer({"group.id": "g"}).get_watermark_offsets(tp) == (3, 4)
    assert admin.list_offsets({tp: OffsetSpec.earliest()})[tp].result().offset == 3
    producer = fake.transactional_producer(transactional_id="tx", stage="test")
    producer.init()
    producer.begin()
    producer.produce("t", b"open", partition=0)
    assert admin.list_offsets({tp: OffsetSpec.latest()})[tp].result().offset == 5
    committed = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)
    assert committed[tp].result().offset == 4
