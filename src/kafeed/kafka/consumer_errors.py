"""What an error a consumer hands out with a message means: the end of a partition, an offset
reset, a condition librdkafka retries itself, or an error that ends the run.

librdkafka reports most consumer errors as events and keeps retrying (a broker away, a
leader moving), which is right for those. An authorization refusal does not heal by
retrying: a role that may not read the topic or join the group would otherwise retry for
as long as the run lasts. Fatal errors are final too. :func:`message_event` reads a message's
error as Quix Streams' ``raise_for_msg_error`` does: it raises the final ones, so no caller
outside :mod:`kafeed.kafka` compares librdkafka's codes.
"""

from __future__ import annotations

from typing import Any, Literal

from kafeed.errors import KafeedError, KafkaOperationError
from kafeed.kafka.translate import translate_kafka_error

MessageEvent = Literal["end", "reset", "retry"]
"""``end``: the partition's end is reached (``enable.partition.eof``); ``reset``: the
position was out of range and reset (retention deleted what was to be read next); ``retry``:
an error librdkafka retries itself (log it, go on)."""

_HINT = ("Grant this principal Read on the topic and the consumer group (`kafeed acl grant`), "
         "or run it as a role that has them.")


def _codes() -> tuple[int, int, frozenset[int]]:
    from confluent_kafka import KafkaError

    return (KafkaError._PARTITION_EOF, KafkaError._AUTO_OFFSET_RESET,
            frozenset({KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED,
                       KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                       KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}))


def final_consumer_error(err: Any, *, action: str) -> KafeedError | None:
    """``err`` (a consumer's ``KafkaError``) as the error that ends the run, or None to go on.

    ``action`` completes "Could not ..." (e.g. ``"consume 'raw' in group 'g'"``).
    """
    if err.code() in _codes()[2]:
        failure = translate_kafka_error(err, action=action)
        failure.hint = _HINT
        return failure
    if err.fatal():
        return translate_kafka_error(err, action=action, kind=KafkaOperationError)
    return None


def message_event(err: Any, *, action: str) -> MessageEvent:
    """What ``err`` (``msg.error()`` of a consumed message, not None) means; raises the error
    that ends the run (:func:`final_consumer_error`) instead of returning it."""
    eof, reset, _ = _codes()
    code = err.code()
    if code == eof:
        return "end"
    if code == reset:
        return "reset"
    final = final_consumer_error(err, action=action)
    if final is not None:
        raise final
    return "retry"

