"""The task queue on the real broker: worker processes sharing a kind's queue.

One run per parameter set carries every independent check: many tasks done exactly
once, duplicate keys run once, a flaky handler retried with backoff, an always-failing
one parked with its history, tasks that outlive their share lock never run twice at
once, SIGKILLed workers whose tasks come back and finish once, and SIGTERM exiting 143.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.tasks import QueueSettings, make_task, submit_tasks
from kafeed.tasks.results import ResultsView
from kafeed.tasks.status import queue_status
from tests.integration.task_handlers import runs

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 150.0


def _worker(kafka: ConnectionSettings, prefix: str, err: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    args = [sys.executable, "-m", "kafeed.cli.main", "tasks", "worker", "--kind", "mixed",
            "--handler", "tests.integration.task_handlers:mixed", "--concurrency", "2",
            "--timeout", "1", "--lease", "2", "--backoff", "0.5", "--prefix", prefix,
            "-b", kafka.bootstrap]
    with err.open("wb") as sink:
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=sink)


def _wait(condition: Any, what: str, timeout: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _scenario(kafka: ConnectionSettings, work: Path, *, ok: int, kills: int) -> dict[str, Any]:
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    log = str(work / "runs.log")
    settings = QueueSettings(prefix=prefix, backoff_s=0.5)
    def task(key: str, **params: Any) -> Any:
        return make_task(kind="mixed", key=key, params={"key": key, "log": log, **params})

    # slow ones first: the kill (and the wait for the dead member's session to end) overlaps the rest
    tasks = [task(f"slow-{i}", mode="slow", seconds=2) for i in range(1 + kills)]
    tasks += [task(f"ok-{i}") for i in range(ok)]
    tasks += [task("dup"), task("dup"), task("dup")]
    tasks += [task("flaky", mode="flaky", fails=2), task("fail", mode="fail")]
    # Submitted before any worker joins: the share group starts at the earliest task.
    submit_tasks(kafka, tasks, settings=settings, create_queue=True)
    errs = [work / f"worker{i}.err" for i in range(3 + kills)]
    procs = [_worker(kafka, prefix, errs[i]) for i in range(3)]
    for err in errs[:3]:
        _wait(lambda err=err: b"ready" in err.read_bytes(), f"worker ready ({err.name})")

    killed: list[int] = []
    for k in range(kills):
        # SIGKILL a worker in the middle of a slow task (a fresh one joins when fewer than two are left).
        def mid_task() -> int | None:
            done = {key for e, key, _, _ in runs(Path(log)) if e == "done"}
            for event, key, pid, _ in runs(Path(log)):
                if event == "start" and key.startswith("slow") and key not in done and pid not in killed:
                    return pid
            return None

        _wait(lambda: mid_task() is not None, "a worker in the middle of a slow task")
        pid = mid_task()
        victim = next(p for p in procs if p.pid == pid)
        victim.kill()
        victim.wait(timeout=30)
        killed.append(victim.pid)
        procs.remove(victim)
        if len(procs) < 2:
            procs.append(_worker(kafka, prefix, errs[3 + k]))

    keys = {t.key for t in tasks}
    view = ResultsView(kafka, settings.results_topic).start()
    try:
        _wait(lambda: all((r := view.latest(k)) is not None and r.status in ("succeeded", "parked")
                          for k in keys), "every task succeeded or parked")
        results = view.snapshot()
    finally:
        view.close()
    status = {s.kind: s for s in queue_status(kafka, settings)}
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    codes = [proc.wait(timeout=60) for proc in procs]
    parked = KafkaClients(kafka).read_to_end(settings.parked_topic)
    return {"runs": runs(Path(log)), "results": results, "ok": ok, "killed": killed,
            "codes": codes, "status": status["mixed"], "parked": parked}


@pytest.fixture(scope="module")
def scenario(kafka: ConnectionSettings, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return _scenario(kafka, tmp_path_factory.mktemp("tasks"), ok=60, kills=1)


def _check_exactly_once(run: dict[str, Any]) -> None:
    """Every task finished; none twice on the workers left alive. A worker SIGKILLed between
    its handler's return and the result write leaves a finished run without a result (why
    a handler's effect must be idempotent), so the killed workers' runs may repeat once."""
    killed = set(run["killed"])
    alive = Counter(key for event, key, pid, _ in run["runs"] if event == "done" and pid not in killed)
    anywhere = Counter(key for event, key, _, _ in run["runs"] if event == "done")
    keys = {f"ok-{i}" for i in range(run["ok"])} | {f"slow-{i}" for i in range(1 + len(killed))}
    assert all(alive[k] <= 1 and 1 <= anywhere[k] <= 1 + len(killed) for k in keys), \
        {k: (alive[k], anywhere[k]) for k in keys if alive[k] > 1 or anywhere[k] != 1}
    assert all(run["results"][k].status == "succeeded" for k in keys)
    assert sum(anywhere[k] - 1 for k in keys) <= len(killed)


def test_many_tasks_across_three_workers_each_done_once(scenario: dict[str, Any]) -> None:
    _check_exactly_once(scenario)
    assert scenario["status"].done == scenario["ok"] + 1 + 1 + 1 + len(scenario["killed"])
    assert scenario["status"].queued == 0 and scenario["status"].parked == 1


def test_duplicate_key_runs_once(scenario: dict[str, Any]) -> None:
    starts = [e for e, key, _, _ in scenario["runs"] if key == "dup" and e == "start"]
    assert len(starts) == 1


def test_fails_twice_then_succeeds_after_backoff(scenario: dict[str, Any]) -> None:
    starts = [at for e, key, _, at in scenario["runs"] if key == "flaky" and e == "start"]
    assert len(starts) == 3
    result = scenario["results"]["flaky"]
    assert result.status == "succeeded" and result.attempt == 3 and len(result.history) == 2
    # backoff 0.5 s then 1 s, each cut by at most 20 % jitter
    assert starts[1] - starts[0] >= 0.4 and starts[2] - starts[1] >= 0.8


def test_always_failing_task_is_parked_with_its_history(scenario: dict[str, Any]) -> None:
    result = scenario["results"]["fail"]
    assert result.status == "parked" and [a.attempt for a in result.history] == [1, 2, 3]
    (record,) = scenario["parked"]
    headers = dict(record.headers())
    assert headers["kafeed.error.kind"] == b"task-failed"
    assert b"always fails" in headers["kafeed.error.reason"]
    assert headers["kafeed.task.worker"] and record.key() == b"fail"
    assert '"attempt":3' in record.value().decode()


def test_tasks_longer_than_the_lock_never_run_twice_at_once(scenario: dict[str, Any]) -> None:
    by_key: dict[str, list[tuple[str, int, float]]] = {}
    for event, key, pid, at in scenario["runs"]:
        by_key.setdefault(key, []).append((event, pid, at))
    for key, events in by_key.items():
        open_runs: set[int] = set()
        for event, pid, _ in events:
            if event == "start":
                alive = open_runs - set(scenario["killed"])
                assert not alive, f"{key} started on {pid} while running on {alive}"
                open_runs.add(pid)
            else:
                open_runs.discard(pid)
    # the slow task that nobody killed ran once, although its 2 s outlived the 1 s lock
    slow_starts = Counter(key for e, key, pid, _ in scenario["runs"]
                          if e == "start" and key.startswith("slow") and pid not in scenario["killed"])
    assert all(n == 1 for n in slow_starts.values())


def test_sigkilled_worker_task_comes_back_and_sigterm_exits_143(scenario: dict[str, Any]) -> None:
    assert len(scenario["killed"]) == 1
    assert scenario["codes"] == [143, 143]


@pytest.mark.slow
def test_200_tasks_and_three_kills(kafka: ConnectionSettings, tmp_path: Path) -> None:
    run = _scenario(kafka, tmp_path, ok=200, kills=3)
    _check_exactly_once(run)
    assert len(run["killed"]) == 3 and set(run["codes"]) == {143}
