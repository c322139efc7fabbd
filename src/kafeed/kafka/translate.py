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


def _kafka_error(exc: BaseException) -> Any:
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
    err = _kafka_error(exc)
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
