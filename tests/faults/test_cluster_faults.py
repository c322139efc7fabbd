"""Faults of the cluster itself, under `kafeed ingest` (acks=all, RF 3, min ISR 2): the partition
leader's broker SIGKILLed five times in a row (restarted each time), and a broker paused with
SIGSTOP for longer than the session timeout. Every acknowledged record is in the topic exactly once.

Slow (a 3-node cluster and several broker restarts): `pytest -m slow tests/faults/test_cluster_faults.py`.
The default run has the one-kill version in tests/integration/test_three_nodes.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster, free_port_block
from tests.cluster_support import ingest_through_leader_kills, pause_past_session_timeout

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("faults"), nodes=3, port=free_port_block(6), heap_mb=384)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(timeout=10, purge=True)


def test_five_leader_kills_during_ingest(three: LocalCluster, tmp_path: Path) -> None:
    counts = ingest_through_leader_kills(three, "five-kills", tmp_path, kills=5, records=30_000, pace_s=0.1)
    print(f"five leader kills during ingest: {counts}")
    assert len(counts.killed) == 5
    assert (counts.acked, counts.found, counts.distinct, counts.duplicated, counts.missing) == (
        30_000, 30_000, 30_000, 0, 0)


def test_leader_paused_past_session_timeout_during_ingest(three: LocalCluster, tmp_path: Path) -> None:
    counts = ingest_through_leader_kills(three, "paused", tmp_path, kills=1, records=10_000,
                                         fault=pause_past_session_timeout)
    print(f"leader paused during ingest: {counts}")
    assert (counts.acked, counts.found, counts.distinct, counts.duplicated, counts.missing) == (
        10_000, 10_000, 10_000, 0, 0)
