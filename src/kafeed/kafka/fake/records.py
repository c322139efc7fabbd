"""What the fake cluster stores and hands out: records, transactions, messages, metadata."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Headers = list[tuple[str, bytes]]


@dataclass
class Stored:
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers | None
    timestamp: int
    txn: Txn | None = None  # None: not transactional
    marker: bool = False  # a transaction's commit/abort marker: takes an offset, never delivered


@dataclass
class Txn:
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
class Meta:
    """Cluster metadata as ``list_topics`` returns it (one broker, id 0)."""

    topics: dict[str, Any]
    cluster_id: str = "fake-cluster"
    brokers: dict[int, Any] = field(default_factory=lambda: {0: "fake-broker:0"})


@dataclass
class TopicMeta:
    topic: str
    partitions: dict[int, Any]
    error: Any = None


@dataclass
class PartitionMeta:
    id: int
    leader: int = 0
    replicas: list[int] = field(default_factory=lambda: [0])
    isrs: list[int] = field(default_factory=lambda: [0])


def kafka_exception(code_name: str, reason: str, **flags: bool) -> Exception:
    from confluent_kafka import KafkaError, KafkaException

    exc: Exception = KafkaException(KafkaError(getattr(KafkaError, code_name), reason, **flags))
    return exc


