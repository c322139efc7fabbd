"""FakeKafka: the in-memory cluster and the KafkaClients methods that build clients on it."""

from __future__ import annotations

import threading
import time
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.kafka.admin import Admin
from kafeed.kafka.consumer import Consumer, ShareConsumer
from kafeed.kafka.fake.admin import FakeAdmin
from kafeed.kafka.fake.consumer import FakeConsumer
from kafeed.kafka.fake.producer import FakeProducer, FakeTransactionalProducer
from kafeed.kafka.fake.records import Headers, Meta, PartitionMeta, Stored, TopicMeta, Txn, kafka_exception
from kafeed.kafka.fake.share import FakeShareConsumer
from kafeed.kafka.kafka_clients import KafkaClients, consumer_name
from kafeed.kafka.producer import Producer, TransactionalProducer


class FakeKafka(KafkaClients):
    """An in-memory cluster behind the :class:`~kafeed.kafka.KafkaClients` methods.

    ``topics[name][partition]`` is a partition's log; ``groups[group]`` a group's committed
    offsets; ``configs[name]`` a topic's configs; ``transactions`` the offsets each committed
    transaction sent, in commit order; ``deletions`` every ``delete_records`` request as
    ``(topic, {partition: offset}, transactions committed by then)``. Every change notifies
    ``changed``, which blocked ``consume``/``poll`` calls wait on.
    """

    def __init__(self, connection: ConnectionSettings | None = None) -> None:
        super().__init__(connection or ConnectionSettings())
        self.topics: dict[str, list[list[Stored]]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.groups: dict[str, dict[tuple[str, int], int]] = {}
        self.group_configs: dict[str, dict[str, str]] = {}
        self.share_acked: dict[str, set[tuple[str, int, int]]] = {}
        self.share_locked: dict[str, dict[tuple[str, int, int], object]] = {}
        self.transactions: list[dict[tuple[str, int], int]] = []
        self.deletions: list[tuple[str, dict[int, int], int]] = []
        self.log_start: dict[tuple[str, int], int] = {}  # raised by delete_records
        self.changed = threading.Condition()
        self._faults: dict[str, list[Any]] = {}
        self._stalls: dict[str, list[bool]] = {}
        self._transactional: dict[str, FakeProducer] = {}

    # -- the cluster ---------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        with self.changed:
            if name in self.topics:
                raise TopicError(f"Topic {name!r} already exists.")
            self.topics[name] = [[] for _ in range(partitions)]
            self.configs[name] = dict(configs or {})

    def records(self, topic: str, partition: int) -> list[tuple[int, bytes | None, bytes | None]]:
        """(offset, key, value) of the committed records of a partition (what read_committed sees)."""
        with self.changed:
            return [(r.offset, r.key, r.value) for r in self.log(topic, partition)
                    if not r.marker and (r.txn is None or r.txn.state == "committed")]

    def fail(self, operation: str, code: int, reason: str = "injected", *, nth: int = 1,
             **flags: bool) -> None:
        """Make the ``nth`` next call of ``operation`` (a client method name such as
        ``"commit_transaction"``) raise ``KafkaException(KafkaError(code, reason, **flags))``."""
        from confluent_kafka import KafkaError

        slots = self._faults.setdefault(operation, [])
        slots.extend([None] * (nth - len(slots)))
        slots[nth - 1] = KafkaError(code, reason, **flags)

    def stall(self, operation: str, *, nth: Sequence[int]) -> None:
        """Make the ``nth`` next calls (1 = the next) of a read (``"consume"``, ``"poll"``) return
        nothing at once, as when the input is idle for a while."""
        slots = self._stalls.setdefault(operation, [])
        slots.extend([False] * (max(nth) - len(slots)))
        for n in nth:
            slots[n - 1] = True

    def stalled(self, operation: str) -> bool:
        """Whether this call of ``operation`` is one :meth:`stall` named."""
        slots = self._stalls.get(operation)
        return slots.pop(0) if slots else False

    def check(self, operation: str) -> None:
        """Raise the error :meth:`fail` set for this call of ``operation``, if any."""
        from confluent_kafka import KafkaException

        slots = self._faults.get(operation)
        if slots:
            err = slots.pop(0)
            if err is not None:
                raise KafkaException(err)

    def log(self, topic: str, partition: int) -> list[Stored]:
        return self.topics[topic][partition]

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, high watermark): the first offset kept and the next one to write."""
        return self.log_start.get((topic, partition), 0), len(self.log(topic, partition))

    def stable(self, topic: str, partition: int) -> int:
        """The last stable offset: below the first record of a transaction still open."""
        for r in self.log(topic, partition):
            if r.txn is not None and r.txn.state == "open":
                return r.offset
        return len(self.log(topic, partition))

    def append(self, topic: str, partition: int, key: bytes | None, value: bytes | None,
               headers: Headers | None, txn: Txn | None) -> tuple[int, int]:
        """Append a record; its (partition, offset). Partition -1: by the key's hash."""
        if topic not in self.topics:
            raise kafka_exception("_UNKNOWN_TOPIC", f"Unknown topic {topic}")
        parts = self.topics[topic]
        if partition < 0:
            partition = zlib.crc32(key) % len(parts) if key is not None else 0
        log = parts[partition]
        log.append(Stored(len(log), key, value, headers, int(time.time() * 1000), txn))
        return partition, len(log) - 1

    def metadata(self, topic: str | None) -> Meta:
        from confluent_kafka import KafkaError

        found = {}
        for name in [topic] if topic is not None else list(self.topics):
            if name in self.topics:
                found[name] = TopicMeta(name, {p: PartitionMeta(p) for p in range(len(self.topics[name]))})
            else:
                found[name] = TopicMeta(name, {}, KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
        return Meta(found)

    # -- the clients ---------------------------------------------------------------------------

    def consumer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Consumer:
        return Consumer(FakeConsumer(self, dict(extra or {})), what=consumer_name(extra or {}))

    def share_consumer(self, extra: Mapping[str, Any] | None = None) -> ShareConsumer:
        return ShareConsumer(FakeShareConsumer(self, dict(extra or {})))

    def producer(self, extra: Mapping[str, Any] | None = None, *, stage: str | None = None) -> Producer:
        return Producer(FakeProducer(self, dict(extra or {})))

    def transactional_producer(self, *, transactional_id: str, stage: str,
                               config: Mapping[str, Any] | None = None,
                               timeout_s: float = 60.0) -> TransactionalProducer:
        return FakeTransactionalProducer(self, transactional_id=transactional_id, stage=stage,
                                         config=config, timeout_s=timeout_s)

    def admin(self) -> Admin:
        return Admin(FakeAdmin(self))

    def fence(self, transactional_id: str, producer: FakeProducer) -> None:
        """``producer`` is now the one instance of ``transactional_id``: fence the previous one."""
        old = self._transactional.get(transactional_id)
        if old is not None and old is not producer:
            old.fenced()
        self._transactional[transactional_id] = producer
