"""Plain client helpers for the tests of local clusters themselves."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from kafeed.broker import LocalCluster
from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic


def produce_numbered(bootstrap: str, topic: str, n: int, start: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.timeout.ms": 30000})
    for i in range(start, start + n):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0


def read_all(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
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


def wait_full_isr(bootstrap: str, topic: str, replicas: int, timeout: float = 120.0) -> None:
    """Until every partition of ``topic`` has all ``replicas`` in sync again."""
    from kafeed.kafka import admin_client

    client = admin_client(ConnectionSettings(bootstrap=bootstrap))
    deadline = time.monotonic() + timeout
    while True:
        try:
            parts = client.list_topics(topic, timeout=5).topics[topic].partitions.values()
            if parts and all(len(p.isrs) == replicas and p.leader >= 0 for p in parts):
                return
        except Exception:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{topic}: replicas never all back in sync")
        time.sleep(0.5)


def wait_brokers(bootstrap: str, count: int, timeout: float = 120.0) -> None:
    """Until the cluster's metadata lists ``count`` brokers (a restarted one has registered)."""
    admin = TopicAdmin(ConnectionSettings(bootstrap=bootstrap))
    deadline = time.monotonic() + timeout
    while admin.broker_count() < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} brokers registered")
        time.sleep(0.5)


def partition_leader(bootstrap: str, topic: str, partition: int = 0) -> int:
    from kafeed.kafka import admin_client

    client = admin_client(ConnectionSettings(bootstrap=bootstrap))
    leader: int = client.list_topics(topic, timeout=10).topics[topic].partitions[partition].leader
    return leader


@dataclass(frozen=True)
class FaultCounts:
    """What a fault run acknowledged and what the topic holds afterwards."""

    acked: int
    found: int
    distinct: int
    duplicated: int
    missing: int
    killed: tuple[int, ...]


def kill_and_restart(cluster: LocalCluster, node: int) -> None:
    cluster.kill_node(node)
    cluster.start()  # respawns the killed node


def pause_past_session_timeout(cluster: LocalCluster, node: int, seconds: float = 12.0) -> None:
    """SIGSTOP a node for longer than broker.session.timeout.ms (9 s), then SIGCONT it."""
    import os
    import signal

    pid = cluster.node_pid(node)
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)  # the fault itself is the duration: nothing to wait for instead
    finally:
        os.kill(pid, signal.SIGCONT)


def ingest_through_leader_kills(cluster: LocalCluster, topic: str, work: Path, *, kills: int,
                                records: int, pace_s: float = 0.05,
                                fault: Callable[[LocalCluster, int], None] = kill_and_restart,
                                ) -> FaultCounts:
    """`kafeed ingest` (acks=all, transactional) into a RF 3 / min ISR 2 topic while the leader of
    partition 0 is SIGKILLed ``kills`` times and restarted (or hit by another ``fault``); read
    back with read_committed.

    ``on_progress`` paces the run (it is called once per read batch) so the faults land mid-run.
    """
    from kafeed.ingest import IngestOptions, ingest
    from tests.integration.ingest_helpers import read_all as read_committed

    settings = ConnectionSettings(bootstrap=cluster.bootstrap)
    TopicAdmin(settings).create(plan_topic(topic, brokers=3, partitions=3))
    src = work / f"{topic}.jsonl"
    src.write_text("".join(f'{{"id": "r{i}", "text": "record {i}"}}\n' for i in range(records)))
    options = IngestOptions(job_id=f"{topic}-job", read_batch=250, commit_records=1000,
                            preflight_timeout_s=60)
    produced = [0]

    def paced(tick: Any) -> None:
        produced[0] = tick.produced
        time.sleep(pace_s)

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["summary"] = ingest([src], topic=topic, settings=settings, options=options,
                                        on_progress=paced)
        except BaseException as exc:  # reported by the caller
            outcome["error"] = exc

    thread = threading.Thread(target=run, name="ingest-under-faults")
    thread.start()
    killed = []
    try:
        for k in range(kills):
            mark = (k + 1) * records // (kills + 2)
            deadline = time.monotonic() + 180
            while produced[0] < mark and thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.02)
            assert thread.is_alive(), f"ingest ended before kill {k + 1}: {outcome}"
            leader = partition_leader(cluster.bootstrap, topic)
            fault(cluster, leader)
            killed.append(leader)
            wait_full_isr(cluster.bootstrap, topic, 3)
    finally:
        thread.join(timeout=600)
    wait_brokers(cluster.bootstrap, 3)
    assert "error" not in outcome, outcome.get("error")
    summary = outcome["summary"]
    keys = [r.key for r in read_committed(settings, topic, timeout=120)]
    distinct = set(keys)
    return FaultCounts(acked=summary.produced, found=len(keys), distinct=len(distinct),
                       duplicated=len(keys) - len(distinct),
                       missing=len({f"r{i}".encode() for i in range(records)} - distinct),
                       killed=tuple(killed))
