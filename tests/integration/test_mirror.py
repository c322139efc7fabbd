"""`kafeed mirror` on real clusters: two sites and a training cluster, each a local KRaft node.

Records are produced at both sites while the mirror runs and is SIGKILLed at random
moments; a drain then leaves every record of both sites in the training cluster exactly
once (read_committed), each target partition holding its source partition's records in
their order.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, Producer, TopicPartition

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.mirror import load_mirror_settings, run_mirror
from kafeed.mirror.lineage import site_lineage
from kafeed.mirror.origin import ORIGIN_HEADER
from kafeed.mirror.progress import end_offsets, latest_by_key
from kafeed.mirror.render import status_topic
from kafeed.prepare import PrepareSettings, run_prepare
from kafeed.schema import decode_sample
from kafeed.topics import TopicAdmin, plan_topic
from tests.prepare_support import paragraphs, produce, sample_record

SITES = ("site-a", "site-b")
PARTITIONS = 2


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    """Two site clusters and a training cluster, started side by side."""
    made = {name: LocalCluster(tmp_path_factory.mktemp(name), nodes=1, port=free_port_block(2),
                               heap_mb=384, jit="quick") for name in (*SITES, "train")}
    try:
        with ThreadPoolExecutor(len(made)) as pool:
            for started in [pool.submit(c.start, timeout=180) for c in made.values()]:
                started.result()
        yield made
    finally:
        for cluster in made.values():
            cluster.stop(timeout=15, purge=True)


def _conn(cluster: LocalCluster) -> ConnectionSettings:
    return ConnectionSettings(bootstrap=cluster.bootstrap)


def _write_config(path: Path, clusters: dict[str, LocalCluster], topic: str, **extra: object) -> Path:
    lines = [f'work_dir = "{path.parent / "mirror-work"}"', "heap_mb = 320", "rebalance_delay_s = 0",
             *(f"{k} = {json.dumps(v)}" for k, v in extra.items()),
             "[target]", 'alias = "train"', f'bootstrap = "{clusters["train"].bootstrap}"']
    for site in SITES:
        lines += ["[[sites]]", f'alias = "{site}"', f'bootstrap = "{clusters[site].bootstrap}"',
                  f'topics = "{topic}"']
    path.write_text("\n".join(lines) + "\n")
    return path


def _mirror_cmd(config: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "kafeed.cli.main", "mirror", "run", "--config", str(config),
            "--jit", "quick", *args]


class SiteProducer:
    """Produces ``<site>:<n>`` records, keyed across both partitions, until stopped."""

    def __init__(self, cluster: LocalCluster, site: str, topic: str, *, first: int = 0) -> None:
        self.site, self.topic, self.sent = site, topic, first
        self._producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True,
                                   "linger.ms": 5})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"produce-{site}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):  # about 2,500 records/s: a steady flow, not a flood
            for _ in range(50):
                self._producer.produce(self.topic, key=str(self.sent % 7).encode(),
                                       value=f"{self.site}:{self.sent}".encode())
                self.sent += 1
            self._producer.poll(0)

    def finish(self) -> int:
        self._stop.set()
        self._thread.join()
        assert self._producer.flush(30) == 0
        return self.sent


def _read_all(connection: ConnectionSettings, topic: str,
              origins: dict[int, list[str | None]] | None = None) -> dict[int, list[str]]:
    """Every committed record of ``topic``, per partition in offset order; ``origins`` gets, in
    the same order, each record's ``kafeed.mirror.origin`` header, or its own offset (a source)."""
    consumer = KafkaClients(connection).read_committed_consumer({"group.id": f"check-{uuid.uuid4().hex[:8]}",
                                                    "enable.partition.eof": True})
    got: dict[int, list[str]] = {p: [] for p in range(PARTITIONS)}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        todo, deadline = set(got), time.monotonic() + 60
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                    todo.discard(msg.partition())
                else:
                    got[msg.partition()].append(msg.value().decode())
                    if origins is not None:
                        named = dict(msg.headers() or []).get(ORIGIN_HEADER)
                        origins.setdefault(msg.partition(), []).append(
                            named.decode() if named is not None else str(msg.offset()))
        assert not todo, f"{topic}: partitions {sorted(todo)} not read to their end"
    finally:
        consumer.close()
    return got


