"""Faults of the cluster itself (acks=all, RF 3, min ISR 2): under `kafeed ingest` the partition
leader's broker SIGKILLed five times in a row (restarted each time), and a broker paused with
SIGSTOP for longer than the session timeout; under `kafeed prepare` its output's leader killed.
Every acknowledged record is in the topic exactly once. Under a bounded StreamLoader run the
leaders of all three partitions killed in turn: the batches are those of an undisturbed run.

Slow (a 3-node cluster and several broker restarts): `pytest -m slow tests/faults/test_cluster_faults.py`.
The default run has the one-kill version in tests/integration/test_three_nodes.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic
from tests.cluster_support import (
    ingest_through_leader_kills,
    kill_and_restart,
    loader_through_leader_kills,
    partition_leader,
    pause_past_session_timeout,
    wait_full_isr,
)
from tests.prepare_support import (
    document_ids,
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    sample_record,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("faults"), nodes=3, port=free_port_block(6), heap_mb=384,
                           jit="quick")
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


def test_leader_killed_during_prepare_stays_exactly_once(three: LocalCluster, tmp_path: Path) -> None:
    """`kafeed prepare` (batches of 20, one transaction each) while the leader of its output's
    partition 0 is SIGKILLed and restarted: every document once, the run balanced."""
    settings = ConnectionSettings(bootstrap=three.bootstrap)
    raw, output, group = "prep-raw", "prep-tokens", "prep-group"
    TopicAdmin(settings).create(plan_topic(raw, brokers=3, partitions=3))
    n_docs = 3000
    produce(settings, raw, [sample_record(t) for t in paragraphs(n_docs)])
    command = prepare_command(three.bootstrap, raw, output, group, "--batch-size", "20",
                              "--until-caught-up", "--json")
    proc = subprocess.Popen(command, env=prepare_env(str(tmp_path)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 180
        while high_watermarks(settings, output) < n_docs // 3 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        assert proc.poll() is None, "prepare finished before the kill"
        kill_and_restart(three, partition_leader(three.bootstrap, output))
        out, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    stats = json.loads(out)
    assert stats["balanced"] and stats["documents_out"] == n_docs
    ids = document_ids(read_topic(settings, output, timeout=120))
    print(f"leader kill during prepare: written {stats['documents_out']}, found {len(ids)}, "
          f"duplicated {len(ids) - len(set(ids))}")
    assert len(ids) == len(set(ids)) == n_docs
    wait_full_isr(three.bootstrap, output, 3)


def test_three_leader_kills_during_a_loader_run_change_no_batch(three: LocalCluster) -> None:
    """The leaders of partitions 0, 1 and 2 SIGKILLed in turn during one bounded, shuffled
    StreamLoader run, each restarted beside it: the same batches as the undisturbed run."""
    kill_at = (40, 300, 600)
    run = loader_through_leader_kills(three, "loader-kills", docs=6_000, kill_at=kill_at)
    print(f"three leader kills during a loader run: {len(run.disturbed)} batches, nodes killed "
          f"{run.killed}, longest wait {run.longest_wait_s:.1f}s, leaders now {run.leaders_after}")
    assert len(run.killed) == 3
    assert len(run.disturbed) == len(run.undisturbed) > kill_at[-1] + 100
    assert all(a.equal(b) for a, b in zip(run.disturbed, run.undisturbed, strict=True))
