"""What a transactional write says when records were not delivered: librdkafka's sentence for
an error, the failed delivery reports, and one sentence for a transaction the cluster did not
acknowledge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafeed.errors import KafkaOperationError
from kafeed.kafka.translate import kafka_error


def error_text(exc: BaseException) -> str:
    """librdkafka's own sentence for a ``KafkaException`` (not the ``KafkaError{...}`` repr)."""
    err = kafka_error(exc)
    return str(err.str()) if err is not None else str(exc)


@dataclass(frozen=True)
class DeliveryFailure:
    """A record the cluster did not acknowledge: its topic and librdkafka's error."""

    topic: str
    code: int
    reason: str


def _why_undelivered(code: int | None, reason: str, timeout_s: float) -> str:
    from confluent_kafka import KafkaError

    if code is None or code == KafkaError._MSG_TIMED_OUT:
        return f"no broker acknowledged them within {timeout_s:g} s"
    if code in (KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return "fewer replicas are in sync than the topic's min.insync.replicas"
    if code == KafkaError.KAFKA_STORAGE_ERROR:
        return "a broker could not write them to its log dir (a full or failing disk)"
    return reason


def undelivered_error(failures: Sequence[DeliveryFailure], left: int, *, timeout_s: float,
                      unreachable: Sequence[str] = (), hint: str | None = None) -> KafkaOperationError:
    """One sentence for records of a transaction that the cluster never acknowledged.

    ``failures`` are the delivery reports that came back with an error, ``left`` the records
    still waiting when the flush gave up, ``unreachable`` the brokers the client last saw down
    (e.g. ``"node 2 (127.0.0.1:9094)"``): a full disk stops a broker, and the client only sees
    the broker go away.
    """
    count = len(failures) + left
    first = failures[0] if failures else None
    topics = sorted({f.topic for f in failures})
    topics = [t for t in topics if not t.startswith("__")] or topics  # kafeed's own markers: noise
    where = f" to {', '.join(repr(t) for t in topics)}" if topics else ""
    why = _why_undelivered(None if first is None else first.code, "" if first is None else first.reason,
                           timeout_s)
    if unreachable:
        why += f"; {'brokers' if len(unreachable) > 1 else 'broker'} {', '.join(unreachable)} unreachable"
    return KafkaOperationError(
        f"{count:,} record(s){where} were not acknowledged, so the transaction was aborted: {why}.",
        hint=hint, code=None if first is None else first.code)


def is_fatal(exc: BaseException) -> bool:
    """True when the producer cannot go on (e.g. fenced by a newer instance with its id)."""
    err = kafka_error(exc)
    return err is not None and bool(err.fatal())
