"""How loader workers start: forked from a trainer that runs no Kafka client (fast, and as
clean as a forkserver's fork), from a forkserver otherwise, which the loader starts as it is
built so that its imports overlap the trainer's start."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Run in a fresh interpreter: a pytest worker may hold other tests' Kafka clients.
SCRIPT = """
import json, multiprocessing
from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.loader.workers.worker_start import kafka_threads, prestart, start_context

def name(context):
    return context if context is None or isinstance(context, str) else context.get_start_method()

if __name__ == "__main__":
    out = {"threads_before": kafka_threads(), "alone": name(start_context(None, object()))}
    producer = KafkaClients(ConnectionSettings(bootstrap="127.0.0.1:9")).producer()
    out["threads_with_client"] = kafka_threads()
    out["with_client"] = name(start_context(None, object()))
    out["chosen"] = name(start_context("spawn", object()))
    from multiprocessing import forkserver
    out["forkserver_before"] = forkserver._forkserver._forkserver_pid
    prestart(None)
    out["forkserver_after"] = forkserver._forkserver._forkserver_pid
    del producer
    print(json.dumps(out))
"""


def test_workers_fork_unless_a_kafka_client_runs_and_the_forkserver_starts_early(tmp_path: Path) -> None:
    script = tmp_path / "choose.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["threads_before"] == 0 and out["alone"] == "fork"
    assert out["threads_with_client"] > 0 and out["with_client"] == "forkserver"
    assert out["chosen"] == "spawn"
    # Built while a client runs, the loader starts its forkserver then, not at the first batch.
    assert out["forkserver_before"] is None and out["forkserver_after"] is not None
