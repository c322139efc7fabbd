"""The queue's one producer: tasks, results and parked tasks, idempotent, acks=all."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafkaOperationError
from kafeed.kafka import KafkaClients
from kafeed.tasks.model import Task, TaskResult
from kafeed.tasks.settings import QueueSettings

Headers = list[tuple[str, bytes]]

#: How much longer a flush waits than a record may take, for librdkafka's failure report.
FLUSH_MARGIN_S = 5.0


class TaskWriter:
    """Produces and waits: :meth:`flush` raises when any record since the last flush failed,
    which is at the latest ``timeout_s`` after it was produced."""

    def __init__(self, connection: ConnectionSettings, settings: QueueSettings, *,
                 clients: KafkaClients | None = None, timeout_s: float = 60.0) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        # librdkafka fails a record it could not write within the timeout, so a flush that
        # waits a little longer reports why (the cluster unreachable) instead of a count.
        self._producer = (clients or KafkaClients(connection)).producer({
            "enable.idempotence": True, "acks": "all", "linger.ms": 2,
            "message.timeout.ms": int(timeout_s * 1000)})
        self._errors: list[str] = []
        self._lock = threading.Lock()

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            with self._lock:
                self._errors.append(str(err))

    def _produce(self, topic: str, key: str, value: bytes, headers: Headers | None = None,
                 on_delivery: Any = None) -> None:
        def report(err: Any, msg: Any) -> None:
            self._report(err, msg)
            if on_delivery is not None:
                on_delivery(err, msg)

        while True:
            try:
                self._producer.produce(topic, value=value, key=key.encode(), headers=headers,
                                       on_delivery=report)
                return
            except BufferError:
                self._producer.poll(0.1)

    def tasks(self, tasks: Iterable[Task]) -> int:
        n = 0
        for task in tasks:
            self._produce(self.settings.queue_topic(task.kind), task.key, task.encode())
            n += 1
            if n % 1000 == 0:
                self._producer.poll(0)
        return n

    def result(self, result: TaskResult) -> tuple[int, int]:
        """Write ``result`` and wait for it; returns its (partition, offset)."""
        where: list[tuple[int, int]] = []

        def delivered(err: Any, msg: Any) -> None:
            if err is None:
                where.append((msg.partition(), msg.offset()))

        self._produce(self.settings.results_topic, result.key, result.encode(), on_delivery=delivered)
        self.flush()
        return where[0]

    def result_async(self, result: TaskResult) -> None:
        self._produce(self.settings.results_topic, result.key, result.encode())
        self._producer.poll(0)

    def parked(self, task: Task, headers: Headers) -> None:
        self._produce(self.settings.parked_topic, task.key, task.encode(), headers)

    def flush(self, timeout: float | None = None) -> None:
        timeout = self.timeout_s + FLUSH_MARGIN_S if timeout is None else timeout
        left = self._producer.flush(timeout)
        with self._lock:
            errors, self._errors = self._errors, []
        if left or errors:
            detail = errors[0] if errors else f"{left} records still queued after {timeout:g}s"
            raise KafkaOperationError(f"Could not write task records: {detail}.",
                                      hint="Check the cluster with `kafeed broker status`.")
