"""Operating a task queue on the real broker: status, cancel, retry, deadlines, metrics, bad input.

One in-process worker serves every check of the first test (no worker process to start).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.monitor.alerts import AlertSettings
from kafeed.monitor.export import export_snapshot
from kafeed.monitor.rules import conditions
from kafeed.monitor.watch import ClusterMonitor, MonitorOptions
from kafeed.tasks import QueueSettings, Worker, make_task, submit_tasks
from kafeed.tasks.results import ResultsView
from kafeed.telemetry.metrics import REGISTRY
from kafeed.topics import TopicAdmin, plan_topic
from tests.cli_support import usage_error
from tests.integration.task_handlers import mixed, runs


def _until(condition: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _status(kafka: ConnectionSettings, prefix: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["tasks", "status", "--json", "--prefix", prefix, "-b", kafka.bootstrap]) == 0
    (kind,) = json.loads(capsys.readouterr().out)
    return kind  # type: ignore[no-any-return]


def _monitored(kafka: ConnectionSettings, prefix: str) -> tuple[dict[str, Any], set[str]]:
    """`kafeed monitor`'s view of the queue's one kind, and the task rules that fire on it."""
    with ClusterMonitor(kafka, options=MonitorOptions(task_prefixes=[prefix])) as monitor:
        snap = monitor.poll()
    export_snapshot(snap)
    (queue,) = [q for q in snap.queues if q["prefix"] == prefix]
    firing = {c.rule for c in conditions(snap, AlertSettings(max_task_wait_s=0.0)) if c.active
              and c.subject == f"{prefix}.ops"}
    return queue, firing


def test_status_cancel_retry_deadline_and_metrics(kafka: ConnectionSettings, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    prefix = f"ops-{uuid.uuid4().hex[:10]}"
    settings = QueueSettings(prefix=prefix, backoff_s=0.1)
    log = str(tmp_path / "runs.log")

    def task(key: str, **fields: Any) -> Any:
        params = {"key": key, "log": log, **fields.pop("params", {})}
        return make_task(kind="ops", key=key, params=params, **fields)

    file = tmp_path / "tasks.jsonl"
    lines = [{"kind": "ops", "key": f"f{i}", "params": {"key": f"f{i}", "log": log}} for i in range(3)]
    file.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert main(["tasks", "submit", "--file", str(file), "--create-queue", "--prefix", prefix,
                 "-b", kafka.bootstrap]) == 0
    submit_tasks(kafka, [task("cancel-me"), task("late", deadline=time.time() - 1),
                         task("flaky", max_attempts=1, params={"mode": "flaky", "fails": 1})],
                 settings=settings)
    assert main(["tasks", "cancel", "--kind", "ops", "cancel-me", "--prefix", prefix,
                 "-b", kafka.bootstrap]) == 0
    before = _status(kafka, prefix, capsys)
    assert (before["queued"], before["cancelled"], before["done"]) == (5, 1, 0)
    assert before["oldest_waiting_s"] > 0
    queue, firing = _monitored(kafka, prefix)
    assert (queue["queued"], queue["cancelled"]) == (5, 1) and firing == {"task_wait"}
    assert REGISTRY.get_sample_value("kafeed_tasks_oldest_waiting_seconds",
                                     {"prefix": prefix, "kind": "ops"}) > 0

    stop = threading.Event()
    worker = Worker(kafka, kind="ops", handler=mixed, settings=settings, concurrency=2, timeout_s=5,
                    lease_s=2, stop=stop)
    thread = threading.Thread(target=worker.run)
    thread.start()
    view = ResultsView(kafka, settings.results_topic).start()
    try:
        first, ended = ("f0", "f1", "f2", "late", "flaky"), ("succeeded", "parked", "expired")
        _until(lambda: all((r := view.latest(k)) is not None and r.status in ended for k in first),
               "the first round")
        after = _status(kafka, prefix, capsys)
        assert (after["done"], after["parked"], after["failed"], after["cancelled"], after["queued"]) == \
            (3, 1, 1, 1, 0)
        queue, firing = _monitored(kafka, prefix)
        assert (queue["done"], queue["parked"], queue["queued"]) == (3, 1, 0) and firing == {"tasks_parked"}
        assert REGISTRY.get_sample_value("kafeed_tasks_queue",
                                         {"prefix": prefix, "kind": "ops", "state": "parked"}) == 1
        assert main(["tasks", "retry", "--prefix", prefix, "-b", kafka.bootstrap]) == 0
        _until(lambda: view.latest("flaky").status == "succeeded", "the retried task")  # type: ignore[union-attr]
    finally:
        stop.set()
        thread.join(timeout=60)
        view.close()
    ran = {key for event, key, _, _ in runs(Path(log)) if event == "start"}
    assert "cancel-me" not in ran and "late" not in ran
    assert worker.stats.parked == 1 and worker.stats.succeeded == 4 and worker.stats.expired == 1
    assert REGISTRY.get_sample_value("kafeed_tasks_parked_total", {"kind": "ops"}) >= 1
    assert REGISTRY.get_sample_value("kafeed_tasks_handler_seconds_count", {"kind": "ops"}) >= 5


def test_bad_input_on_a_cluster(kafka: ConnectionSettings, admin: TopicAdmin,
                                capsys: pytest.CaptureFixture[str]) -> None:
    prefix = f"bad-{uuid.uuid4().hex[:10]}"
    line = usage_error(["tasks", "submit", "--kind", "nobody", "--key", "a", "--prefix", prefix,
                        "-b", kafka.bootstrap], capsys)
    assert "Unknown task kind 'nobody'" in line
    admin.create(plan_topic(f"{prefix}.results", brokers=1, partitions=1))  # delete, not compact
    line = usage_error(["tasks", "worker", "--kind", "k", "--handler", "tests.integration.task_handlers:noop",
                        "--prefix", prefix, "-b", kafka.bootstrap], capsys)
    assert "not compact" in line and f"{prefix}.results" in line


def test_cancel_refuses_a_key_never_submitted_and_a_later_submit_runs(
        kafka: ConnectionSettings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prefix = f"cancel-{uuid.uuid4().hex[:10]}"
    settings = QueueSettings(prefix=prefix, backoff_s=0.1)
    log = str(tmp_path / "runs.log")

    def task(key: str) -> Any:
        return make_task(kind="ops", key=key, params={"key": key, "log": log})

    submit_tasks(kafka, [task("real")], settings=settings, create_queue=True)
    line = usage_error(["tasks", "cancel", "--kind", "ops", "ghost", "--prefix", prefix,
                        "-b", kafka.bootstrap], capsys)
    assert "'ghost'" in line and "nothing was cancelled" in line
    # One unknown key among known ones: none of them is cancelled.
    usage_error(["tasks", "cancel", "--kind", "ops", "real", "ghost", "--prefix", prefix,
                 "-b", kafka.bootstrap], capsys)
    line = usage_error(["tasks", "cancel", "--kind", "nokind", "real", "--prefix", prefix,
                        "-b", kafka.bootstrap], capsys)
    assert f"{prefix}.nokind" in line
    assert _status(kafka, prefix, capsys)["cancelled"] == 0

    submit_tasks(kafka, [task("ghost")], settings=settings)
    stop = threading.Event()
    worker = Worker(kafka, kind="ops", handler=mixed, settings=settings, timeout_s=5, lease_s=2, stop=stop)
    thread = threading.Thread(target=worker.run)
    thread.start()
    view = ResultsView(kafka, settings.results_topic).start()
    try:
        _until(lambda: all((r := view.latest(k)) is not None and r.status == "succeeded"
                           for k in ("real", "ghost")), "both tasks to run")
    finally:
        stop.set()
        thread.join(timeout=60)
        view.close()
    assert {key for event, key, _, _ in runs(Path(log)) if event == "start"} == {"real", "ghost"}
    capsys.readouterr()
    assert main(["tasks", "cancel", "--kind", "ops", "real", "--json", "--prefix", prefix,
                 "-b", kafka.bootstrap]) == 0
    assert json.loads(capsys.readouterr().out) == {"cancelled": [], "already_finished": ["real"]}
