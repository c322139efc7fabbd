"""The producers: the one transactional producer, shared by ingest and the stream core, and
:class:`Producer`, a plain producer whose calls raise kafeed's errors.

Idempotent (implied by ``transactional.id``), ``acks=all``, delivery reports for
errors only. It owns the things every transactional writer needs once: the
BufferError retry loop (a full local queue waits for deliveries to drain),
begin / send offsets / commit / abort with retries of retriable errors, and
recovery after a failed transaction (abort, or rebuild the producer when the
error is fatal or the abort itself fails). Commits, aborts, retries and failed
deliveries count in :mod:`kafeed.telemetry.metrics` under the ``stage`` label.

Errors from librdkafka leave translated (:mod:`kafeed.kafka.translate`): a
:class:`~kafeed.errors.KafeedError` with librdkafka's ``code`` and the ``KafkaException`` as
its cause. After a failed transaction the caller recovers
(:meth:`TransactionalProducer.recover`, which reads that cause) or gives up with the error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, wait
from functools import partial
from operator import length_hint
from typing import Any, TypeVar

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.kafka.clients import client_config
from kafeed.kafka.delivery import DeliveryFailure, is_fatal
from kafeed.kafka.translate import kafka_error, raise_translated, translate_kafka_error
from kafeed.telemetry import metrics as m

log = logging.getLogger("kafeed")

T = TypeVar("T")
Headers = list[tuple[str, bytes]]
MAX_ATTEMPTS = 5
#: How long past its own timeout send_offsets_to_transaction may block before the client is
#: given up as stuck (see TransactionalProducer.send_offsets).
STUCK_AFTER_S = 5.0
#: Bytes of a topic's max.message.bytes kept free for key, headers and record-batch framing.
RECORD_OVERHEAD = 4096


class TransactionalProducer:
    """One ``transactional.id``; :meth:`recover` rebuilds the client when it has to."""

    def __init__(self, connection: ConnectionSettings, *, transactional_id: str, stage: str,
                 config: Mapping[str, Any] | None = None, timeout_s: float = 60.0) -> None:
        self.transactional_id = transactional_id
        self.stage = stage
        self.timeout_s = timeout_s
        self.delivery_errors: list[DeliveryFailure] = []
        self.in_transaction = False
        self.rebuilds = 0
        self._conf = client_config(connection, {
            "transactional.id": transactional_id,
            "enable.idempotence": True,
            "acks": "all",
            "delivery.report.only.error": True,
            "on_delivery": self._on_delivery,
            **(config or {}),
        }, stage=stage)
        self._p = self._client()

    def _client(self) -> Any:
        from confluent_kafka import Producer

        return Producer(self._conf)

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.delivery_errors.append(DeliveryFailure(msg.topic(), err.code(), err.str()))
            m.PRODUCE_ERRORS.labels(stage=self.stage).inc()

    # -- transactions ---------------------------------------------------------------------------

    def init(self, timeout_s: float | None = None) -> None:
        """Register the id; aborts whatever a killed predecessor with the same id left open."""
        try:
            self._p.init_transactions(self.timeout_s if timeout_s is None else timeout_s)
        except Exception as exc:
            raise translate_kafka_error(
                exc, action=f"start transactions as {self.transactional_id!r}") from exc

    def begin(self) -> None:
        if not self.in_transaction:
            try:
                self._p.begin_transaction()
            except Exception as exc:
                raise_translated(exc, action=f"begin a transaction as {self.transactional_id!r}")
            self.in_transaction = True

    def send_offsets(self, positions: Mapping[tuple[str, int], int], group_metadata: Any) -> None:
        """Add input positions (next offset to read) to the open transaction (KIP-447 fencing)."""
        from confluent_kafka import TopicPartition

        tps = [TopicPartition(t, p, off) for (t, p), off in positions.items()]
        self._retrying("send the input offsets to the transaction", lambda: self._unless_stuck(
            "send_offsets_to_transaction",
            lambda: self._p.send_offsets_to_transaction(tps, group_metadata, self.timeout_s)))

    def _unless_stuck(self, what: str, call: Callable[[], T]) -> T:
        """``call`` on a thread of its own, given up ``STUCK_AFTER_S`` past ``timeout_s``.

        librdkafka sends the offsets to the group coordinator it cached. When a broker restart
        made it drop that broker (re-bootstrap), the cached handle never reconnects and the call
        ignores its timeout: it blocks for ever (librdkafka issues 5456, 5511). The offsets are
        not committed then, so giving up is safe: the error is fatal, :meth:`recover` builds a
        new client, whose ``init_transactions`` fences the stuck one and aborts its transaction.
        The stuck thread is a daemon and keeps the old client alive, unused, until the exit.
        """
        future: Future[T] = Future()

        def run() -> None:
            try:
                future.set_result(call())
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, name=f"kafeed-{what}", daemon=True).start()
        bound = self.timeout_s + STUCK_AFTER_S
        if not wait([future], timeout=bound).done:
            from confluent_kafka import KafkaError, KafkaException

            raise KafkaException(KafkaError(
                KafkaError._TIMED_OUT, f"{what} did not return within {bound:g} s; the producer is "
                "given up as stuck and rebuilt", fatal=True))
        return future.result()

    def commit(self) -> None:
        self._retrying("commit the transaction", lambda: self._p.commit_transaction(self.timeout_s))
        self.in_transaction = False
        m.TRANSACTIONS.labels(stage=self.stage, result="commit").inc()

    def abort(self) -> None:
        """Abort the open transaction, if any (raises a kafeed error when that fails)."""
        self.delivery_errors.clear()
        if not self.in_transaction:
            return
        self.in_transaction = False
        try:
            self._p.abort_transaction(self.timeout_s)
        except Exception as exc:
            raise_translated(exc, action="abort the transaction")
        m.TRANSACTIONS.labels(stage=self.stage, result="abort").inc()

    def recover(self, exc: BaseException) -> bool:
        """Undo a failed transaction: abort it, or rebuild the client when that is impossible.

        Returns True when the producer was rebuilt (fatal error, or the abort failed).
        """
        fatal = is_fatal(exc)
        if not fatal:
            try:
                self.abort()
            except KafeedError as abort_exc:
                log.warning("abort failed (%s); rebuilding the producer", abort_exc)
                fatal = True
        self.in_transaction = False
        self.delivery_errors.clear()
        if fatal:
            m.TRANSACTIONS.labels(stage=self.stage, result="abort").inc()
            log.warning("producer failed fatally (%s); rebuilding it", exc)
            self._p = None
            self._p = self._client()
            self.init()
            self.rebuilds += 1
        return fatal

    def _retrying(self, what: str, fn: Callable[[], T]) -> T:
        """``fn`` again while its error is retriable (and needs no abort), then translated:
        ``what`` completes "Could not ..."."""
        from confluent_kafka import KafkaException

        for attempt in range(MAX_ATTEMPTS):
            try:
                return fn()
            except KafkaException as exc:
                err = kafka_error(exc)
                if (err is not None and err.retriable() and not err.txn_requires_abort()
                        and attempt + 1 < MAX_ATTEMPTS):
                    log.info("%s: retriable error %s, retrying", what, err)
                    m.PRODUCE_RETRIES.labels(stage=self.stage).inc()
                    time.sleep(0.2 * (attempt + 1))
                    continue
                raise translate_kafka_error(exc, action=what) from exc
        raise AssertionError("unreachable")

    # -- records --------------------------------------------------------------------------------

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None, *,
                partition: int = -1, headers: Headers | None = None) -> None:
        """Produce one record, waiting for deliveries to drain while the local queue is full."""
        while True:
            try:
                if headers:
                    self._p.produce(topic, value, key, partition=partition, headers=headers)
                else:
                    self._p.produce(topic, value, key, partition=partition)
                return
            except BufferError:
                self._p.poll(0.05)
            except Exception as exc:
                raise_translated(exc, action=f"write to {topic!r}")

    def produce_pairs(self, topic: str, records: Iterable[tuple[bytes | None, bytes]],
                      headers: Headers | None = None) -> None:
        """Produce ``(key, value)`` pairs: one tight loop, no Python frame per record."""
        produce = self._p.produce
        for key, value in records:
            try:
                if headers:
                    produce(topic, value, key, headers=headers)
                else:
                    produce(topic, value, key)
            except BufferError:
                self.produce(topic, value, key, headers=headers)
            except Exception as exc:
                raise_translated(exc, action=f"write to {topic!r}")

    def produce_many(self, records: Iterable[tuple[str, bytes | None, bytes | None,
                                                  Sequence[tuple[str, bytes]], int]]) -> None:
        """Produce ``(topic, key, value, headers, partition)`` tuples (partition -1: by key) in one loop."""
        produce = self._p.produce
        for topic, key, value, headers, partition in records:
            try:
                if headers:
                    produce(topic, value, key, partition, headers=list(headers))
                else:
                    produce(topic, value, key, partition)
            except BufferError:
                self.produce(topic, value, key, partition=partition, headers=list(headers) or None)
            except Exception as exc:
                raise_translated(exc, action=f"write to {topic!r}")

    def produce_columns(self, topic: str, keys: Sequence[bytes | None], values: Sequence[bytes | None],
                        headers: Sequence[Sequence[tuple[str, bytes | None]] | None] | None = None) -> None:
        """Produce ``values[i]`` with ``keys[i]`` to ``topic`` (partition by key), in order.

        Without headers the calls are made from C (``map``), with no Python step per
        record; a full local queue waits for that one record as :meth:`produce` does,
        then goes on with the next. A topic whose records have headers is produced in a Python loop.
        """
        if headers is not None and any(headers):
            for key, value, have in zip(keys, values, headers, strict=True):
                self.produce(topic, value, key, headers=list(have) if have else None)  # type: ignore[arg-type]
            return
        each = partial(self._p.produce, topic)
        pending, pending_keys = iter(values), iter(keys)
        while True:
            try:
                deque(map(each, pending, pending_keys), maxlen=0)
                return
            except BufferError:
                # The record that did not fit was taken from both iterators; place it waiting.
                i = len(values) - length_hint(pending) - 1
                self.produce(topic, values[i], keys[i])
            except Exception as exc:
                raise_translated(exc, action=f"write to {topic!r}")

    def poll(self, timeout: float = 0.0) -> None:
        self._p.poll(timeout)

    def flush(self, timeout: float) -> int:
        """Wait for deliveries; the number of records still undelivered."""
        try:
            return int(self._p.flush(timeout))
        except Exception as exc:
            raise_translated(exc, action="flush the producer")


class Producer:
    """A plain (not transactional) producer, librdkafka's or the fake's, whose calls raise
    kafeed errors; a full local queue is still ``BufferError``, for the caller to wait on."""

    __slots__ = ("_p",)

    def __init__(self, client: Any) -> None:
        self._p = client

    def produce(self, topic: str, value: bytes | None = None, key: bytes | str | None = None,
                partition: int = -1, on_delivery: Callable[[Any, Any], None] | None = None,
                headers: Sequence[tuple[str, bytes | None]] | None = None) -> None:
        kwargs: dict[str, Any] = {"partition": partition}
        if on_delivery is not None:
            kwargs["on_delivery"] = on_delivery
        if headers is not None:
            kwargs["headers"] = list(headers)
        try:
            self._p.produce(topic, value, key, **kwargs)
        except BufferError:
            raise
        except Exception as exc:
            raise_translated(exc, action=f"write to {topic!r}")

    def poll(self, timeout: float = 0.0) -> int:
        """Serve delivery reports; how many were served."""
        try:
            return int(self._p.poll(timeout))
        except Exception as exc:
            raise_translated(exc, action="serve delivery reports")

    def flush(self, timeout: float = -1) -> int:
        """Wait for deliveries; the number of records still undelivered."""
        try:
            return int(self._p.flush(timeout))
        except Exception as exc:
            raise_translated(exc, action="flush the producer")

    def __len__(self) -> int:
        return len(self._p)
