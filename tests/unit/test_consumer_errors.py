"""Which consumer errors end a run: authorization refusals and fatal errors, in one sentence."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from kafeed.errors import BrokerUnavailable, KafkaOperationError
from kafeed.kafka import final_consumer_error
from kafeed.stream import StreamSettings
from kafeed.stream.consume import consumer_error


@pytest.mark.parametrize("code", [KafkaError.GROUP_AUTHORIZATION_FAILED,
                                  KafkaError.TOPIC_AUTHORIZATION_FAILED])
def test_an_authorization_error_is_final_and_says_what_to_grant(code: int) -> None:
    failure = final_consumer_error(KafkaError(code), action="consume 'raw' in group 'g'")
    assert isinstance(failure, KafkaOperationError) and failure.code == code
    assert failure.message.startswith("Could not consume 'raw' in group 'g': ")
    assert "authorization failed" in failure.message.lower() and failure.message.count(".") == 1
    assert failure.hint is not None and "kafeed acl grant" in failure.hint


def test_transient_errors_are_retried_and_fatal_ones_are_final() -> None:
    assert final_consumer_error(KafkaError(KafkaError._TRANSPORT), action="consume 'raw'") is None
    assert final_consumer_error(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION), action="consume") is None
    fatal = final_consumer_error(KafkaError(KafkaError._FENCED, fatal=True), action="consume 'raw'")
    assert isinstance(fatal, KafkaOperationError) and not isinstance(fatal, BrokerUnavailable)


def test_the_stream_core_ends_its_run_on_a_group_authorization_error() -> None:
    settings = StreamSettings(inputs=("raw",), outputs=("out",), group="g", dlq_topic="raw.dlq")
    assert consumer_error(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION), settings) is False
    with pytest.raises(KafkaOperationError, match=r"Could not consume 'raw' in group 'g': .*uthorization"):
        consumer_error(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED), settings)


@pytest.mark.parametrize(("code", "event"), [(KafkaError._PARTITION_EOF, "end"),
                                             (KafkaError._AUTO_OFFSET_RESET, "reset"),
                                             (KafkaError._TRANSPORT, "retry"),
                                             (KafkaError.NOT_LEADER_FOR_PARTITION, "retry")])
def test_a_messages_error_is_read_as_an_event(code: int, event: str) -> None:
    from kafeed.kafka import message_event

    assert message_event(KafkaError(code), action="read 'raw'") == event


def test_a_messages_final_error_is_raised_in_one_sentence() -> None:
    from kafeed.errors import NotAuthorized
    from kafeed.kafka import message_event

    with pytest.raises(NotAuthorized, match=r"^Could not read 'raw' as bob: ") as caught:
        message_event(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), action="read 'raw' as bob")
    assert caught.value.code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "kafeed acl grant" in str(caught.value)
    with pytest.raises(KafkaOperationError):
        message_event(KafkaError(KafkaError._FENCED, fatal=True), action="read 'raw'")


def test_the_typed_clients_raise_kafeed_errors_with_librdkafkas_code_and_cause() -> None:
    from confluent_kafka import KafkaException, TopicPartition

    from kafeed.errors import NotAuthorized
    from kafeed.kafka import FakeKafka

    fake = FakeKafka()
    fake.create_topic("raw", 1)
    consumer = fake.consumer({"group.id": "g"})
    consumer.assign([TopicPartition("raw", 0, 0)])
    fake.fail("consume", KafkaError.GROUP_AUTHORIZATION_FAILED, "Group authorization failed")
    refused = r"^Could not consume as the consumer of group 'g': Group authorization failed\.$"
    with pytest.raises(NotAuthorized, match=refused) as caught:
        consumer.consume(num_messages=5, timeout=0)
    assert caught.value.code == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert isinstance(caught.value.__cause__, KafkaException)
    fake.fail("get_watermark_offsets", KafkaError._TRANSPORT, "Connection refused")
    with pytest.raises(BrokerUnavailable, match=r"^Could not read the watermarks of raw:0: no Kafka broker"):
        consumer.get_watermark_offsets(TopicPartition("raw", 0))
    with pytest.raises(AttributeError):  # not librdkafka's: a wrong argument is raised as it is
        consumer.assign([("raw", 0)])  # type: ignore[list-item]
    fake.fail("list_topics", KafkaError._TRANSPORT, "down")
    with pytest.raises(BrokerUnavailable, match=r"^Could not read cluster metadata: "):
        fake.admin().list_topics(timeout=1)


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
                                  KafkaError.NOT_LEADER_FOR_PARTITION])
def test_an_admin_request_is_sent_again_while_a_partitions_leader_epoch_settles(code: int) -> None:
    from confluent_kafka import KafkaException

    from kafeed.kafka.translate import is_transient

    # librdkafka does not flag these retriable; Kafka's protocol does (a new topic's leader
    # epoch not yet known to the broker asked: a prepare worker died of it under load).
    assert is_transient(KafkaException(KafkaError(code)))
    assert not is_transient(KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)))
