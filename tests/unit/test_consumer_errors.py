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
