"""Unbounded loader survives its broker going away for a while (slow: restarts a broker)."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import kafeed
from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.loader_data import counts, produce_docs


def _wait(cond: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_unbounded_loader_waits_out_a_broker_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cluster = LocalCluster(tmp_path / "kafka", nodes=1, port=free_port_block(2), heap_mb=512,
                           jit="quick")
    cluster.start()
    try:
        conn = ConnectionSettings(bootstrap=cluster.bootstrap)
        TopicAdmin(conn).create(plan_topic("t", brokers=1, partitions=2))
        first = produce_docs(cluster.bootstrap, "t", 100, seed=1)
        ds = kafeed.KafkaTokenDataset("t", seq_len=7, eos_id=0, connection=conn, end=None)
        loader = kafeed.StreamLoader(ds, batch_size=1)
        seen = np.zeros(202, dtype=np.int64)
        stop = threading.Event()

        def consume() -> None:
            for batch in loader:
                seen[:] += counts([batch], 202)
                if stop.is_set():
                    return

        thread = threading.Thread(target=consume, daemon=True)
        with caplog.at_level(logging.WARNING, logger="kafeed"):
            thread.start()
            assert _wait(lambda: seen[:80].sum() >= first[:80].sum() - 8, 60)
            cluster.stop(timeout=20)
            time.sleep(8)
            cluster.start()
            produce_docs(cluster.bootstrap, "t", 100, seed=2, first=100)
            assert _wait(lambda: seen[101:].sum() > 500, 120), "no records after the restart"
            stop.set()
        assert "retrying, records resume when the broker is back" in caplog.text
    finally:
        cluster.stop(timeout=20, purge=True)
