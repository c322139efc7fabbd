"""A task worker (`--concurrency 2`) killed with SIGKILL leaves none of the processes its
tasks started: here the DataLoader workers, forkserver and resource tracker of a handler
that reads with a StreamLoader from one of the worker's task threads."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

from kafeed.config import ConnectionSettings
from kafeed.tasks import QueueSettings, make_task, submit_tasks
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory
from tests.process_tree import descendants, describe, kill_root_and_check, reap

ROOT = Path(__file__).resolve().parents[2]


def test_task_worker_children_end_when_it_is_sigkilled(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                       tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 40)
    prefix = f"t-{uuid.uuid4().hex[:10]}"
    task = make_task(kind="loader", key="read", params={"topic": topic, "bootstrap": kafka.bootstrap})
    submit_tasks(kafka, [task], settings=QueueSettings(prefix=prefix), create_queue=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "kafeed.cli.main", "tasks", "worker", "--kind", "loader",
           "--handler", "tests.integration.task_loader_handler:read_forever", "--concurrency", "2",
           "--prefix", prefix, "-b", kafka.bootstrap]
    with (tmp_path / "stderr").open("w") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
    tree: set[int] = set()
    try:
        deadline = time.monotonic() + 150
        while len(tree) < 3:  # the resource tracker, the forkserver and a first DataLoader worker
            assert proc.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
            assert time.monotonic() < deadline, f"the task never started its loader: {describe(tree)}"
            tree |= descendants(proc.pid)
        kill_root_and_check(proc, tree, "the task worker")
    finally:
        reap(proc, tree)
