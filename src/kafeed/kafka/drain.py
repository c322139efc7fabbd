"""Drains: has every partition of a topic been processed to its end, whoever processed it?

A stage run with ``--until-caught-up`` stops only when :class:`Drain` says so
(ARCHITECTURE.md, "Drains"). A partition's end is its last stable offset (all a
read_committed reader can see) when the drain first checks; its position is where the
stage's committed work resumes, whoever did the work: the group's committed offset for
the stream core, the table's snapshot position for the archive. A position below the end
is still done when only transaction markers and aborted records lie between: a
read_committed probe from the position tells.

A partition held by another member moves on when that member commits, or, if the member
died, when the group's session timeout (:data:`SESSION_TIMEOUT_MS`, the same for every
stage) hands it to a live one. A drain that sees no partition move for ``stall_s``
(:data:`STALL_SESSIONS` session timeouts unless a stage sets it) fails with
:class:`~kafeed.errors.DrainIncomplete` naming the partitions left and why.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import DrainIncomplete, TopicError
from kafeed.kafka.clients import close_consumer
from kafeed.kafka.kafka_clients import KafkaClients
from kafeed.kafka.offsets import list_offsets
from kafeed.kafka.translate import error_code, translate_kafka_error

log = logging.getLogger("kafeed")

#: Every stage's consumer-group session timeout: a SIGKILLed member's partitions go to the
#: others this long after it died (librdkafka's default is 45 s).
SESSION_TIMEOUT_MS = 10_000
#: A drain fails after this many session timeouts without any partition moving: long enough
#: for a dead member's partitions to be handed over and read, short of waiting for ever.
STALL_SESSIONS = 3
#: How long a probe for records between a position and the end may read.
_PROBE_S = 5.0


def stall_seconds(session_timeout_ms: int, stall_s: float | None = None) -> float:
    """``stall_s`` when given, else :data:`STALL_SESSIONS` session timeouts."""
    return stall_s if stall_s is not None else STALL_SESSIONS * session_timeout_ms / 1000


@dataclass(frozen=True)
class Behind:
    """One partition not processed to its end: where its committed work stands, and the end."""

    partition: int
    position: int | None  # None: nothing committed
    end: int

    def __str__(self) -> str:
        at = "nothing" if self.position is None else f"{self.position:,}"
        return f"{self.partition} (at {at} of {self.end:,})"


def topic_partitions(admin: Any, topic: str, *, timeout: float) -> list[int]:
    """Every partition of ``topic``."""
    try:
        meta = admin.list_topics(topic, timeout=timeout).topics.get(topic)
    except Exception as exc:
        raise translate_kafka_error(exc, action=f"read the metadata of topic {topic!r}") from exc
    if meta is None or meta.error is not None or not meta.partitions:
        raise TopicError(f"Topic {topic!r} does not exist.", hint="Check the topic name and --bootstrap.")
    return sorted(meta.partitions)


def topic_ends(admin: Any, topic: str, *, timeout: float = 15.0) -> dict[int, tuple[int, int]]:
    """``{partition: (log start, last stable offset)}`` for every partition of ``topic``."""
    parts = topic_partitions(admin, topic, timeout=timeout)
    action = f"read the end offsets of topic {topic!r}"
    keys = [(topic, p) for p in parts]
    start = list_offsets(admin, keys, latest=False, timeout=timeout, action=action)
    end = list_offsets(admin, keys, timeout=timeout, action=action)
    return {p: (start[(topic, p)], end[(topic, p)]) for p in parts}


def _coordinator_moving() -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                      KafkaError.COORDINATOR_NOT_AVAILABLE})


def group_positions(consumer: Any, topic: str, partitions: Collection[int], *,
                    timeout: float = 15.0) -> dict[int, int | None]:
    """The committed offsets of ``consumer``'s group for ``partitions`` (None: none committed),
    whichever member holds them. A coordinator that is moving or loading is asked again
    until ``timeout``."""
    from confluent_kafka import TopicPartition

    deadline = time.monotonic() + timeout
    while True:
        try:
            got = consumer.committed([TopicPartition(topic, p) for p in sorted(partitions)],
                                     timeout=max(0.1, deadline - time.monotonic()))
            break
        except Exception as exc:
            if error_code(exc) in _coordinator_moving() and time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            raise translate_kafka_error(exc, action=f"read the committed offsets of topic {topic!r}") from exc
    return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in got}


def topic_id(admin: Any, topic: str, *, timeout: float = 15.0) -> str:
    """``topic``'s id: a topic deleted and created again under its name gets a new one."""
    from confluent_kafka import TopicCollection

    try:
        future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
        return str(future.result(timeout=timeout).topic_id)
    except Exception as exc:
        raise translate_kafka_error(exc, action=f"describe topic {topic!r}") from exc


