"""librdkafka's errors into the :class:`~kafeed.errors.KafeedError` tree, in one place.

Every client :class:`~kafeed.kafka.KafkaClients` builds raises ``KafkaException``; what
leaves the boundary is a kafeed error with librdkafka's ``code`` kept on it.
"""

from __future__ import annotations

from typing import Any

from kafeed.errors import BrokerUnavailable, KafeedError, KafkaOperationError

# librdkafka's local codes for "no broker answered" (KafkaError._TRANSPORT, _ALL_BROKERS_DOWN,
# _TIMED_OUT, _RESOLVE), by name so this module loads without confluent_kafka.
_TRANSPORT = frozenset({"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE"})


def kafka_error(exc: BaseException | Any) -> Any:
    """The ``KafkaError`` a ``KafkaException`` carries, ``exc`` itself when it is one, else None."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, KafkaError):
        return exc
    return None


def translate_kafka_error(exc: BaseException | Any, *, action: str,
                          kind: type[KafkaOperationError] = KafkaOperationError) -> KafeedError:
    """Wrap a confluent-kafka exception (or its ``KafkaError``) as a kafeed error.

    ``action`` completes the sentence "could not ..." (e.g. ``"create topic 'raw'"``);
    errors that are not about reaching the cluster become ``kind``.
    """
    err = kafka_error(exc)
    if err is None:
        return kind(f"Could not {action}: {exc}.")
    code = err.code()
    reason = err.str().rstrip(".")  # some broker messages end in a period; the sentence adds one
    if err.name() in _TRANSPORT:
        return BrokerUnavailable(
            f"Could not {action}: no Kafka broker answered ({reason}).",
            hint="Check --bootstrap, or start a local one with `kafeed broker start`.",
            code=code,
        )
    return kind(f"Could not {action}: {reason}.", code=code)


def error_code(exc: BaseException | Any) -> int | None:
    """librdkafka's code of a ``KafkaException`` (or ``KafkaError``), None for anything else."""
    err = kafka_error(exc)
    return None if err is None else int(err.code())


def is_transient(exc: BaseException) -> bool:
    """An admin request that may succeed when sent again: retriable, or leadership still moving
    (as right after a topic is created or a broker is lost)."""
    from confluent_kafka import KafkaError

    err = kafka_error(exc)
    if err is None:
        return False
    return bool(err.retriable()) or err.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
    )


def is_no_answer(exc: BaseException) -> bool:
    """A request that failed only because no broker answered in time (transport, timeout)."""
    err = kafka_error(exc)
    return err is not None and err.name() in ("_TRANSPORT", "_TIMED_OUT")
