"""A task worker: one share-group member that runs a kind's handler, explicitly acknowledged.

Per poll it gets at most ``concurrency`` deliveries (``max.poll.records``, soft), runs the
due ones on a thread pool (higher priority first), makes every record it wrote durable,
then acknowledges each delivery and commits. Each delivery ends as ACCEPT (done, retried
as a new copy, parked, or not to be run) or RELEASE (a stop arrived before it started);
records that are no task are REJECTed.

Leases keep a task from running twice at once even when a run outlives the share lock
(the client cannot renew locks): before running, the worker writes a ``running`` result
with a lease id and ``lease_until``, waits to read it back, and runs only if its lease is
the one all readers agree on (:class:`~kafeed.tasks.results.ResultsView`). A heartbeat
thread renews every held lease. A delivery of a key whose lease someone else holds goes
back on the queue with ``not_before`` at that lease's end.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.kafka import KafkaClients, dead_letter_headers
from kafeed.tasks.handlers import Handler, TaskContext, json_output, wants_context
from kafeed.tasks.leases import HeldLeases
from kafeed.tasks.model import FINAL, Attempt, Task, TaskResult, decode_task
from kafeed.tasks.queue import configure_group, ensure_topics, lock_ms, share_group_error
from kafeed.tasks.results import ResultsView
from kafeed.tasks.settings import QueueSettings, worker_settings
from kafeed.tasks.worker_stats import WorkerStats
from kafeed.tasks.writer import TaskWriter
from kafeed.telemetry import metrics as m
from kafeed.topics import TopicAdmin

log = logging.getLogger("kafeed")

ACCEPT, RELEASE, REJECT = "accept", "release", "reject"

#: How long a worker waits for the cluster to take a record it wrote (a lease, an outcome)
#: before it gives up and exits, leaving its tasks to come back to others. A plain
#: TaskWriter's 60 s ended a worker once as a loaded machine's one-node cluster came back
#: from a restart of just over a minute (docs/faults.md).
WRITE_TIMEOUT_S = 120.0


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{threading.get_native_id()}"


class Worker:
    """Runs ``handler`` for the tasks of ``kind`` until ``stop`` is set (Kafka through ``clients``,
    ``connection``'s by default)."""

    def __init__(self, connection: ConnectionSettings, *, kind: str, handler: Handler,
                 settings: QueueSettings | None = None, concurrency: int = 1, timeout_s: float = 30.0,
                 lease_s: float = 10.0, worker_id: str | None = None,
                 stop: threading.Event | None = None, clients: KafkaClients | None = None) -> None:
        self.connection = connection
        self.clients = clients or KafkaClients(connection)
        self.kind = kind
        self.handler = handler
        self._with_context = wants_context(handler)
        self.settings = settings or QueueSettings()
        # Validated here, so the CLI and the Python API refuse the same impossible values.
        checked = worker_settings(concurrency=concurrency, timeout_s=timeout_s, lease_s=lease_s)
        self.concurrency = checked.concurrency
        self.timeout_s = checked.timeout_s
        self.lease_s = checked.lease_s
        self.worker_id = worker_id or default_worker_id()
        self.stop = stop or threading.Event()
        self.stats = WorkerStats()
        self._leases: HeldLeases | None = None
        self._stats_lock = threading.Lock()
        self._view: ResultsView | None = None
        self._writer: TaskWriter | None = None

    # -- set-up --------------------------------------------------------------------------

    def prepare(self) -> None:
        """Topics, the results check, the share group's config and the results view."""
        ensure_topics(TopicAdmin(self.connection, clients=self.clients), self.settings, [self.kind])
        configure_group(self.connection, self.settings.group(self.kind),
                        lock_duration_ms=lock_ms(self.timeout_s), clients=self.clients)
        self._writer = TaskWriter(self.connection, self.settings, clients=self.clients,
                                  timeout_s=WRITE_TIMEOUT_S)
        self._leases = HeldLeases(self._writer, self.lease_s, self.stop)
        self._view = ResultsView(self.connection, self.settings.results_topic, clients=self.clients).start()

    def _consumer(self) -> Any:
        try:
            consumer = self.clients.share_consumer({
                "group.id": self.settings.group(self.kind),
                "share.acknowledgement.mode": "explicit",
                "max.poll.records": self.concurrency})
            consumer.subscribe([self.settings.queue_topic(self.kind)])
        except KafeedError as exc:
            raise share_group_error(exc, self.settings.group(self.kind)) from exc
        return consumer

    # -- the loop --------------------------------------------------------------------------

    def run(self, on_ready: Callable[[], None] | None = None) -> WorkerStats:
        if self._view is None:
            self.prepare()
        consumer = self._consumer()
        assert self._leases is not None
        self._leases.start()
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="kafeed-task")
        if on_ready is not None:
            on_ready()
        try:
            while not self.stop.is_set():
                msgs = consumer.poll(0.5)
                records = [msg for msg in msgs if not msg.error()]
                for msg in msgs:
                    if msg.error():
                        log.warning("task queue %s: %s", self.kind, msg.error().str())
                if not records:
                    continue
                self._batch(consumer, pool, records)
        finally:
            self.stop.set()
            pool.shutdown(wait=True)
            self._leases.join()
            consumer.close()
            assert self._view is not None
            self._view.close()
        return self.stats

    def _batch(self, consumer: Any, pool: ThreadPoolExecutor, records: list[Any]) -> None:
        from kafeed.kafka.types import AcknowledgeType

        tasks = [(msg, decode_task(msg.value())) for msg in records]
        tasks.sort(key=lambda pair: -(pair[1].priority if pair[1] else 0))
        now = time.time()
        soonest = min((t.not_before for _, t in tasks if t is not None), default=0.0)
        futures = {pool.submit(self._one, msg, task): msg for msg, task in tasks}
        kinds = {ACCEPT: AcknowledgeType.ACCEPT, RELEASE: AcknowledgeType.RELEASE,
                 REJECT: AcknowledgeType.REJECT}
        assert self._writer is not None
        for future in as_completed(futures):
            # Acknowledge each as it ends (its records made durable first), so a fast task
            # fetched with a slow one is not held past its lock.
            outcome = future.result()
            self._writer.flush()
            consumer.acknowledge(futures[future], kinds[outcome])
            if len(futures) > 1:
                consumer.commit_async()
        try:
            for tp, err in (consumer.commit_sync(30) or {}).items():
                if err is not None:  # the lock ran out first: the broker redelivers, leases decide
                    log.warning("task queue %s: acknowledgement of %s[%s] failed: %s",
                                self.kind, tp.topic, tp.partition, err)
        except KafeedError as exc:
            log.warning("task queue %s: acknowledging tasks failed: %s", self.kind, exc)
        if soonest > now and all(t is not None and t.not_before > now for _, t in tasks):
            # Everything fetched was early: do not spin the copies round the queue.
            self.stop.wait(min(0.5, soonest - now))

    def _count(self, name: str, n: int = 1) -> None:
        with self._stats_lock:
            setattr(self.stats, name, getattr(self.stats, name) + n)

    def _one(self, msg: Any, task: Task | None) -> str:
        if task is None:
            self._count("rejected")
            return REJECT
        if self.stop.is_set():
            self._count("released")
            return RELEASE
        assert self._view is not None and self._writer is not None
        latest = self._view.latest(task.key)
        if latest is not None and (latest.status in FINAL or (
                latest.status in ("retrying", "running") and latest.attempt > task.attempt)):
            # Done, cancelled, or a stale copy: a later attempt was already queued (a worker
            # that wrote the retry died before acknowledging this delivery).
            self._count("skipped")
            m.TASKS_SKIPPED.labels(kind=self.kind, reason=latest.status).inc()
            return ACCEPT
        now = time.time()
        if task.not_before > now:
            return self._defer(task, task.not_before)
        if task.deadline is not None and task.deadline < now:
            self._writer.result_async(self._result(task, "expired", error="deadline passed before "
                                                   "the task started", finished_at=now))
            self._count("expired")
            m.TASKS_SKIPPED.labels(kind=self.kind, reason="expired").inc()
            return ACCEPT
        other = self._view.holder(task.key)
        if other is not None:
            return self._defer(task, other.lease_until)
        lease = self._result(task, "running", lease_id=uuid.uuid4().hex, started_at=now,
                             lease_until=now + self.lease_s)
        partition, offset = self._writer.result(lease)
        if not self._view.wait_for({partition: offset + 1}, timeout=self.lease_s):
            self._view.renew()  # written and acknowledged, yet not read back
        holder = self._view.holder(task.key)
        if holder is None or holder.lease_id != lease.lease_id:
            return self._defer(task, holder.lease_until if holder else time.time())
        assert self._leases is not None
        self._leases.hold(lease)
        return self._run(msg, task, lease)

    def _defer(self, task: Task, not_before: float) -> str:
        assert self._writer is not None
        self._writer.tasks([task.model_copy(update={"not_before": not_before})])
        self._count("deferred")
        m.TASKS_SKIPPED.labels(kind=self.kind, reason="deferred").inc()
        return ACCEPT

    def _result(self, task: Task, status: Any, **fields: Any) -> TaskResult:
        return TaskResult(key=task.key, kind=task.kind, status=status, worker=self.worker_id,
                          attempt=task.attempt, submitted_at=task.submitted_at,
                          history=task.history, **fields)

    def _run(self, msg: Any, task: Task, lease: TaskResult) -> str:
        assert self._writer is not None and self._leases is not None
        started = time.time()
        m.TASKS_STARTED.labels(kind=self.kind).inc()
        m.TASKS_QUEUE_WAIT.labels(kind=self.kind).observe(max(0.0, started - max(task.submitted_at,
                                                                           task.not_before)))
        m.TASKS_RUNNING.labels(kind=self.kind).inc()
        error: str | None = None
        try:
            output = json_output(self._call(task))
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.debug("task %s attempt %d failed:\n%s", task.key, task.attempt, traceback.format_exc())
        finally:
            # Released before any outcome is written, so no renewal follows it: the compacted
            # results topic keeps a key's last record, and a renewal written after the outcome
            # would leave the task "running" for every later reader.
            self._leases.release(task.key)
            m.TASKS_RUNNING.labels(kind=self.kind).dec()
            m.TASKS_HANDLER_SECONDS.labels(kind=self.kind).observe(time.time() - started)
        if error is None:
            self._writer.result_async(self._result(
                task, "succeeded", lease_id=lease.lease_id, output=output, started_at=started,
                finished_at=time.time()))
            self._count("succeeded")
            m.TASKS_SUCCEEDED.labels(kind=self.kind).inc()
            return ACCEPT
        finished = time.time()
        self._count("failed")
        m.TASKS_FAILED.labels(kind=self.kind).inc()
        failure = Attempt(attempt=task.attempt, worker=self.worker_id, started_at=started,
                          finished_at=finished, error=error[:2000])
        if task.attempt < task.max_attempts:
            retry = task.next_attempt(failure, not_before=finished + self.settings.backoff(task.attempt))
            self._writer.tasks([retry])
            self._writer.result_async(self._result(retry, "retrying", lease_id=lease.lease_id,
                                                   error=failure.error, started_at=started,
                                                   finished_at=finished))
            self._count("retried")
            m.TASKS_RETRIED.labels(kind=self.kind).inc()
            return ACCEPT
        parked = task.model_copy(update={"history": (*task.history, failure)})
        headers = dead_letter_headers(
            kind="task-failed", stage="tasks",
            reason=f"Task {task.key!r} failed {task.attempt} attempt(s); last: {failure.error}"[:1000],
            source=(msg.topic(), msg.partition(), msg.offset()),
            extra=[("kafeed.task.kind", task.kind.encode()), ("kafeed.task.worker",
                                                               self.worker_id.encode())])
        self._writer.parked(parked, headers)
        self._writer.result_async(self._result(parked, "parked", lease_id=lease.lease_id,
                                               error=failure.error, started_at=started,
                                               finished_at=finished))
        self._count("parked")
        m.TASKS_PARKED.labels(kind=self.kind).inc()
        return ACCEPT

    def _call(self, task: Task) -> Any:
        if not self._with_context:
            return self.handler(dict(task.params))
        context = TaskContext(connection=self.connection, kind=task.kind, key=task.key,
                              attempt=task.attempt, worker=self.worker_id, stop=self.stop)
        return self.handler(dict(task.params), context=context)