class Drain:
    """Decides, check by check, whether every partition of ``topic`` is processed to its end.

    ``what`` names the stage in the failure sentence; ``group`` is the consumer group that
    divides the partitions (named there too). ``clients`` defaults to ``connection``'s.
    """

    def __init__(self, connection: ConnectionSettings, topic: str, *, what: str, group: str,
                 stall_s: float, timeout_s: float = 15.0, clients: KafkaClients | None = None) -> None:
        self.connection = connection
        self.clients = clients or KafkaClients(connection)
        self.topic = topic
        self.what = what
        self.group = group
        self.stall_s = stall_s
        self.timeout_s = timeout_s
        self.ends: dict[int, tuple[int, int]] | None = None  # taken at the first check
        self._admin: Any = None
        self._probe: Any = None
        self._settled: dict[int, int | None] = {}  # partition -> a position proven to be at the end
        self._seen: tuple[tuple[int, int], ...] | None = None
        self._moved = time.monotonic()

    def partitions(self) -> list[int]:
        """Every partition of the topic (its ends, taken now when not taken yet)."""
        return sorted(self._ends())

    def _ends(self) -> dict[int, tuple[int, int]]:
        if self.ends is None:
            if self._admin is None:
                self._admin = self.clients.admin()
            self.ends = topic_ends(self._admin, self.topic, timeout=self.timeout_s)
            log.info("drain of %s: every partition up to %s", self.topic,
                     ", ".join(f"{p}:{end}" for p, (_, end) in sorted(self.ends.items())))
        return self.ends

    def behind(self, positions: Mapping[int, int | None]) -> list[Behind]:
        """The partitions whose ``positions`` are short of their ends (markers alone do not count)."""
        left = []
        for p, (start, end) in sorted(self._ends().items()):
            pos = positions.get(p)
            if max(pos if pos is not None else start, start) >= end or (
                    p in self._settled and self._settled[p] == pos):
                continue
            left.append(Behind(p, pos, end))
        if left:
            records = self._records_before_end(left)
            for b in left:
                if b.partition not in records:
                    self._settled[b.partition] = b.position
            left = [b for b in left if b.partition in records]
        return left

    def done(self, positions: Mapping[int, int | None], assigned: Collection[int]) -> bool:
        """True when every partition is processed to its end; raises DrainIncomplete past the bound.

        ``assigned``: the partitions this process holds, to say why the others are left.
        """
        left = self.behind(positions)
        if not left:
            return True
        seen = tuple((b.partition, -1 if b.position is None else b.position) for b in left)
        now = time.monotonic()
        if seen != self._seen:
            self._seen, self._moved = seen, now
        elif now - self._moved >= self.stall_s:
            raise self._failure(left, set(assigned))
        return False

    def _failure(self, left: list[Behind], assigned: set[int]) -> DrainIncomplete:
        here = [b for b in left if b.partition in assigned]
        elsewhere = [b for b in left if b.partition not in assigned]
        why = []
        if elsewhere:
            why.append(f"{_partitions(elsewhere)} held by another member of group {self.group!r}, "
                       "which committed nothing meanwhile")
        if here:
            why.append(f"{_partitions(here)} assigned here but not readable to the end (an input "
                       "transaction still open?)")
        return DrainIncomplete(
            f"{self.what}: {_partitions(left)} of {self.topic!r} did not move for {self.stall_s:g} s "
            f"before reaching the end they had when the drain began: {'; '.join(why)}.",
            hint=f"See who holds them with kafka-consumer-groups.sh --describe --group {self.group}; "
                 "stop that member or let it catch up, then run again (nothing committed is lost).")

    def _records_before_end(self, left: list[Behind]) -> set[int]:
        """The partitions of ``left`` with a committed record between their position and their end."""
        from confluent_kafka import KafkaError, TopicPartition

        if self._probe is None:
            self._probe = self.clients.read_committed_consumer({
                "group.id": f"kafeed-drain-probe-{uuid.uuid4().hex[:12]}", "enable.partition.eof": True})
        ends = self._ends()
        todo = {b.partition: b for b in left}
        self._probe.assign([TopicPartition(self.topic, b.partition,
                                           b.position if b.position is not None else ends[b.partition][0])
                            for b in left])
        found: set[int] = set()
        deadline = time.monotonic() + _PROBE_S
        try:
            while todo and time.monotonic() < deadline:
                for msg in self._probe.consume(num_messages=100, timeout=0.2):
                    p = msg.partition()
                    if p not in todo:
                        continue
                    err = msg.error()
                    if err is None and msg.offset() < todo[p].end:
                        found.add(p)
                    elif err is not None and err.code() != KafkaError._PARTITION_EOF:
                        continue
                    del todo[p]
        except Exception as exc:
            raise translate_kafka_error(exc, action=f"read topic {self.topic!r}") from exc
        finally:
            self._probe.unassign()
        return found | set(todo)  # not resolved in time: counted as behind

    def close(self) -> None:
        if self._probe is not None:
            close_consumer(self._probe, what="drain probe")
            self._probe = None


def _partitions(left: list[Behind]) -> str:
    return ("partition " if len(left) == 1 else "partitions ") + ", ".join(map(str, left))
