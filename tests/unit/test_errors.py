from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from kafeed.errors import BrokerUnavailable, KafeedError, KafkaOperationError, TopicError
from kafeed.kafka.translate import translate_kafka_error


def test_transport_errors_become_broker_unavailable() -> None:
    exc = KafkaException(KafkaError(KafkaError._TRANSPORT, "down"))
    err = translate_kafka_error(exc, action="list topics")
    assert isinstance(err, BrokerUnavailable)
    assert err.code == KafkaError._TRANSPORT
    assert err.message.startswith("Could not list topics")
    assert err.hint and "--bootstrap" in err.hint


def test_other_errors_keep_code_and_kind() -> None:
    exc = KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "exists"))
    err = translate_kafka_error(exc, action="create topic 't'", kind=TopicError)
    assert isinstance(err, TopicError) and isinstance(err, KafkaOperationError)
    assert err.code == KafkaError.TOPIC_ALREADY_EXISTS


def test_non_kafka_exception() -> None:
    err = translate_kafka_error(RuntimeError("boom"), action="x")
    assert isinstance(err, KafeedError) and "boom" in str(err)


def test_a_broker_reason_ending_in_a_period_gets_no_second_one() -> None:
    refused = KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    err = translate_kafka_error(refused, action="configure share group 'g'")
    assert err.message == "Could not configure share group 'g': Group authorization failed."
