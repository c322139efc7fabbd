"""FakeKafka: the Kafka boundary in memory, for unit tests (as httpx ships ``MockTransport``).

``FakeKafka()`` has :class:`~kafeed.kafka.KafkaClients`'s methods; its clients keep
topics in this process: partitions, offsets, transactions that commit or abort (with
their control markers), read_committed visibility, consumer groups' committed offsets.
Consumers ``assign``/``subscribe``/``seek``/``position``/``committed``/``consume``;
:meth:`~kafeed.kafka.KafkaClients.read_to_end` runs the real implementation on them.
:meth:`FakeKafka.fail` makes the next call of an operation raise a librdkafka error.
Values are confluent-kafka's own types (``TopicPartition``, ``KafkaError``).
"""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.kafka.kafka_clients import KafkaClients
from kafeed.kafka.producer import TransactionalProducer

Headers = list[tuple[str, bytes]]


@dataclass
class _Stored:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp: int
    txn: _Txn | None = None  # None: not transactional
    marker: bool = False  # a transaction's commit/abort marker: takes an offset, never delivered


@dataclass
class _Txn:
    state: str = "open"  # open, committed, aborted
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    group: str | None = None


class FakeMessage:
    """A record (or an end-of-partition event) as a consumer returns it."""

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None = None,
                 value: bytes | None = None, headers: Headers | None = None, timestamp: int = 0,
                 error: Any = None) -> None:
        self._t, self._p, self._o = topic, partition, offset
        self._k, self._v, self._h, self._ts, self._e = key, value, headers, timestamp, error

    def error(self) -> Any:
        return self._e

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes | None:
        return self._v

    def headers(self) -> Headers | None:
        return self._h

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts)  # TIMESTAMP_CREATE_TIME

    def __len__(self) -> int:
        return len(self._v or b"")


@dataclass
class _Meta:
    topics: dict[str, Any]
    cluster_id: str = "fake-cluster"
    brokers: dict[int, Any] = field(default_factory=dict)


@dataclass
class _TopicMeta:
    topic: str
    partitions: dict[int, Any]
    error: Any = None


