"""A secured cluster (SASL_SSL, SCRAM-SHA-512, ACLs per role): the pipeline runs with each
role's settings file, every refusal is one sentence naming what was denied and writes
nothing, and no password shows up in any output, file or command line.

All of it runs on the one session-wide secured node (`secure_cluster`): starting it is
the expensive part. The ACLs name the default topics, so these tests use `raw` and `tokens`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition

import kafeed
from kafeed.acl import AclAdmin
from kafeed.broker import LocalCluster, free_port_block
from kafeed.broker.pki import make_ca
from kafeed.broker.secure import client_toml
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.kafka import KafkaClients, TransactionalProducer, client_config
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.secure_support import command_lines, leaked
from tests.integration.task_handlers import runs

ROOT = Path(__file__).resolve().parents[2]



WORDS = ["the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven", "bold",
         "wizards", "quietly", "hum"]


def _docs(path: Path, count: int) -> Path:
    lines = [" ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(9)) + f" line {i}"
             for i in range(count)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def secured(secure_cluster: LocalCluster) -> LocalCluster:
    admin = TopicAdmin(secure_cluster.connection())
    admin.create(plan_topic("raw", brokers=1, partitions=2), exist_ok=True)
    return secure_cluster


def _config(cluster: LocalCluster, role: str) -> str:
    return str(cluster.client_file(role))


def _end_offsets(cluster: LocalCluster, topic: str) -> list[int]:
    consumer = KafkaClients(cluster.connection()).read_committed_consumer(
        {"group.id": "kafeed-offsets-probe"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in sorted(parts)]
    finally:
        consumer.close()


def _count_committed(cluster: LocalCluster, topic: str) -> int:
    """Records of ``topic`` a read_committed reader sees (end offsets also count commit markers)."""
    ends = _end_offsets(cluster, topic)
    consumer = KafkaClients(cluster.connection()).read_committed_consumer({"group.id": "kafeed-count-probe"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(len(ends))])
        count, deadline = 0, time.monotonic() + 60
        while time.monotonic() < deadline:
            count += sum(m.error() is None for m in consumer.consume(1000, timeout=0.5))
            done = [tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in range(len(ends))])]
            if all(d >= e for d, e in zip(done, ends, strict=True)):
                break
        return count
    finally:
        consumer.close()


def test_secured_pipeline_runs_per_role_and_leaks_no_secret(
        secured: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    source = _docs(tmp_path / "docs.txt", 120)
    assert main(["ingest", str(source), "--config", _config(secured, "ingest"), "--json"]) == 0
    ingested = json.loads(capsys.readouterr().out)
    assert ingested["produced"] == 120
    # The role's file plus a [prepare] table (one settings file carries both), kept beside it.
    prepare_toml = secured.client_file("prepare").with_name("prepare-quick.toml")
    prepare_toml.write_text(Path(_config(secured, "prepare")).read_text() + "\n[prepare]\nidle_s = 0.5\n")
    os.chmod(prepare_toml, 0o600)
    assert main(["prepare", "--until-caught-up", "--config", str(prepare_toml), "--json"]) == 0
    prepared = json.loads(capsys.readouterr().out)
    assert prepared["documents_out"] == 120 and prepared["tokens_out"] > 0
    ps_during = command_lines()

    # The trainer role reads tokens through the loader, and nothing else.
    loader = kafeed.StreamLoader(kafeed.KafkaTokenDataset(
        "tokens", seq_len=32, connection=secured.connection("trainer"), eos_id=0), batch_size=4)
    batches = list(loader)
    assert batches and sum(int(b["tokens"].numel()) for b in batches) <= prepared["tokens_out"] + 33 * 4

    # The monitor role sees brokers, topics and the prepare group's lag without reading a record.
    assert main(["monitor", "--once", "--json", "--config", _config(secured, "monitor")]) == 0
    watched = json.loads(capsys.readouterr().out)
    assert watched["brokers_up"] == 1
    assert "kafeed-prepare" in json.dumps(watched["groups"])

    assert main(["broker", "status", "--data-dir", str(secured.data_dir), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["nodes_up"] == 1 and "tokens" in status["topics"]
    assert main(["acl", "list", "--principal", "ingest", "--config", _config(secured, "admin"),
                 "--json"]) == 0
    listed = {(b["resource"], b["name"]) for b in json.loads(capsys.readouterr().out)["bindings"]}
    assert listed >= {("TOPIC", "raw"), ("TRANSACTIONAL_ID", "kafeed-ingest.")}

    # No password anywhere: console, logs, the files this run wrote, the node's own logs and
    # configuration echo, the cluster state, and every process's command line.
    out = capsys.readouterr()
    haystack = [out.out, out.err, caplog.text, ps_during, command_lines(),
                json.dumps(ingested), json.dumps(prepared), json.dumps(status), json.dumps(watched)]
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    written += [p for p in (secured.data_dir / "node-1" / "logs").rglob("*") if p.is_file()]
    written.append(secured.state_path)
    haystack += [p.read_text(errors="replace") for p in written]
    assert not (secured.data_dir / "node-1" / "format.args").exists()
    assert leaked(secured, haystack) == []


def _no_credentials(cluster: LocalCluster, source: Path) -> str:
    # What `kafeed ingest -b <bootstrap>` says first, with a short wait instead of its 10 s.
    with pytest.raises(KafeedError) as caught:
        TopicAdmin(ConnectionSettings(bootstrap=cluster.bootstrap), timeout=3).broker_count()
    print(f"error: {caught.value.message}")
    return "accepted the connection but answered no plaintext request"


def _wrong_password(cluster: LocalCluster, source: Path) -> str:
    os.environ["KAFEED_SASL_PASSWORD"] = "not-the-password"
    try:
        assert main(["ingest", str(source), "--config", _config(cluster, "ingest")]) == 1
    finally:
        del os.environ["KAFEED_SASL_PASSWORD"]
    return "invalid credentials with SASL mechanism SCRAM-SHA-512"


def _other_ca(cluster: LocalCluster, source: Path) -> str:
    other, _key = make_ca(source.parent / "other-ca", "someone else's CA")
    settings = tomllib.loads(Path(_config(cluster, "ingest")).read_text())["connection"]
    config = source.parent / "other-ca.toml"
    config.write_text(client_toml(bootstrap=cluster.bootstrap, user="ingest",
                                  password=settings["sasl_password"], ca=other))
    assert main(["ingest", str(source), "--config", str(config)]) == 1
    return "certificate verify failed"


def _trainer_writes_raw(cluster: LocalCluster, source: Path) -> str:
    assert main(["ingest", str(source), "--config", _config(cluster, "trainer")]) == 1
    return "Access to topic 'raw' is denied to trainer by the cluster's ACLs."


def _monitor_reads_records(cluster: LocalCluster, source: Path) -> str:
    admin = cluster.connection()
    TopicAdmin(admin).create(plan_topic("watched", brokers=1, partitions=1), exist_ok=True)
    producer = Producer(client_config(admin, {"acks": "all"}))
    producer.produce("watched", b"\x01\x00" * 8)
    assert producer.flush(30) == 0
    loader = kafeed.StreamLoader(kafeed.KafkaTokenDataset(
        "watched", seq_len=8, connection=cluster.connection("monitor"), eos_id=0), batch_size=2)
    with pytest.raises(KafeedError) as caught:
        list(loader)
    print(f"error: {caught.value.message}")
    return "Could not read topic 'watched' as monitor: "


def _foreign_transactional_id(cluster: LocalCluster, source: Path) -> str:
    producer = TransactionalProducer(cluster.connection("ingest"), stage="ingest",
                                     transactional_id="kafeed-prepare.kafeed-prepare.stolen")
    with pytest.raises(KafeedError) as caught:
        producer.init(timeout_s=20)
    print(f"error: {caught.value.message}")
    return "Could not start transactions as 'kafeed-prepare.kafeed-prepare.stolen': "


@pytest.mark.parametrize("attempt", [_no_credentials, _wrong_password, _other_ca, _trainer_writes_raw,
                                     _monitor_reads_records, _foreign_transactional_id],
                         ids=lambda f: f.__name__.strip("_"))
def test_refused_in_one_sentence_and_nothing_written(
        secured: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str], attempt: object) -> None:
    before = _end_offsets(secured, "raw")
    expected = attempt(secured, _docs(tmp_path / "refused.txt", 5))  # type: ignore[operator]
    err = capsys.readouterr()
    said = (err.err + err.out).strip()
    first = said.splitlines()[0]
    assert first.startswith("error: ") and expected in first, said
    assert "Traceback" not in said
    assert any(word in first for word in ("authorization failed", "denied", "refused", "no plaintext"))
    assert _end_offsets(secured, "raw") == before


def test_acl_grant_and_revoke_round_trip(secured: LocalCluster, capsys: pytest.CaptureFixture[str]) -> None:
    admin = _config(secured, "admin")
    assert main(["acl", "grant", "trainer", "-p", "User:carol", "--tokens", "carol-tokens",
                 "--config", admin]) == 0
    granted = capsys.readouterr().out
    acls = AclAdmin(secured.connection())
    assert {(b.resource, b.name, b.operation) for b in acls.list("User:carol")} >= {
        ("TOPIC", "carol-tokens", "READ"), ("GROUP", "kafeed-loader", "READ")}
    assert "granted User:carol ALLOW READ on TOPIC name 'carol-tokens'" in granted
    assert main(["acl", "revoke", "trainer", "-p", "carol", "--tokens", "carol-tokens",
                 "--config", admin]) == 0
    assert acls.list("User:carol") == []
    # the monitor may describe but not change ACLs
    assert main(["acl", "grant", "admin", "-p", "mallory", "--config", _config(secured, "monitor")]) == 1
    assert "the cluster denied it: User:monitor may not change ACLs" in capsys.readouterr().err



def test_archive_and_task_worker_run_as_their_roles_and_leak_no_secret(
        secured: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    """`kafeed archive` with archive.toml and `kafeed tasks` submit / worker / status with
    tasks.toml: nothing their roles need is denied, and no password shows in what they print."""
    caplog.set_level(logging.INFO)
    producer = Producer(client_config(secured.connection(), {"acks": "all"}))
    for i in range(40):
        producer.produce("raw", key=f"arch-{i}".encode(), value=f"record {i}".encode())
    assert producer.flush(30) == 0
    held = _count_committed(secured, "raw")

    archive = _config(secured, "archive")
    assert main(["archive", "--topic", "raw", "--table", "sec.raw", "--warehouse", str(tmp_path / "wh"),
                 "--until-caught-up", "--json", "--config", archive]) == 0
    archived = json.loads(capsys.readouterr().out)
    assert archived["rows_written"] == held
    assert main(["archive", "status", "--table", "sec.raw", "--warehouse", str(tmp_path / "wh"),
                 "--json", "--config", archive]) == 0
    status = json.loads(capsys.readouterr().out)
    assert status["rows"] == held

    tasks = _config(secured, "tasks")
    runs_log = tmp_path / "runs.log"
    submitted = []
    for i in range(4):
        params = json.dumps({"key": f"t{i}", "log": str(runs_log)})
        assert main(["tasks", "submit", "--kind", "sec", "--key", f"t{i}", "--params", params,
                     *(["--create-queue"] if i == 0 else []), "--config", tasks]) == 0
        submitted.append(capsys.readouterr())
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    err_file = tmp_path / "worker.err"
    with err_file.open("wb") as sink:
        worker = subprocess.Popen(
            [sys.executable, "-m", "kafeed.cli.main", "tasks", "worker", "--kind", "sec",
             "--handler", "tests.integration.task_handlers:mixed", "--config", tasks],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        deadline = time.monotonic() + 120
        while sum(e == "done" for e, *_ in runs(runs_log)) < 4:
            assert worker.poll() is None, err_file.read_text()
            assert time.monotonic() < deadline, f"tasks not done: {err_file.read_text()}"
            time.sleep(0.2)
    finally:
        worker.send_signal(signal.SIGTERM)
        rc = worker.wait(timeout=60)
    worker_err = err_file.read_text()
    assert rc == 143, worker_err
    assert sorted(k for e, k, *_ in runs(runs_log) if e == "done") == ["t0", "t1", "t2", "t3"]
    assert main(["tasks", "status", "--json", "--config", tasks]) == 0
    out = capsys.readouterr()
    (queue,) = json.loads(out.out)
    assert queue["kind"] == "sec" and queue["done"] == 4, queue
    said = "\n".join([worker_err, *(o.out + o.err for o in submitted), out.out, out.err, caplog.text,
                      json.dumps(archived), json.dumps(status)])
    assert not any(word in said.lower() for word in ("denied", "authorization failed", "not authorized"))
    assert leaked(secured, [said]) == []


@pytest.mark.slow
def test_three_secured_nodes_replicate_over_mutual_tls(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Inter-broker and controller traffic on mutual TLS: a RF 3 topic reaches a full ISR."""
    cluster = LocalCluster(tmp_path / "three", nodes=3, secure=True, port=free_port_block(9), heap_mb=384,
                           jit="quick")
    cluster.start(timeout=240)
    try:
        TopicAdmin(cluster.connection()).create(plan_topic("raw", brokers=3, partitions=3))
        source = _docs(tmp_path / "docs.txt", 30)
        assert main(["ingest", str(source), "--config", str(cluster.client_file("ingest")), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["produced"] == 30
        described = TopicAdmin(cluster.connection()).describe("raw", sizes=False)
        assert all(len(p.isr) == 3 for p in described.partitions)
        assert _count_committed(cluster, "raw") == 30
    finally:
        cluster.stop(timeout=15, purge=True)
