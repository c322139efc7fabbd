"""The task worker against FakeKafka: leases, retries, parking and acknowledgements, no broker."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kafeed.config import ConnectionSettings
from kafeed.errors import KafkaOperationError
from kafeed.kafka import FakeKafka
from kafeed.tasks import QueueSettings
from kafeed.tasks.model import TaskResult, decode_result, decode_task, make_task
from kafeed.tasks.worker import WRITE_TIMEOUT_S, Worker
from kafeed.tasks.worker_stats import WorkerStats
from kafeed.tasks.writer import FLUSH_MARGIN_S, TaskWriter

SETTINGS = QueueSettings(prefix="t", partitions=2)


def _run(fake: FakeKafka, handler: Callable[..., Any], keys: list[str], *, attempts: int = 1,
         until: Callable[[WorkerStats], bool]) -> Worker:
    stop = threading.Event()
    worker = Worker(fake.connection, kind="k", handler=handler, settings=SETTINGS, lease_s=5.0,
                    worker_id="w", stop=stop, clients=fake)
    worker.prepare()
    TaskWriter(fake.connection, SETTINGS, clients=fake).tasks(
        [make_task(key=key, kind="k", params={"n": i}, max_attempts=attempts) for i, key in enumerate(keys)])
    ran = threading.Thread(target=worker.run, daemon=True)
    ran.start()
    with fake.changed:
        assert fake.changed.wait_for(lambda: until(worker.stats), timeout=30), worker.stats
    stop.set()
    ran.join(timeout=30)
    assert not ran.is_alive()
    return worker


def _results(fake: FakeKafka) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in range(SETTINGS.partitions):
        for _, _, value in fake.records(SETTINGS.results_topic, p):
            result = decode_result(value)
            assert result is not None
            out.setdefault(result.key, []).append(result.status)
    return out


def test_prepare_creates_the_topics_and_configures_the_share_group() -> None:
    fake = FakeKafka()
    Worker(fake.connection, kind="k", handler=lambda params: None, settings=SETTINGS,
           clients=fake).prepare()
    assert {SETTINGS.queue_topic("k"), SETTINGS.results_topic, SETTINGS.parked_topic} <= set(fake.topics)
    assert fake.configs[SETTINGS.results_topic]["cleanup.policy"] == "compact"
    assert fake.group_configs[SETTINGS.group("k")]["share.auto.offset.reset"] == "earliest"


def test_each_task_runs_once_under_a_lease_and_is_accepted() -> None:
    fake = FakeKafka()
    seen: list[int] = []
    _run(fake, lambda params: seen.append(params["n"]) or params["n"] * 2, ["a", "b", "c"],
         until=lambda s: s.succeeded == 3)
    assert sorted(seen) == [0, 1, 2]
    assert _results(fake) == {key: ["running", "succeeded"] for key in "abc"}
    assert len(fake.share_acked[SETTINGS.group("k")]) == 3  # every delivery acknowledged


def test_a_failing_task_is_retried_then_parked_with_dead_letter_headers() -> None:
    fake = FakeKafka()

    def fail(params: dict[str, Any]) -> None:
        raise RuntimeError("boom")

    worker = _run(fake, fail, ["x"], attempts=2, until=lambda s: s.parked == 1)
    assert worker.stats.retried == 1 and worker.stats.failed == 2
    assert _results(fake)["x"][-1] == "parked"
    parked = fake.read_to_end(SETTINGS.parked_topic)
    assert len(parked) == 1
    task = decode_task(parked[0].value())
    assert task is not None and task.attempt == 2 and len(task.history) == 2
    headers = dict(parked[0].headers())
    assert headers["kafeed.error.kind"] == b"task-failed" and b"boom" in headers["kafeed.error.reason"]


def test_a_finished_key_is_skipped_not_run_again() -> None:
    fake = FakeKafka()
    runs: list[int] = []
    _run(fake, lambda params: runs.append(1), ["d"], until=lambda s: s.succeeded == 1)
    _run(fake, lambda params: runs.append(1), ["d"], until=lambda s: s.skipped == 1)
    assert len(runs) == 1


def test_no_lease_renewal_is_written_after_the_success(monkeypatch: pytest.MonkeyPatch) -> None:
    # The compacted results topic keeps a key's last record: a renewal written after the success
    # would leave the finished task "running" for every later reader. Here the heartbeat is held
    # inside a renewal while the handler returns, the interleaving a loaded machine makes.
    fake = FakeKafka()
    renewing, succeeded = threading.Event(), threading.Event()
    write = TaskWriter.result_async

    def result_async(self: TaskWriter, result: TaskResult) -> None:
        if threading.current_thread().name == "kafeed-lease":
            renewing.set()
            succeeded.wait(1.0)  # time for the success to be written inside this renewal, if it can
        write(self, result)
        if result.status == "succeeded":
            succeeded.set()

    monkeypatch.setattr(TaskWriter, "result_async", result_async)
    worker = Worker(fake.connection, kind="k", handler=lambda params: renewing.wait(10),
                    settings=SETTINGS, lease_s=1.0, worker_id="w", stop=threading.Event(), clients=fake)
    worker.prepare()
    TaskWriter(fake.connection, SETTINGS, clients=fake).tasks([make_task(key="a", kind="k")])
    ran = threading.Thread(target=worker.run, daemon=True)
    ran.start()
    with fake.changed:
        assert fake.changed.wait_for(lambda: worker.stats.succeeded == 1, timeout=30), worker.stats
    worker.stop.set()
    ran.join(timeout=30)
    statuses = _results(fake)["a"]
    assert statuses.count("running") >= 2 and statuses[-1] == "succeeded", statuses


def test_a_write_the_cluster_never_takes_fails_with_librdkafkas_reason_after_the_timeout() -> None:
    # No broker on the port: the record is failed by librdkafka at timeout_s, and the flush
    # (which waits a little longer) says so, instead of "records still queued".
    writer = TaskWriter(ConnectionSettings(bootstrap="127.0.0.1:1"), SETTINGS, timeout_s=1.0)
    writer.tasks([make_task(key="a", kind="k")])
    started = time.monotonic()
    with pytest.raises(KafkaOperationError, match="timed out"):
        writer.flush()
    assert time.monotonic() - started < 1.0 + FLUSH_MARGIN_S


def test_a_worker_rides_out_a_longer_outage_than_a_plain_writer() -> None:
    built: list[dict[str, Any]] = []

    class Recording(FakeKafka):
        def producer(self, extra: Any = None, *, stage: str | None = None) -> Any:
            built.append(dict(extra or {}))
            return super().producer(extra, stage=stage)

    fake = Recording()
    Worker(fake.connection, kind="k", handler=lambda params: None, settings=SETTINGS,
           clients=fake).prepare()
    assert built[-1]["message.timeout.ms"] == WRITE_TIMEOUT_S * 1000 > 60_000