class FakeKafka(KafkaClients):
    """An in-memory cluster behind the :class:`~kafeed.kafka.KafkaClients` methods."""

    def __init__(self, connection: ConnectionSettings | None = None) -> None:
        super().__init__(connection or ConnectionSettings())
        self.topics: dict[str, list[list[_Stored]]] = {}
        self.groups: dict[str, dict[tuple[str, int], int]] = {}
        self._faults: dict[str, list[Any]] = {}
        self._fenced: dict[str, _FakeProducer] = {}
        self.changed = threading.Condition()

    # -- the cluster ---------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1) -> None:
        with self.changed:
            if name in self.topics:
                raise TopicError(f"Topic {name!r} already exists.")
            self.topics[name] = [[] for _ in range(partitions)]

    def records(self, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of the committed records of a partition (what read_committed sees)."""
        with self.changed:
            return [(r.offset, r.key, r.value) for r in self._log(topic, partition)
                    if not r.marker and (r.txn is None or r.txn.state == "committed")]

    def fail(self, operation: str, code: int, reason: str = "injected", *, nth: int = 1,
             **flags: bool) -> None:
        """Make the ``nth`` next call of ``operation`` (a client method name such as
        ``"commit_transaction"``) raise ``KafkaException(KafkaError(code, reason, **flags))``."""
        from confluent_kafka import KafkaError

        slots = self._faults.setdefault(operation, [])
        slots.extend([None] * (nth - len(slots)))
        slots[nth - 1] = KafkaError(code, reason, **flags)

    def _check(self, operation: str) -> None:
        from confluent_kafka import KafkaException

        slots = self._faults.get(operation)
        if slots:
            err = slots.pop(0)
            if err is not None:
                raise KafkaException(err)

    def _log(self, topic: str, partition: int) -> list[_Stored]:
        return self.topics[topic][partition]

    def _watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        return 0, len(self._log(topic, partition))

    def _stable(self, topic: str, partition: int) -> int:
        """The last stable offset: below the first record of a transaction still open."""
        for r in self._log(topic, partition):
            if r.txn is not None and r.txn.state == "open":
                return r.offset
        return len(self._log(topic, partition))

    def _append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
                headers: Headers | None, txn: _Txn | None) -> int:
        if topic not in self.topics:
            raise _kafka_exception("_UNKNOWN_TOPIC", f"Unknown topic {topic}")
        parts = self.topics[topic]
        if partition < 0:
            partition = zlib.crc32(key) % len(parts) if key is not None else 0
        log = parts[partition]
        log.append(_Stored(len(log), key, value, headers, int(time.time() * 1000), txn))
        return partition

    def _metadata(self, topic: str | None) -> _Meta:
        names = [topic] if topic is not None else list(self.topics)
        found = {}
        for name in names:
            if name in self.topics:
                found[name] = _TopicMeta(name, dict.fromkeys(range(len(self.topics[name]))))
            else:
                from confluent_kafka import KafkaError

                found[name] = _TopicMeta(name, {}, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        return _Meta(found)

    # -- the clients ---------------------------------------------------------------------------

    def consumer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Any:
        return FakeConsumer(self, dict(extra or {}))

    def share_consumer(self, extra: Mapping[str, Any] | None = None) -> Any:
        raise NotImplementedError("FakeKafka has no share groups")

    def producer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Any:
        return _FakeProducer(self, dict(extra or {}))

    def transactional_producer(self, *, transactional_id: str, stage: str,
                               config: Mapping[str, Any] | None = None,
                               timeout_s: float = 60.0) -> TransactionalProducer:
        return _FakeTransactionalProducer(self, transactional_id=transactional_id, stage=stage,
                                          config=config, timeout_s=timeout_s)

    def admin(self) -> Any:
        return FakeAdmin(self)


def _kafka_exception(code_name: str, reason: str, **flags: bool) -> Exception:
    from confluent_kafka import KafkaError, KafkaException

    exc: Exception = KafkaException(KafkaError(getattr(KafkaError, code_name), reason, **flags))
    return exc


class _FakeTransactionalProducer(TransactionalProducer):
    """The real transactional producer (retries, recovery) over a fake librdkafka producer."""

    def __init__(self, fake: FakeKafka, **kwargs: Any) -> None:
        self._fake = fake
        super().__init__(fake.connection, **kwargs)

    def _client(self) -> Any:
        return _FakeProducer(self._fake, self._conf)


class _FakeProducer:
    """confluent-kafka's ``Producer`` in memory; transactional when given ``transactional.id``."""

    def __init__(self, fake: FakeKafka, conf: Mapping[str, Any]) -> None:
        self._fake = fake
        self._id: str | None = conf.get("transactional.id")
        self._txn: _Txn | None = None
        self._fenced = False

    def _live(self) -> None:
        if self._fenced:
            raise _kafka_exception("_FENCED", "producer fenced by a newer instance", fatal=True)

    def init_transactions(self, timeout: float = 0) -> None:
        self._fake._check("init_transactions")
        with self._fake.changed:
            assert self._id is not None, "init_transactions needs transactional.id"
            old = self._fake._fenced.get(self._id)
            if old is not None and old is not self:
                old._fenced = True
                if old._txn is not None:
                    old._end(old._txn, "aborted")
            self._fake._fenced[self._id] = self

    def begin_transaction(self) -> None:
        self._live()
        self._fake._check("begin_transaction")
        self._txn = _Txn()

    def produce(self, topic: str, value: bytes | None = None, key: bytes | None = None,
                partition: int = -1, on_delivery: Callable[..., Any] | None = None, timestamp: int = 0,
                headers: Headers | None = None) -> None:
        self._live()
        self._fake._check("produce")
        with self._fake.changed:
            if self._id is not None and self._txn is None:
                raise _kafka_exception("_STATE", "produce outside a transaction")
            self._fake._append(topic, partition, key, value, list(headers) if headers else None, self._txn)
            self._fake.changed.notify_all()

    def send_offsets_to_transaction(self, positions: Sequence[Any], group_metadata: Any,
                                    timeout: float = 0) -> None:
        self._live()
        self._fake._check("send_offsets_to_transaction")
        assert self._txn is not None, "send_offsets_to_transaction outside a transaction"
        self._txn.group = str(group_metadata)
        self._txn.offsets.update({(tp.topic, tp.partition): tp.offset for tp in positions})

    def commit_transaction(self, timeout: float = 0) -> None:
        self._live()
        self._fake._check("commit_transaction")
        assert self._txn is not None, "commit_transaction outside a transaction"
        self._end(self._txn, "committed")

    def abort_transaction(self, timeout: float = 0) -> None:
        self._live()
        self._fake._check("abort_transaction")
        if self._txn is not None:
            self._end(self._txn, "aborted")

    def _end(self, txn: _Txn, state: str) -> None:
        with self._fake.changed:
            txn.state = state
            for parts in self._fake.topics.values():
                for log in parts:
                    if any(r.txn is txn for r in log):
                        log.append(_Stored(len(log), None, None, None, 0, txn, marker=True))
            if state == "committed" and txn.group is not None:
                self._fake.groups.setdefault(txn.group, {}).update(txn.offsets)
            self._txn = None
            self._fake.changed.notify_all()

    def poll(self, timeout: float = 0) -> int:
        return 0

    def flush(self, timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return 0


class FakeConsumer:
    """confluent-kafka's ``Consumer`` in memory (one member per group: subscribe takes every partition)."""

    def __init__(self, fake: FakeKafka, conf: Mapping[str, Any]) -> None:
        self._fake = fake
        self.group: str = str(conf.get("group.id", ""))
        self._committed_only = conf.get("isolation.level", "read_committed") == "read_committed"
        self._eof = bool(conf.get("enable.partition.eof", False))
        self._reset = str(conf.get("auto.offset.reset", "latest"))
        self._positions: dict[tuple[str, int], int] = {}
        self._told_eof: dict[tuple[str, int], int] = {}
        self._pending_assign: tuple[Callable[..., Any] | None, list[Any]] | None = None
        self._on_revoke: Callable[..., Any] | None = None
        self.closed = False

    # -- assignment ----------------------------------------------------------------------------

    def assign(self, partitions: Sequence[Any]) -> None:
        self._positions = {}
        self._told_eof = {}
        for tp in partitions:
            self._positions[(tp.topic, tp.partition)] = self._start(tp.topic, tp.partition, tp.offset)

    def subscribe(self, topics: Sequence[str], on_assign: Callable[..., Any] | None = None,
                  on_revoke: Callable[..., Any] | None = None, **_: Any) -> None:
        from confluent_kafka import OFFSET_INVALID, TopicPartition

        tps = [TopicPartition(t, p, OFFSET_INVALID) for t in topics
               for p in range(len(self._fake.topics.get(t, [])))]
        self._pending_assign = (on_assign, tps)
        self._on_revoke = on_revoke

    def incremental_assign(self, partitions: Sequence[Any]) -> None:
        for tp in partitions:
            self._positions[(tp.topic, tp.partition)] = self._start(tp.topic, tp.partition, tp.offset)

    def unassign(self) -> None:
        self._positions = {}

    def assignment(self) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(t, p) for t, p in self._positions]

    def _start(self, topic: str, partition: int, offset: int) -> int:
        if offset >= 0:
            return offset
        low, high = self._fake._watermarks(topic, partition)
        if offset == -2:  # OFFSET_BEGINNING
            return low
        if offset == -1:  # OFFSET_END
            return high
        committed = self._fake.groups.get(self.group, {}).get((topic, partition))
        if committed is not None:
            return committed
        return low if self._reset in ("earliest", "smallest", "beginning") else high

    # -- reading -------------------------------------------------------------------------------

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        self._fake._check("consume")
        if self._pending_assign is not None:
            on_assign, tps = self._pending_assign
            self._pending_assign = None
            if on_assign is not None:
                on_assign(self, tps)
            else:
                self.assign(tps)
        deadline = time.monotonic() + max(timeout, 0)
        with self._fake.changed:
            while True:
                out = self._take(num_messages)
                left = deadline - time.monotonic()
                if out or left <= 0:
                    return out
                self._fake.changed.wait(left)

    def poll(self, timeout: float = -1) -> Any:
        got = self.consume(1, timeout)
        return got[0] if got else None

    def _take(self, limit: int) -> list[Any]:
        from confluent_kafka import KafkaError

        out: list[Any] = []
        for (topic, p), pos in self._positions.items():
            log = self._fake._log(topic, p)
            end = self._fake._stable(topic, p) if self._committed_only else len(log)
            while pos < end and len(out) < limit:
                r = log[pos]
                pos += 1
                if r.marker or (self._committed_only and r.txn is not None and r.txn.state != "committed"):
                    continue
                out.append(FakeMessage(topic, p, r.offset, r.key, r.value, r.headers, r.timestamp))
            self._positions[(topic, p)] = pos
            if (self._eof and pos >= end and len(out) < limit
                    and self._told_eof.get((topic, p)) != pos):
                self._told_eof[(topic, p)] = pos
                out.append(FakeMessage(topic, p, pos, error=KafkaError(KafkaError._PARTITION_EOF)))
            if len(out) >= limit:
                break
        return out

    def seek(self, tp: Any) -> None:
        self._positions[(tp.topic, tp.partition)] = self._start(tp.topic, tp.partition, tp.offset)

    def position(self, partitions: Sequence[Any]) -> list[Any]:
        from confluent_kafka import OFFSET_INVALID, TopicPartition

        return [TopicPartition(tp.topic, tp.partition,
                               self._positions.get((tp.topic, tp.partition), OFFSET_INVALID))
                for tp in partitions]

    def committed(self, partitions: Sequence[Any], timeout: float = -1) -> list[Any]:
        from confluent_kafka import OFFSET_INVALID, TopicPartition

        group = self._fake.groups.get(self.group, {})
        return [TopicPartition(tp.topic, tp.partition, group.get((tp.topic, tp.partition), OFFSET_INVALID))
                for tp in partitions]

    def commit(self, message: Any = None, offsets: Sequence[Any] | None = None,
               asynchronous: bool = True) -> None:
        self._fake._check("commit")
        if offsets is None:
            offsets = [_tp(t, p, o) for (t, p), o in self._positions.items()]
        self._fake.groups.setdefault(self.group, {}).update(
            {(tp.topic, tp.partition): tp.offset for tp in offsets})

    def get_watermark_offsets(self, partition: Any, timeout: float = -1,
                              cached: bool = False) -> tuple[int, int]:
        self._fake._check("get_watermark_offsets")
        return self._fake._watermarks(partition.topic, partition.partition)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self._fake._check("list_topics")
        return self._fake._metadata(topic)

    def consumer_group_metadata(self) -> str:
        return self.group

    def close(self) -> None:
        if self._on_revoke is not None and self._positions:
            self._on_revoke(self, self.assignment())
        self._positions = {}
        self.closed = True


def _tp(topic: str, partition: int, offset: int) -> Any:
    from confluent_kafka import TopicPartition

    return TopicPartition(topic, partition, offset)


class FakeAdmin:
    """The admin calls kafeed makes, in memory: metadata, create and delete topics, delete records."""

    def __init__(self, fake: FakeKafka) -> None:
        self._fake = fake

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self._fake._check("list_topics")
        return self._fake._metadata(topic)

    def create_topics(self, new_topics: Sequence[Any], **_: Any) -> dict[str, Any]:
        from concurrent.futures import Future

        out: dict[str, Future[None]] = {}
        for new in new_topics:
            future: Future[None] = Future()
            try:
                self._fake.create_topic(new.topic, new.num_partitions)
                future.set_result(None)
            except TopicError:
                future.set_exception(_kafka_exception("TOPIC_ALREADY_EXISTS",
                                                      f"Topic '{new.topic}' already exists."))
            out[new.topic] = future
        return out

    def delete_records(self, partitions: Sequence[Any], **_: Any) -> dict[Any, Any]:
        """Records below each offset are gone: a read from before starts at the new low mark."""
        from concurrent.futures import Future

        out: dict[Any, Future[Any]] = {}
        with self._fake.changed:
            for tp in partitions:
                log = self._fake._log(tp.topic, tp.partition)
                for r in log[:tp.offset]:
                    r.key = r.value = None
                    r.marker = True
                future: Future[Any] = Future()
                future.set_result(tp)
                out[tp] = future
        return out
