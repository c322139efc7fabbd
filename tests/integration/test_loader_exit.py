"""A process whose dataset iterator is still alive when its script ends exits all the same."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "integration" / "loader_exit.py"
EXIT_WITHIN_S = 30.0  # start-up (torch, the first fetch) included


@pytest.mark.parametrize("how", ["dataset", "loader"])
def test_a_live_iterator_does_not_keep_the_process_from_exiting(
    kafka: ConnectionSettings, make_topic: TopicFactory, how: str
) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 50)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, str(SCRIPT), "--bootstrap", kafka.bootstrap, "--topic", topic,
           *(["--loader"] if how == "loader" else [])]
    began = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        out, err = proc.communicate(timeout=EXIT_WITHIN_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"still running {EXIT_WITHIN_S:.0f} s after it started: {out!r}, {err[-1500:]}")
    assert "TOOK" in out, err[-2000:]
    assert proc.returncode == 0, err[-2000:]
    assert "Traceback" not in err and "Exception ignored" not in err, err[-2000:]  # a quiet exit
    assert time.monotonic() - began < EXIT_WITHIN_S