def _mirrored(clusters: dict[str, LocalCluster], topic: str) -> int:
    """Records a read_committed reader of the target sees, both sites together (offsets)."""
    target = _conn(clusters["train"])
    return sum(end_offsets(target, [f"{site}.{topic}" for site in SITES]).values())


def _start(config: Path, output: Path) -> subprocess.Popen[bytes]:
    """``kafeed mirror run`` in the background, its output appended to ``output``."""
    with output.open("ab") as out:
        return subprocess.Popen(_mirror_cmd(config), stdout=out, stderr=subprocess.STDOUT)


def _wait_for(what: str, ready: Callable[[], bool], proc: subprocess.Popen[bytes], output: Path,
              timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None:
            pytest.fail(f"kafeed mirror exited ({proc.returncode}) before {what}: {output.read_text()}")
        if time.monotonic() > deadline:
            proc.kill()  # left running, it would go on creating topics under the next test
            proc.wait(10)
            pytest.fail(f"no {what} within {timeout:.0f} s")
        time.sleep(0.3)


def _gone(marker: str) -> bool:
    """No process of this machine names ``marker`` on its command line."""
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    return False
        except OSError:
            continue
    return True


def _kill_and_check(proc: subprocess.Popen[bytes], work: Path) -> None:
    """SIGKILL the kafeed process; its MirrorMaker JVM must die with it."""
    marker = str(work / f"mm2-{proc.pid}.properties")
    proc.kill()
    proc.wait(10)
    deadline = time.monotonic() + 15
    while not _gone(marker):
        assert time.monotonic() < deadline, "the MirrorMaker JVM outlived the kafeed process"
        time.sleep(0.1)


def _create(clusters: dict[str, LocalCluster], topic: str) -> None:
    for site in SITES:
        TopicAdmin(_conn(clusters[site])).create(plan_topic(topic, brokers=1, partitions=PARTITIONS))


def _assert_exactly_once_in_order(clusters: dict[str, LocalCluster], topic: str,
                                  sent: dict[str, int]) -> None:
    for site in SITES:
        offsets: dict[int, list[str | None]] = {}
        origins: dict[int, list[str | None]] = {}
        source = _read_all(_conn(clusters[site]), topic, offsets)
        mirrored = _read_all(_conn(clusters["train"]), f"{site}.{topic}", origins)
        ids = sorted(int(v.split(":")[1]) for part in mirrored.values() for v in part)
        assert len(ids) == sent[site], f"{site}: {len(ids)} mirrored of {sent[site]} sent"
        assert ids == list(range(sent[site])), f"{site}: a record missing or mirrored twice"
        for p in range(PARTITIONS):
            assert mirrored[p] == source[p], f"{site} partition {p}: not the source's records in order"
            # Lineage: each copy names its site record (kafeed.mirror.origin, one header).
            assert origins.get(p, []) == [f"{site}/{topic}/{p}/{o}" for o in offsets.get(p, [])]


# One kill in the default run (each restart costs 10-70 s of Connect start-up and rebalance);
# three at random moments in the slow one.
@pytest.mark.parametrize("kills", [1, pytest.param(3, marks=pytest.mark.slow)])
def test_killed_mirror_restarts_and_a_drain_leaves_every_record_once_in_order(
        clusters: dict[str, LocalCluster], tmp_path: Path, kills: int) -> None:
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    _create(clusters, topic)
    config = _write_config(tmp_path / "sites.toml", clusters, topic)
    work, output = tmp_path / "mirror-work", tmp_path / "mirror.out"
    producers = [SiteProducer(clusters[site], site, topic) for site in SITES]
    rng = random.Random()
    proc: subprocess.Popen[bytes] | None = None
    try:
        for _ in range(kills):
            before = _mirrored(clusters, topic)
            t0 = time.monotonic()
            proc = _start(config, output)
            _wait_for("mirrored records", lambda n=before: _mirrored(clusters, topic) > n, proc, output, 240)
            print(f"mirrored records {time.monotonic() - t0:.1f} s after the start")
            time.sleep(rng.uniform(0.0, 1.5))  # a random moment in the flow, not a readiness wait
            properties = work / f"mm2-{proc.pid}.properties"
            assert properties.stat().st_mode & 0o077 == 0, "the properties file is readable by others"
            _kill_and_check(proc, work)
    finally:
        if proc is not None and proc.poll() is None:  # a failed wait: leave nothing running
            proc.kill()
            proc.wait(10)
        sent = {p.site: p.finish() for p in producers}
    t0 = time.monotonic()
    drained = subprocess.run(_mirror_cmd(config, "--until-caught-up", "--json"), capture_output=True,
                             text=True, timeout=240)
    print(f"drained in {time.monotonic() - t0:.1f} s")
    assert drained.returncode == 0, drained.stdout + drained.stderr
    assert json.loads(drained.stdout)["caught_up"] is True
    _assert_exactly_once_in_order(clusters, topic, sent)
    status = subprocess.run([sys.executable, "-m", "kafeed.cli.main", "mirror", "status", "--config",
                             str(config), "--json"], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    sites = {s["site"]: s for s in json.loads(status.stdout)["sites"]}
    assert {s: (v["reachable"], v["behind_records"]) for s, v in sites.items()} == {
        "site-a": (True, 0), "site-b": (True, 0)}


@pytest.mark.parametrize(("case", "code", "said"), [
    ("unknown site", 2, "Site 'site-c' is not in the mirror's config"),
    ("unreachable site", 1, "Site 'site-b' at 127.0.0.1:"),
    ("no topic", 2, "Site 'site-a' has no topic matching 'nothing-.*'"),
    # Reached through a client file, the training cluster passes for a site by address.
    ("site is the target", 2, "Site 'site-b' is the target cluster itself"),
])
def test_bad_input_is_one_sentence_and_writes_nothing(
        clusters: dict[str, LocalCluster], tmp_path: Path, case: str, code: int, said: str) -> None:
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    _create(clusters, topic)
    config = _write_config(tmp_path / "sites.toml", clusters, topic)
    args: list[str] = []
    if case == "unknown site":
        args = ["--site", "site-c"]
    elif case == "unreachable site":
        config.write_text(config.read_text().replace(clusters["site-b"].bootstrap,
                                                     f"127.0.0.1:{free_port_block(1)}"))
    elif case == "site is the target":
        client = tmp_path / "train-client.toml"
        client.write_text(f'[connection]\nbootstrap = "{clusters["train"].bootstrap}"\n')
        config.write_text(config.read_text().replace(f'bootstrap = "{clusters["site-b"].bootstrap}"',
                                                     f'client_file = "{client}"'))
    else:
        config.write_text(config.read_text().replace(f'topics = "{topic}"\n[[sites]]',
                                                     'topics = "nothing-.*"\n[[sites]]'))
    before = set(TopicAdmin(_conn(clusters["train"])).list(internal=True))
    done = subprocess.run(_mirror_cmd(config, *args), capture_output=True, text=True, timeout=120)
    assert done.returncode == code, done.stdout + done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "mirror-work").exists(), "a refused config wrote files"
    assert set(TopicAdmin(_conn(clusters["train"])).list(internal=True)) == before


@pytest.mark.slow  # a fourth cluster, started twice: 20 s
def test_a_target_without_transactions_is_refused_before_anything_is_written(
        clusters: dict[str, LocalCluster], tmp_path: Path) -> None:
    # A node whose transaction state log needs three replicas: no transaction can start on it.
    no_txn = LocalCluster(tmp_path / "no-txn", nodes=1, port=free_port_block(2), heap_mb=256, jit="quick")
    try:
        no_txn.start(timeout=180)
        no_txn.stop(timeout=15)
        for spec in no_txn.recorded_nodes() or []:
            with spec.properties_file.open("a") as fh:
                fh.write("transaction.state.log.replication.factor=3\n")
        no_txn.start(timeout=180)
        topic = f"raw-{uuid.uuid4().hex[:8]}"
        _create(clusters, topic)
        config = _write_config(tmp_path / "sites.toml", clusters, topic)
        config.write_text(config.read_text().replace(clusters["train"].bootstrap, no_txn.bootstrap))
        done = subprocess.run(_mirror_cmd(config), capture_output=True, text=True, timeout=120)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "The target cluster 'train' cannot run transactions" in done.stderr
        assert not (tmp_path / "mirror-work").exists()
        assert not [t for t in TopicAdmin(_conn(no_txn)).list(internal=True) if "mm2" in t]
    finally:
        no_txn.stop(timeout=15, purge=True)


@pytest.mark.slow
def test_a_site_stopped_and_restarted_mid_run_loses_and_repeats_nothing(
        clusters: dict[str, LocalCluster], tmp_path: Path) -> None:
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    _create(clusters, topic)
    config = _write_config(tmp_path / "sites.toml", clusters, topic)
    producers = {site: SiteProducer(clusters[site], site, topic) for site in SITES}
    output = tmp_path / "mirror.out"
    proc = _start(config, output)
    try:
        before = _mirrored(clusters, topic)
        _wait_for("mirrored records", lambda: _mirrored(clusters, topic) > before, proc, output, 240)
        sent_b = producers.pop("site-b").finish()
        clusters["site-b"].stop(timeout=15)
        still = _mirrored(clusters, topic)
        _wait_for("site-a records while site-b is down", lambda: _mirrored(clusters, topic) > still + 500,
                  proc, output, 60)
        clusters["site-b"].start(timeout=180)
        producers["site-b"] = SiteProducer(clusters["site-b"], "site-b", topic, first=sent_b)
    finally:
        sent = {site: p.finish() for site, p in producers.items()}
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    drained = subprocess.run(_mirror_cmd(config, "--until-caught-up"), capture_output=True, text=True,
                             timeout=300)
    assert drained.returncode == 0, drained.stdout + drained.stderr
    _assert_exactly_once_in_order(clusters, topic, sent)


def _record_at(connection: ConnectionSettings, topic: str, partition: int, offset: int) -> bytes:
    consumer = KafkaClients(connection).read_committed_consumer({"group.id": f"at-{uuid.uuid4().hex[:8]}"})
    try:
        consumer.assign([TopicPartition(topic, partition, offset)])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for msg in consumer.consume(1, timeout=0.5):
                assert msg.error() is None, msg.error()
                assert msg.offset() == offset, f"{topic}[{partition}] has no record at {offset}"
                return bytes(msg.value())
        pytest.fail(f"{topic}[{partition}]@{offset} not read within 30 s")
    finally:
        consumer.close()


@pytest.mark.slow  # a mirror drain and two prepares: 30 s on a quiet machine, 100 s on a busy one
def test_prepared_site_documents_trace_back_to_their_site_records(
        clusters: dict[str, LocalCluster], tmp_path: Path) -> None:
    topic = f"docs-{uuid.uuid4().hex[:8]}"
    _create(clusters, topic)
    texts = paragraphs(24, seed=topic)
    # One document produced at both sites: two records, one per site topic, each traced to its own.
    docs = {"site-a": texts[:12], "site-b": [texts[0], *texts[12:]]}
    for site, site_docs in docs.items():
        produce(_conn(clusters[site]), topic, [sample_record(t) for t in site_docs])
    config = _write_config(tmp_path / "sites.toml", clusters, topic)
    t0 = time.monotonic()
    assert run_mirror(load_mirror_settings(config), until_caught_up=True, jit="quick").caught_up
    print(f"mirrored in {time.monotonic() - t0:.1f} s")
    train, tokens = _conn(clusters["train"]), f"{topic}.tokens"
    for site in SITES:
        stats = run_prepare(PrepareSettings(
            input=f"{site}.{topic}", output=tokens, group=f"prepare-{site}-{topic}", idle_s=1.0,
            kafka={"batch_size": 50, "transaction_timeout_ms": 10_000}), train,  # type: ignore[arg-type]
            until_caught_up=True)
        assert stats.balanced and stats.documents_out == len(docs[site]), stats
    ends = end_offsets(train, [tokens])
    found = site_lineage(train, {f"{t}:{p}": [(0, end)] for (t, p), end in ends.items() if end})
    assert found.without_origin == 0
    assert sorted(o.site for _, o in found.documents) == ["site-a"] * 12 + ["site-b"] * 13
    for doc_id, origin in found.documents:
        assert origin.topic == topic
        held = decode_sample(_record_at(_conn(clusters[origin.site]), topic, origin.partition, origin.offset))
        assert held.id == doc_id, f"{origin} holds {held.id}, not {doc_id}"
    shared = sample_record(texts[0])[0].decode()
    assert sorted(o.site for d, o in found.documents if d == shared) == ["site-a", "site-b"]


def _task_workers(clusters: dict[str, LocalCluster], site: str) -> set[str]:
    """The Connect workers running tasks of ``site``'s flow (from its status topic).

    Connect balances the count of a group's tasks over its workers, whichever connector
    they belong to (the source connector's, the heartbeat's, the checkpoint's).
    """
    states = latest_by_key(_conn(clusters["train"]), status_topic(site))
    running = [json.loads(v) for k, v in states.items() if k.startswith(b"status-task-") and v is not None]
    return {s["worker_id"] for s in running if s.get("state") == "RUNNING"}


@pytest.mark.slow  # two nodes and a drain: 260 s on the shared 2-core machine under a load of 20
@pytest.mark.timeout(900)
def test_two_nodes_share_each_sites_tasks_and_every_record_arrives_once(
        clusters: dict[str, LocalCluster], tmp_path: Path) -> None:
    topic = f"raw-{uuid.uuid4().hex[:8]}"
    _create(clusters, topic)
    # One work_dir per node: each keeps its own properties file and logs.
    configs: list[Path] = []
    for n in range(2):
        (tmp_path / f"node-{n}").mkdir()
        configs.append(_write_config(tmp_path / f"node-{n}" / "sites.toml", clusters, topic,
                                     tasks_max=PARTITIONS))
    producers = [SiteProducer(clusters[site], site, topic) for site in SITES]
    nodes = [_start(config, config.with_name("mirror.out")) for config in configs]
    try:
        for site in SITES:
            _wait_for(f"{site}'s tasks on both nodes", lambda s=site: len(_task_workers(clusters, s)) == 2,
                      nodes[0], configs[0].with_name("mirror.out"), 300)
        before = _mirrored(clusters, topic)
        _wait_for("records mirrored by the shared tasks", lambda: _mirrored(clusters, topic) > before + 1000,
                  nodes[1], configs[1].with_name("mirror.out"), 60)
    finally:
        sent = {p.site: p.finish() for p in producers}
        for node in nodes:
            node.send_signal(signal.SIGTERM)
        for node in nodes:
            node.wait(60)
    drained = subprocess.run(_mirror_cmd(configs[0], "--until-caught-up"), capture_output=True, text=True,
                             timeout=300)
    assert drained.returncode == 0, drained.stdout + drained.stderr
    _assert_exactly_once_in_order(clusters, topic, sent)
