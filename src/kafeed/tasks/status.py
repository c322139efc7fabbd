"""What `kafeed tasks status` and `retry` read and write (`cancel`: kafeed.tasks.cancel).

Status is computed from the topics themselves: every task ever queued (the queue
topics, read once) against the latest result per key (the results topic). A key with
no finished result is ``queued``, or ``in flight`` while a live lease holds it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.tasks.model import Task, TaskResult, decode_task
from kafeed.tasks.results import ResultsView
from kafeed.tasks.settings import QueueSettings
from kafeed.tasks.writer import TaskWriter
from kafeed.topics import TopicAdmin

#: Counts from part of a queue would look complete: a read that stops short fails, saying this.
_HINT = "Check the brokers (kafeed broker status) and run the command again."


@dataclass
class KindStatus:
    kind: str
    queued: int = 0
    in_flight: int = 0
    done: int = 0
    failed: int = 0
    parked: int = 0
    cancelled: int = 0
    oldest_waiting_s: float | None = None
    running: list[dict[str, Any]] = field(default_factory=list)


def kinds_on_cluster(admin: TopicAdmin, settings: QueueSettings) -> list[str]:
    skip = {settings.results_topic, settings.parked_topic}
    prefix = settings.prefix + "."
    return sorted(t.removeprefix(prefix) for t in admin.list()
                  if t.startswith(prefix) and t not in skip)


def queue_status(connection: ConnectionSettings, settings: QueueSettings) -> list[KindStatus]:
    """Per kind: queued, in flight, done, failed (expired), parked, cancelled, oldest wait."""
    clients = KafkaClients(connection)
    kinds = kinds_on_cluster(TopicAdmin(connection, clients=clients), settings)
    view = ResultsView(connection, settings.results_topic, clients=clients).start()
    try:
        latest = view.snapshot()
        now = time.time()
        out = []
        for kind in kinds:
            status = KindStatus(kind)
            first: dict[str, Task] = {}
            for msg in clients.read_to_end(settings.queue_topic(kind), hint=_HINT):
                task = decode_task(msg.value())
                if task is not None:
                    first.setdefault(task.key, task)
            for key, task in first.items():
                result = latest.get(key)
                state = result.status if result is not None else "queued"
                lease = view.holder(key, now)
                if lease is not None:
                    status.in_flight += 1
                    status.running.append({"key": key, "worker": lease.worker,
                                           "heartbeat_age_s": round(now - lease.written_at, 1)})
                elif state in ("queued", "retrying", "running"):
                    status.queued += 1
                    age = now - task.submitted_at
                    status.oldest_waiting_s = max(status.oldest_waiting_s or 0.0, age)
                elif state == "succeeded":
                    status.done += 1
                elif state == "parked":
                    status.parked += 1
                elif state == "cancelled":
                    status.cancelled += 1
                else:
                    status.failed += 1
            out.append(status)
        return out
    finally:
        view.close()


def retry_parked(connection: ConnectionSettings, settings: QueueSettings, *,
                 keys: list[str] | None = None) -> list[Task]:
    """Put parked tasks (all, or those of ``keys``) back with fresh attempts; their history stays."""
    clients = KafkaClients(connection)
    view = ResultsView(connection, settings.results_topic, clients=clients).start()
    try:
        latest = view.snapshot()
    finally:
        view.close()
    chosen: dict[str, Task] = {}
    for msg in clients.read_to_end(settings.parked_topic, hint=_HINT):
        task = decode_task(msg.value())
        result = latest.get(task.key) if task is not None else None
        if task is None or result is None or result.status != "parked":
            continue
        if keys is None or task.key in keys:
            chosen[task.key] = task
    writer = TaskWriter(connection, settings, clients=clients)
    again = [t.model_copy(update={"attempt": 1, "not_before": 0.0, "submitted_at": time.time()})
             for t in chosen.values()]
    for task in again:
        writer.result_async(TaskResult(key=task.key, kind=task.kind, status="queued",
                                       worker="retry", history=task.history))
    writer.tasks(again)
    writer.flush()
    return again
