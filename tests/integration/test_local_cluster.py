"""The local cluster itself: restart keeps data, a 3-node cluster survives a kill -9."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafeed.broker import LocalCluster, free_port_block
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.errors import BrokerError
from kafeed.topics import TopicAdmin, plan_topic


def _produce(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 30000})
    for i in range(start, start + n):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def _read_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "read-all",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    admin = TopicAdmin(ConnectionSettings(bootstrap=bootstrap))
    info = admin.describe(topic, sizes=False)
    want = sum(p.high_watermark for p in info.partitions)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    for _ in range(200):
        values += [m.value() for m in consumer.consume(1000, timeout=0.5) if m.error() is None]
        if len(values) >= want:
            break
    consumer.close()
    return values


def test_restart_keeps_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port_block(2)
    data_dir = tmp_path / "restart"
    args = ["--data-dir", str(data_dir)]
    assert main(["broker", "start", "--port", str(port), *args]) == 0
    try:
        bootstrap = f"127.0.0.1:{port}"
        TopicAdmin(ConnectionSettings(bootstrap=bootstrap)).create(
            plan_topic("kept", brokers=1, partitions=2))
        _produce(bootstrap, "kept", 500)
        assert main(["broker", "start", *args]) == 0
        assert "already running" in capsys.readouterr().out
        assert main(["broker", "stop", *args]) == 0
        assert main(["broker", "start", *args]) == 0
        assert sorted(_read_all(bootstrap, "kept", 2)) == sorted(f"v{i}".encode() for i in range(500))
    finally:
        assert main(["broker", "stop", "--purge", *args]) == 0


def test_port_in_use_is_one_clear_error(tmp_path: Path) -> None:
    port = free_port_block(2)
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", port))
        blocker.listen()
        with pytest.raises(BrokerError, match=f"Port {port}"):
            LocalCluster(tmp_path / "busy", nodes=1, port=port).start()


def test_three_nodes_survive_a_kill(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port_block(6)
    data_dir = tmp_path / "three"
    cluster = LocalCluster(data_dir, nodes=3, port=port, heap_mb=384)
    cluster.start()
    try:
        settings = ConnectionSettings(bootstrap=cluster.bootstrap)
        admin = TopicAdmin(settings)
        plan = plan_topic("replicated", brokers=admin.broker_count(), partitions=3)
        assert (plan.replication, plan.min_insync_replicas) == (3, 2)
        admin.create(plan)
        _produce(cluster.bootstrap, "replicated", 300)

        cluster.kill_node(2)
        assert main(["broker", "status", "--data-dir", str(data_dir), "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert status["nodes_up"] == 2
        assert [n["alive"] for n in status["nodes"]] == [True, False, True]
        # the quorum leader is a live node once the survivors have elected one
        deadline = time.monotonic() + 30
        while cluster.status().controller_id not in (1, 3) and time.monotonic() < deadline:
            time.sleep(1)
        assert cluster.status().controller_id in (1, 3)

        # acks=all still succeeds with min ISR 2 of 3, and everything stays readable
        _produce(cluster.bootstrap, "replicated", 300, start=300)
        values = _read_all(cluster.bootstrap, "replicated", 3)
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(600))
    finally:
        cluster.stop(timeout=10, purge=True)
