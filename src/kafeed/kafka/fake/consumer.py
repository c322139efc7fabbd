"""The fake cluster's consumer: confluent-kafka's ``Consumer`` in memory."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kafeed.kafka.fake.records import FakeMessage

if TYPE_CHECKING:
    from kafeed.kafka.fake.cluster import FakeKafka


class FakeConsumer:
    """One member per group: ``subscribe`` takes every partition, handed over (``on_assign``) at
    the first ``consume``. Reads committed records only unless ``isolation.level`` says
    otherwise; reports end of partition when ``enable.partition.eof`` is set. A paused partition
    hands out nothing until it is resumed, and keeps its position (as librdkafka's does: past
    what was handed out before the pause)."""

    def __init__(self, fake: FakeKafka, conf: Mapping[str, Any]) -> None:
        self._fake = fake
        self.group: str = str(conf.get("group.id", ""))
        self._committed_only = conf.get("isolation.level", "read_committed") == "read_committed"
        self._eof = bool(conf.get("enable.partition.eof", False))
        self._reset = str(conf.get("auto.offset.reset", "latest"))
        self._positions: dict[tuple[str, int], int] = {}
        self._told_eof: dict[tuple[str, int], int] = {}
        self._paused: set[tuple[str, int]] = set()
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

    def pause(self, partitions: Sequence[Any]) -> None:
        self._paused |= {(tp.topic, tp.partition) for tp in partitions}

    def resume(self, partitions: Sequence[Any]) -> None:
        self._paused -= {(tp.topic, tp.partition) for tp in partitions}

    def assignment(self) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(t, p) for t, p in self._positions]

    def _start(self, topic: str, partition: int, offset: int) -> int:
        if offset >= 0:
            return offset
        low, high = self._fake.watermarks(topic, partition)
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
        self._fake.check("consume")
        if self._fake.stalled("consume"):
            return []
        if self._pending_assign is not None:
            on_assign, tps = self._pending_assign
            self._pending_assign = None
            if on_assign is not None:
                on_assign(self, tps)
            # As confluent-kafka does: a callback that assigned nothing gets the partitions assigned.
            if not any((tp.topic, tp.partition) in self._positions for tp in tps):
                self.incremental_assign(tps)
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
            if (topic, p) in self._paused:
                continue
            log = self._fake.log(topic, p)
            end = self._fake.stable(topic, p) if self._committed_only else len(log)
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

        self._fake.check("committed")
        group = self._fake.groups.get(self.group, {})
        return [TopicPartition(tp.topic, tp.partition, group.get((tp.topic, tp.partition), OFFSET_INVALID))
                for tp in partitions]

    def commit(self, message: Any = None, offsets: Sequence[Any] | None = None,
               asynchronous: bool = True) -> None:
        self._fake.check("commit")
        if offsets is None:
            from confluent_kafka import TopicPartition

            offsets = [TopicPartition(t, p, o) for (t, p), o in self._positions.items()]
        self._fake.groups.setdefault(self.group, {}).update(
            {(tp.topic, tp.partition): tp.offset for tp in offsets})

    def get_watermark_offsets(self, partition: Any, timeout: float = -1,
                              cached: bool = False) -> tuple[int, int]:
        """(log start, high watermark); read_committed, as librdkafka asks: the last stable offset."""
        self._fake.check("get_watermark_offsets")
        low, high = self._fake.watermarks(partition.topic, partition.partition)
        return low, self._fake.stable(partition.topic, partition.partition) if self._committed_only else high

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self._fake.check("list_topics")
        return self._fake.metadata(topic)

    def consumer_group_metadata(self) -> str:
        return self.group

    def close(self) -> None:
        if self._on_revoke is not None and self._positions:
            self._on_revoke(self, self.assignment())
        self._positions = {}
        self.closed = True
