"""Which errors a group consumer reports are final: the run ends on them instead of retrying.

librdkafka reports most consumer errors as events and keeps retrying (a broker away, a
leader moving), which is right for those. An authorization refusal does not heal by
retrying: a role that may not read the topic or join the group would otherwise retry for
as long as the run lasts. Fatal errors are final too.
"""

from __future__ import annotations

from typing import Any

from kafeed.errors import KafeedError, KafkaOperationError
from kafeed.kafka.translate import translate_kafka_error


def _authorization_codes() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                      KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                      KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})


def final_consumer_error(err: Any, *, action: str) -> KafeedError | None:
    """``err`` (a consumer's ``KafkaError``) as the error that ends the run, or None to go on.

    ``action`` completes "Could not ..." (e.g. ``"consume 'raw' in group 'g'"``).
    """
    if err.code() in _authorization_codes():
        failure = translate_kafka_error(err, action=action)
        failure.hint = ("Grant this principal Read on the topic and the consumer group "
                        "(`kafeed acl grant`), or run it as a role that has them.")
        return failure
    if err.fatal():
        return translate_kafka_error(err, action=action, kind=KafkaOperationError)
    return None
