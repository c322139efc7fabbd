"""The results topic read into memory: the state of every idempotency key, kept current.

Every worker (and ``kafeed tasks status``) reads the whole compacted results topic from
the beginning and then follows it. All readers see the records of a key in the same
order, so they agree on who holds a lease: the first ``running`` record written while no
other lease on that key was live wins, later ones lose (:meth:`ResultsView.holder`).
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.kafka import KafkaClients, close_consumer
from kafeed.tasks.model import TaskResult, decode_result


class ResultsView:
    """Latest result per key, the live lease per key, and how far the topic has been read."""

    def __init__(self, connection: ConnectionSettings, topic: str, *,
                 clients: KafkaClients | None = None) -> None:
        self.topic = topic
        self._clients = clients or KafkaClients(connection)
        self._lock = threading.Condition()
        self._latest: dict[str, TaskResult] = {}
        self._leases: dict[str, TaskResult] = {}
        self._ended: dict[str, str] = {}  # per key, the lease its latest outcome ended
        self._positions: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None

    # -- reading -------------------------------------------------------------------------

    def start(self, *, timeout: float = 60.0) -> ResultsView:
        """Assign every partition from the beginning, read up to the end, then follow."""
        ends = self._follow(timeout)
        self.wait_for(ends, timeout=timeout)
        return self

    def renew(self, *, timeout: float = 60.0) -> None:
        """Go on reading with a new consumer from where this one got to.

        For a record this process wrote, was acknowledged, and did not read back in time:
        after the only broker restarted, librdkafka (2.16) can keep a consumer's fetches on
        the connection it discarded when it bootstrapped again, and it never reads again
        (docs/faults.md). A new client starts from fresh connections.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._consumer is not None:
            close_consumer(self._consumer, 5.0, what="results view")
        self._stop = threading.Event()
        self._follow(timeout)

    def _follow(self, timeout: float) -> dict[int, int]:
        """A consumer over every partition from the positions read so far (the beginning at
        first), read on a thread of its own; the partitions' ends as of now."""
        from kafeed.kafka.types import OFFSET_BEGINNING, TopicPartition

        consumer = self._clients.read_committed_consumer({
            "group.id": f"kafeed-results-view-{uuid.uuid4().hex[:12]}", "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 5})
        try:
            meta = consumer.list_topics(self.topic, timeout=timeout).topics.get(self.topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise TopicError(f"The results topic {self.topic!r} does not exist.",
                                 hint="Start a worker or submit a task first: either creates it.")
            parts = sorted(meta.partitions)
            with self._lock:
                consumer.assign([TopicPartition(self.topic, p, self._positions.get(p, OFFSET_BEGINNING))
                                 for p in parts])
            ends = {p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=timeout)[1]
                    for p in parts}
        except Exception:
            consumer.close()
            raise
        self._consumer = consumer
        self._thread = threading.Thread(target=self._run, args=(consumer, self._stop),
                                        name="kafeed-results", daemon=True)
        self._thread.start()
        return ends

    def _run(self, consumer: Any, stop: threading.Event) -> None:
        while not stop.is_set():
            msgs = consumer.consume(num_messages=1000, timeout=0.1)
            if not msgs:
                continue
            with self._lock:
                for msg in msgs:
                    if msg.error():
                        continue
                    self._positions[msg.partition()] = msg.offset() + 1
                    result = decode_result(msg.value())
                    if result is not None:
                        self._apply(result)
                self._lock.notify_all()

    def _apply(self, result: TaskResult) -> None:
        if result.status == "running" and self._ended.get(result.key) == result.lease_id:
            return  # a heartbeat that crossed its own final result on the way: no lease any more
        if result.status != "running" and result.lease_id:
            self._ended[result.key] = result.lease_id
        self._latest[result.key] = result
        current = self._leases.get(result.key)
        if result.status == "running":
            live = current is not None and current.lease_until > result.written_at
            if current is None or not live or current.lease_id == result.lease_id:
                self._leases[result.key] = result
        elif current is None or result.lease_id in ("", current.lease_id):
            # Only the holder (or a record that is no lease at all) ends a lease.
            self._leases.pop(result.key, None)

    def wait_for(self, positions: dict[int, int], *, timeout: float) -> bool:
        """Block until every partition was read up to ``positions`` (exclusive offsets)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while any(self._positions.get(p, 0) < end for p, end in positions.items() if end > 0):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.5))
        return True

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- asking ----------------------------------------------------------------------------

    def latest(self, key: str) -> TaskResult | None:
        with self._lock:
            return self._latest.get(key)

    def holder(self, key: str, now: float | None = None) -> TaskResult | None:
        """The live lease on ``key`` (its ``lease_until`` still ahead), if any."""
        now = time.time() if now is None else now
        with self._lock:
            lease = self._leases.get(key)
        return lease if lease is not None and lease.lease_until > now else None

    def snapshot(self) -> dict[str, TaskResult]:
        with self._lock:
            return dict(self._latest)
