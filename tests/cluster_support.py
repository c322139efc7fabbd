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
    from kafeed.kafka import KafkaClients

    client = KafkaClients(ConnectionSettings(bootstrap=bootstrap)).admin()
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
    from kafeed.kafka import KafkaClients

    client = KafkaClients(ConnectionSettings(bootstrap=bootstrap)).admin()
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


@dataclass(frozen=True)
class LoaderFaultRun:
    """Two bounded StreamLoader runs over one topic, the second with leader kills in it."""

    undisturbed: list[Any]
    disturbed: list[Any]
    killed: tuple[int, ...]
    #: Batches the disturbed run yielded after the first kill.
    after_kill: int
    #: The longest wait between two batches of the disturbed run, seconds: a failover.
    longest_wait_s: float
    #: Leaders of partitions 0, 1, 2 once the run is over.
    leaders_after: tuple[int, ...]


def loader_through_leader_kills(cluster: LocalCluster, topic: str, *, docs: int, kill_at: tuple[int, ...],
                                batch_size: int = 8, seq_len: int = 127) -> LoaderFaultRun:
    """A bounded ``StreamLoader`` (shuffle buffer, fixed seed) over a 3-partition RF 3 topic, run
    undisturbed, then again with a leader's broker SIGKILLed after each batch count in
    ``kill_at`` (kill k takes the leader of partition k mod 3) and restarted while the loader
    goes on; each restart is complete before the next kill.

    The consumer's read-ahead is kept small (64 KiB per fetch, 64 KiB queued) so most of the
    topic is still to be fetched at a kill: the loader has to find the new leaders.
    """
    import kafeed
    from tests.integration.loader_data import produce_docs

    conn = ConnectionSettings(bootstrap=cluster.bootstrap)
    TopicAdmin(conn).create(plan_topic(topic, brokers=3, partitions=3))
    produce_docs(cluster.bootstrap, topic, docs, seed=3, low=20, high=400)
    small_reads = {"fetch.max.bytes": 65536, "message.max.bytes": 65536,
                   "max.partition.fetch.bytes": 16384, "queued.max.messages.kbytes": 64}

    def loader() -> Any:
        ds = kafeed.KafkaTokenDataset(topic, seq_len=seq_len, eos_id=0, connection=conn, shuffle_buffer=64,
                                      seed=11, consume_batch=50, queue_records=100,
                                      consumer_config=small_reads)
        return kafeed.StreamLoader(ds, batch_size=batch_size)

    undisturbed = [b["tokens"].clone() for b in loader()]
    assert len(undisturbed) > kill_at[-1] + 2 * kill_at[0], "too little data for kills mid-run"
    disturbed: list[Any] = []
    restart: threading.Thread | None = None
    killed: list[int] = []
    longest = 0.0
    last = time.monotonic()
    try:
        for batch in loader():
            longest = max(longest, time.monotonic() - last)
            disturbed.append(batch["tokens"].clone())
            if len(disturbed) in kill_at:
                if restart is not None:
                    restart.join(timeout=300)
                    wait_full_isr(cluster.bootstrap, topic, 3)
                node = partition_leader(cluster.bootstrap, topic, len(killed) % 3)
                cluster.kill_node(node)
                killed.append(node)
                # Restarted beside the loader, which meanwhile has to find the new leaders.
                restart = threading.Thread(target=cluster.start, name="restart-killed-node")
                restart.start()
            last = time.monotonic()
    finally:
        if restart is not None:
            restart.join(timeout=300)
    wait_brokers(cluster.bootstrap, 3)
    wait_full_isr(cluster.bootstrap, topic, 3)
    return LoaderFaultRun(undisturbed=undisturbed, disturbed=disturbed, killed=tuple(killed),
                          after_kill=len(disturbed) - kill_at[0], longest_wait_s=longest,
                          leaders_after=tuple(partition_leader(cluster.bootstrap, topic, p)
                                              for p in range(3)))
