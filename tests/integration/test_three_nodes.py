"""A 3-node cluster loses a node to SIGKILL: acks=all writes go on and nothing is lost,
`kafeed broker status` and `kafeed monitor` show the loss, and the alert reaches a webhook.

One cluster for all of it: starting three nodes and waiting for the controller to fence a
dead one are the slow parts, and each is paid once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from kafeed.broker import LocalCluster, free_port_block
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.monitor.watch import ClusterMonitor, MonitorOptions
from kafeed.topics import TopicAdmin, plan_topic
from tests.cluster_support import (
    ingest_through_leader_kills,
    loader_through_leader_kills,
    produce_numbered,
    read_all,
)


def _commit_when_coordinated(consumer: Consumer, offsets: list[TopicPartition]) -> None:
    """Commit once the group has a coordinator: on a fresh cluster __consumer_offsets is still
    being created and the first commits answer NOT_COORDINATOR or a load in progress."""
    waiting = {KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
               KafkaError.COORDINATOR_NOT_AVAILABLE}
    deadline = time.monotonic() + 60
    while True:
        try:
            consumer.commit(offsets=offsets, asynchronous=False)
            return
        except KafkaException as exc:
            err = exc.args[0]
            if not (err.retriable() or err.code() in waiting) or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("three"), nodes=3, port=free_port_block(6), heap_mb=384,
                           jit="quick")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop(timeout=10, purge=True)


def test_leader_killed_during_ingest_loses_and_duplicates_nothing(three: LocalCluster,
                                                                  tmp_path: Path) -> None:
    """SIGKILL the leader of partition 0 mid-ingest (acks=all, RF 3, min ISR 2), restart it:
    every acknowledged record is in the topic exactly once. Runs first, on a healthy cluster."""
    counts = ingest_through_leader_kills(three, "leader-kill", tmp_path, kills=1, records=8_000)
    print(f"leader kill during ingest: {counts}")
    assert len(counts.killed) == 1
    assert (counts.acked, counts.found, counts.distinct, counts.duplicated, counts.missing) == (
        8_000, 8_000, 8_000, 0, 0)


def test_leader_killed_during_a_loader_run_changes_no_batch(three: LocalCluster) -> None:
    """SIGKILL the leader of partition 0 while a bounded, shuffled StreamLoader reads the topic,
    restart it beside the run: the loader waits for the new leader and yields exactly the
    batches of an undisturbed run. Before the node-loss test, which leaves node 2 down."""
    run = loader_through_leader_kills(three, "loader-kill", docs=1_000, kill_at=(20,))
    print(f"leader kill during a loader run: {len(run.disturbed)} batches "
          f"({run.after_kill} after killing node {run.killed[0]}), longest wait "
          f"{run.longest_wait_s:.1f}s, partition 0 now led by node {run.leaders_after[0]}")
    assert run.leaders_after[0] != run.killed[0]
    assert run.after_kill > 2 * 20
    assert len(run.disturbed) == len(run.undisturbed)
    assert all(a.equal(b) for a, b in zip(run.disturbed, run.undisturbed, strict=True))


def test_three_nodes_lose_one(three: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                              webhook: tuple[str, list[dict[str, Any]]]) -> None:
    url, received = webhook
    cluster = three
    data_dir = cluster.data_dir
    settings = ConnectionSettings(bootstrap=cluster.bootstrap)
    admin = TopicAdmin(settings)
    plan = plan_topic("replicated", brokers=admin.broker_count(), partitions=3)
    assert (plan.replication, plan.min_insync_replicas) == (3, 2)
    admin.create(plan)
    admin.create(plan_topic("watched", brokers=3, partitions=3))
    produce_numbered(cluster.bootstrap, "replicated", 300)
    config = tmp_path / "kafeed.toml"
    config.write_text(f'[alerts]\nwebhook_url = "{url}"\nmax_disk_used_ratio = 1.0\n')
    args = ["monitor", "-b", cluster.bootstrap, "--data-dir", str(data_dir), "--config", str(config),
            "--once", "--json"]

    assert main(args) == 0
    healthy = json.loads(capsys.readouterr().out)
    assert (healthy["brokers_up"], healthy["brokers_expected"]) == (3, 3)
    assert healthy["partitions"]["under_replicated"] == 0
    assert len(healthy["disk"]) == 3 and all(d["free_bytes"] > 0 for d in healthy["disk"])
    assert received == []

    # A monitor that lives through the loss: its group's coordinator may move.
    consumer = Consumer({**settings.client_config(), "group.id": "survivor", "enable.auto.commit": False})
    _commit_when_coordinated(consumer, [TopicPartition("watched", p, 0) for p in range(3)])
    consumer.close()
    live = ClusterMonitor(settings, options=MonitorOptions(groups=["survivor"], timeout_s=5))
    assert [g.lag.group for g in live.poll().groups] == ["survivor"]

    cluster.kill_node(2)
    assert main(["broker", "status", "--data-dir", str(data_dir), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["nodes_up"] == 2
    assert [n["alive"] for n in status["nodes"]] == [True, False, True]

    # acks=all still succeeds with min ISR 2 of 3, and everything stays readable
    produce_numbered(cluster.bootstrap, "replicated", 300, start=300)
    values = read_all(cluster.bootstrap, "replicated", 3)
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(600))

    # The controller fences a dead broker after broker.session.timeout.ms (9 s by default).
    deadline = time.monotonic() + 60
    while admin.broker_count() == 3 and time.monotonic() < deadline:
        time.sleep(0.5)
    # the quorum leader is a live node once the survivors have elected one (each status call
    # starts a JVM that asks the quorum: over 10 s a call on a loaded machine)
    # (a call can also come back without a leader when its JVM outlives its timeout, so the
    # answer checked is the one the wait got, not a further call's)
    deadline, controller = time.monotonic() + 90, None
    while time.monotonic() < deadline:
        controller = cluster.status().controller_id
        if controller in (1, 3):
            break
        time.sleep(1)
    assert controller in (1, 3)

    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert (doc["brokers_up"], doc["brokers_expected"]) == (2, 3)
    assert sorted(b["node_id"] for b in doc["brokers"]) == [1, 3]
    assert doc["missing_brokers"] == [2]
    assert doc["controller_id"] in (1, 3)
    # every partition of both topics had a replica on node 2
    assert doc["partitions"]["under_replicated"] >= 6
    watched = [p for p in doc["partition_problems"] if p["topic"] == "watched"]
    assert len(watched) == 3 and all("under_replicated" in p["problems"] for p in watched)
    assert all(2 not in p["isr"] for p in watched)
    assert [(e["rule"], e["status"]) for e in doc["alerts"]["events"]] == [("broker_down", "firing")]
    assert [(r["rule"], r["status"], r["subject"]) for r in received] == [
        ("broker_down", "firing", "cluster")]
    assert received[0]["value"] == 2 and received[0]["threshold"] == 3

    snap = live.poll()
    live.close()
    assert snap.brokers_up == 2 and snap.missing_brokers == [2]
    assert [len(g.lag.partitions) for g in snap.groups] == [3]
