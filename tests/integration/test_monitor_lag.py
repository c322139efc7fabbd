"""Burrow lag status against a real broker: OK when keeping up, STOP when commits stop, REWIND."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.monitor.lag import GroupLag
from kafeed.monitor.watch import ClusterMonitor, MonitorOptions
from tests.kafka_fixtures import TopicFactory


def produce(kafka: ConnectionSettings, topic: str, n: int, partitions: int = 1) -> None:
    producer = Producer({**kafka.client_config(), "linger.ms": 5})
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def commit(kafka: ConnectionSettings, group: str, topic: str, offset: int, partition: int = 0) -> None:
    """Commit like a memberless (assign-only) consumer, e.g. kafeed's loader mirroring its state."""
    consumer = Consumer({**kafka.client_config(), "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        consumer.close()


def group_of(monitor: ClusterMonitor, group: str) -> GroupLag:
    snap = monitor.poll()
    found = [g.lag for g in snap.groups if g.lag.group == group]
    assert found, f"group {group} not in the snapshot"
    return found[0]


_open: list[ClusterMonitor] = []


@pytest.fixture(autouse=True)
def _close_monitors() -> Iterator[None]:
    yield
    while _open:
        _open.pop().close()


def watcher(kafka: ConnectionSettings, group: str, *, window: int = 4,
            interval: float = 0.5) -> ClusterMonitor:
    options = MonitorOptions(interval_s=interval, window=window, groups=[group])
    monitor = ClusterMonitor(kafka, options=options)
    _open.append(monitor)
    return monitor


def test_group_that_keeps_up_is_ok(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    group = f"{topic}-ok"
    consumer = Consumer({**kafka.client_config(), "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    monitor = watcher(kafka, group, window=3)
    try:
        statuses = []
        for round_ in range(5):
            produce(kafka, topic, 50, partitions=2)
            seen = 0
            deadline = time.monotonic() + 30
            while seen < 50 and time.monotonic() < deadline:
                msgs = [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
                seen += len(msgs)
            assert seen == 50, f"round {round_}: consumed {seen} of 50"
            consumer.commit(asynchronous=False)
            lag = group_of(monitor, group)
            statuses.append(lag.status)
            time.sleep(0.3)
        assert statuses == ["OK"] * 5
        assert lag.total_lag == 0
        assert {p.partition for p in lag.partitions} == {0, 1}
        assert all(p.complete == 1.0 for p in lag.partitions)
    finally:
        consumer.close()


def test_group_that_stops_committing_shows_stop(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    group = f"{topic}-stop"
    produce(kafka, topic, 200)
    monitor = watcher(kafka, group, window=4, interval=0.5)  # STOP after >= 2 s of silence
    for offset in (10, 20, 30):
        commit(kafka, group, topic, offset)
        assert group_of(monitor, group).status == "OK"  # moving, window not full
        time.sleep(0.3)
    # commits stop while records keep arriving
    seen: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        produce(kafka, topic, 5)
        lag = group_of(monitor, group)
        seen.append(lag.partitions[0].status)
        if seen[-1] in ("STOP", "STALL"):
            break
        time.sleep(0.5)
    assert seen[-1] == "STOP", seen
    assert lag.status == "ERR"
    assert lag.partitions[0].lag >= 170


def test_rewind_is_reported(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    group = f"{topic}-rewind"
    produce(kafka, topic, 100)
    monitor = watcher(kafka, group)
    commit(kafka, group, topic, 60)
    group_of(monitor, group)
    commit(kafka, group, topic, 80)
    assert group_of(monitor, group).status == "OK"
    admin = KafkaClients(kafka).admin()
    future = admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0, 5)])])[group]
    future.result(timeout=15)
    lag = group_of(monitor, group)
    assert (lag.partitions[0].status, lag.partitions[0].offset, lag.status) == ("REWIND", 5, "ERR")


@pytest.mark.parametrize(("committed", "expected"), [(100, "OK"), (10, "STOP")])
def test_once_json_with_samples(kafka: ConnectionSettings, make_topic: TopicFactory,
                                capsys: pytest.CaptureFixture[str], committed: int, expected: str) -> None:
    topic = make_topic(partitions=1)
    group = f"{topic}-cli"
    produce(kafka, topic, 100)
    commit(kafka, group, topic, committed)
    capsys.readouterr()
    # A memberless group that never moves: one observation; STOP once the silence
    # exceeds window x interval, so --samples must exceed --window.
    args = ["monitor", "-b", kafka.bootstrap, "--once", "--json", "--samples", "4", "--interval", "0.5",
            "--window", "3", "--group", group]
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    (g,) = doc["groups"]
    assert (g["group"], g["partitions"][0]["status"]) == (group, expected)
    assert g["total_lag"] == 100 - committed
    assert doc["brokers_up"] == 1 and doc["controller_id"] is not None
    assert doc["topics"][topic]["high_watermark"] == 100
    assert doc["topics"][topic]["in_rate"] == 0.0
