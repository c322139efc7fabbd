"""librdkafka's errors into the :class:`~kafeed.errors.KafeedError` tree, in one place.

librdkafka's clients raise ``KafkaException``; the typed clients :class:`~kafeed.kafka.KafkaClients`
builds (:mod:`kafeed.kafka.consumer`, :mod:`kafeed.kafka.admin`, :mod:`kafeed.kafka.producer`)
translate it here, so what leaves the boundary is a kafeed error with librdkafka's ``code``
kept on it (and the ``KafkaException`` as its ``__cause__``). The codes a caller branches on
have classes: no broker answered is :class:`~kafeed.errors.BrokerUnavailable`, an ACL refusal
:class:`~kafeed.errors.NotAuthorized`, a topic that exists or does not
:class:`~kafeed.errors.TopicExists` / :class:`~kafeed.errors.UnknownTopic`.
"""

from __future__ import annotations

from typing import Any, NoReturn

from kafeed.errors import (
    BrokerUnavailable,
    KafeedError,
    KafkaOperationError,
    NotAuthorized,
    TopicExists,
    UnknownTopic,
)

# librdkafka's local codes for "no broker answered" (KafkaError._TRANSPORT, _ALL_BROKERS_DOWN,
# _TIMED_OUT, _RESOLVE), by name so this module loads without confluent_kafka.
_TRANSPORT = frozenset({"_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE"})
_REFUSED = frozenset({"TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED",
                      "CLUSTER_AUTHORIZATION_FAILED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"})
_BY_NAME: dict[str, type[KafkaOperationError]] = {
    "TOPIC_ALREADY_EXISTS": TopicExists, "UNKNOWN_TOPIC_OR_PART": UnknownTopic,
    **dict.fromkeys(_REFUSED, NotAuthorized)}


def kafka_error(exc: BaseException | Any) -> Any:
    """The ``KafkaError`` a ``KafkaException`` carries, ``exc`` itself when it is one, the one
    behind a kafeed error translated from it, else None."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafeedError):
        exc = exc.__cause__
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    if isinstance(exc, KafkaError):
        return exc
    return None


def translate_kafka_error(exc: BaseException | Any, *, action: str,
                          kind: type[KafkaOperationError] = KafkaOperationError) -> KafeedError:
    """Wrap a confluent-kafka exception (or its ``KafkaError``) as a kafeed error.

    ``action`` completes the sentence "could not ..." (e.g. ``"create topic 'raw'"``);
    errors that are not about reaching the cluster become ``kind``, or the class their code
    has where that is a ``kind`` (:class:`~kafeed.errors.UnknownTopic` for a
    :class:`~kafeed.errors.TopicError`, :class:`~kafeed.errors.NotAuthorized` for a
    :class:`~kafeed.errors.KafkaOperationError`). A kafeed error translated before is worded
    again for ``action``.
    """
    err = kafka_error(exc)
    if err is None:
        if isinstance(exc, KafeedError):
            return exc
        return kind(f"Could not {action}: {exc}.")
    code = err.code()
    reason = err.str().rstrip(".")  # some broker messages end in a period; the sentence adds one
    if err.name() in _TRANSPORT:
        return BrokerUnavailable(
            f"Could not {action}: no Kafka broker answered ({reason}).",
            hint="Check --bootstrap, or start a local one with `kafeed broker start`.",
            code=code,
        )
    named = _BY_NAME.get(err.name())
    if named is not None and issubclass(named, kind):
        kind = named
    return kind(f"Could not {action}: {reason}.", code=code)


def raise_translated(exc: Exception, *, action: str,
                     kind: type[KafkaOperationError] = KafkaOperationError) -> NoReturn:
    """Raise ``exc`` as a kafeed error when it came from librdkafka, else as it is: a typed
    client's calls leave a programming error (a wrong argument, a closed client) alone."""
    if kafka_error(exc) is None or isinstance(exc, KafeedError):
        raise exc
    raise translate_kafka_error(exc, action=action, kind=kind) from exc


def error_code(exc: BaseException | Any) -> int | None:
    """librdkafka's code of a ``KafkaException`` (or ``KafkaError``), None for anything else."""
    err = kafka_error(exc)
    return None if err is None else int(err.code())


def is_transient(exc: BaseException) -> bool:
    """An admin request that may succeed when sent again: retriable, or leadership still moving
    (as right after a topic is created or a broker is lost: a partition's leader epoch not yet
    known to the broker asked, which librdkafka does not flag retriable, though Kafka's
    protocol does; seen reading a new changelog's offsets on a loaded machine)."""
    from confluent_kafka import KafkaError

    err = kafka_error(exc)
    if err is None:
        return False
    return bool(err.retriable()) or err.code() in (
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    )


def is_no_answer(exc: BaseException) -> bool:
    """A request that failed only because no broker answered in time (transport, timeout)."""
    err = kafka_error(exc)
    return err is not None and err.name() in ("_TRANSPORT", "_TIMED_OUT")


def refused_connection(exc: BaseException) -> bool:
    """A request that failed because the connection was made and then dropped
    (``_TRANSPORT``), as a TLS or SASL listener does to a plaintext client."""
    err = kafka_error(exc)
    return err is not None and err.name() == "_TRANSPORT"


def metadata_error(err: Any, *, action: str) -> KafeedError:
    """The error an entry of cluster metadata carries (a topic's ``.error``) as a kafeed
    error: :class:`~kafeed.errors.NotAuthorized` when ACLs hide it,
    :class:`~kafeed.errors.UnknownTopic` when it does not exist."""
    return translate_kafka_error(err, action=action)
