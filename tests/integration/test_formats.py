"""Topics other producers wrote, read by the stages through their value formats (docs/formats.md).

Each producer is a real one: kafka-python running the snippet users start from, Kafka's own
Java console producer, and confluent-kafka writing Debezium-style change events. Each test
checks that every record is accounted for: out + filtered + duplicates + dead-lettered = in.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.jars import QUICK_JVM, resolve_libs
from kafeed.kafka.deadletters import KIND, SOURCE_OFFSET
from kafeed.schema.records_pb2 import TokenizedDocument
from kafeed.signals import stop_request
from kafeed.topics import TopicAdmin, plan_topic
from kafeed.train.checkpoint import CheckpointManager
from tests.integration.train_runs import finish, kill_after_checkpoint


def _messages(kafka: ConnectionSettings, topic: str, count: int) -> list[Any]:
    """The first ``count`` committed records of ``topic`` (every partition)."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "formats-read",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    partitions = TopicAdmin(kafka).describe(topic, sizes=False).partitions
    consumer.assign([TopicPartition(topic, p.partition, 0) for p in partitions])
    got: list[Any] = []
    for _ in range(120):
        got += [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
        if len(got) >= count:
            break
    consumer.close()
    assert len(got) == count, f"{topic}: {len(got)} of {count} records"
    return got


def _prepare(kafka: ConnectionSettings, capsys: pytest.CaptureFixture[str], topic: str,
             *flags: str) -> dict[str, Any]:
    capsys.readouterr()
    code = main(["prepare", "-i", topic, "-o", f"{topic}.tokens", "--group", f"{topic}-prepare",
                 "--until-caught-up", "--json", "-b", kafka.bootstrap, *flags])
    assert code == 0
    stats: dict[str, Any] = json.loads(capsys.readouterr().out)
    accounted = (stats["documents_out"] + stats["filtered_total"] + stats["duplicates"]
                 + stats["dead_lettered"])
    assert stats["balanced"] and accounted == stats["records_in"], stats
    return stats


def _train_args(kafka: ConnectionSettings, topic: str, ckpt: Path, *extra: str) -> list[str]:
    return ["train", "--model", "classifier", "--topic", topic, "--value-format", "json", "--label-field",
            "label", "--no-pretrained", "--steps", "4", "--batch-size", "8", "--checkpoint-dir", str(ckpt),
            "--checkpoint-every", "2", "--keep", "10", "--log-every", "2", "--seed", "3",
            "-b", kafka.bootstrap, "--json", *extra]


def _train_cli(kafka: ConnectionSettings, topic: str, ckpt: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "kafeed.cli.main", *_train_args(kafka, topic, ckpt, *extra)]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})


@pytest.fixture
def _restore_signals() -> Iterator[None]:
    yield  # `kafeed train` run in-process installs the stop handler: give the signals back
    stop_request().uninstall()
    stop_request().reset()


# kafka-python 3.0 reads its protocol schemas with deprecated importlib calls, and deprecates the
# snippet's plain-function serializer, which users still write.
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.usefixtures("_restore_signals")
def test_kafka_python_snippet_prepared_then_trained_killed_and_resumed(
        kafka: ConnectionSettings, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    TopicAdmin(kafka).create(plan_topic("training_data", brokers=1, partitions=2))
    BOOT = kafka.bootstrap  # the snippet's own name
    # The snippet, verbatim.
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=BOOT, value_serializer=lambda v: json.dumps(v).encode("utf-8"))
    for i in range(100):
        producer.send("training_data", value={"text": f"这是第{i}条训练数据", "label": i % 2})
    producer.flush()
    producer.close()

    # The quality filters are written for prose in spaced words; these short lines would all
    # be filtered (and counted): off, so that every record becomes a document.
    stats = _prepare(kafka, capsys, "training_data", "--value-format", "json", "--label-field", "label",
                     "--no-filters")
    assert stats["records_in"] == 100 and stats["documents_out"] == 100 and stats["dead_lettered"] == 0
    docs = [TokenizedDocument.FromString(m.value()) for m in _messages(kafka, "training_data.tokens", 100)]
    by_offset = {(d.input_partition, d.input_offset): d for d in docs}
    assert len(by_offset) == 100
    for (partition, offset), doc in by_offset.items():
        assert doc.id == f"training_data/{partition}@{offset}"  # no id in the records: where they lie
        assert doc.input_topic == "training_data" and list(doc.target_values) in ([0.0], [1.0])
    assert sorted(int(d.target_values[0]) for d in docs) == [0] * 50 + [1] * 50

    # The classifier on the labelled records, killed after a checkpoint and resumed: the same
    # loader state, lineage and loss as a run that was never interrupted.
    # (The uninterrupted run in this process: one interpreter and torch import fewer.)
    assert main(_train_args(kafka, "training_data", tmp_path / "ref")) == 0
    reference = json.loads(capsys.readouterr().out)
    ckpt = tmp_path / "killed"
    kill_after_checkpoint(_train_cli(kafka, "training_data", ckpt, "--resume"), ckpt, 2, 2, random.Random())
    interrupted = CheckpointManager(ckpt).load_latest()
    assert interrupted is not None and interrupted.step < int(str(reference["steps"]))
    resumed = finish(_train_cli(kafka, "training_data", ckpt, "--resume"))
    assert resumed["steps"] == reference["steps"] and resumed["resumed_from"]
    ref_ck, new_ck = CheckpointManager(tmp_path / "ref").load_latest(), CheckpointManager(ckpt).load_latest()
    assert ref_ck is not None and new_ck is not None and ref_ck.step == new_ck.step
    assert new_ck.manifest["loader"] == ref_ck.manifest["loader"]
    assert new_ck.manifest["lineage"] == ref_ck.manifest["lineage"]
    assert new_ck.manifest["loss"] == pytest.approx(ref_ck.manifest["loss"], abs=1e-5)


def test_lines_from_the_java_console_producer(kafka: ConnectionSettings, make_topic,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(partitions=1)
    lines = [f"log line {i} from the service, with words enough to pass the filters" for i in range(40)]
    lines[7] = lines[3]  # a copy: counted as a duplicate
    libs = resolve_libs(fetch=False)
    proc = subprocess.run(
        [libs.java, "-Xmx128m", *QUICK_JVM, "-cp", libs.classpath, "org.apache.kafka.tools.ConsoleProducer",
         "--bootstrap-server", kafka.bootstrap, "--topic", topic],
        input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # and one value that is no text: bytes that are not UTF-8
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    producer.produce(topic, value=b"\xff\xfe not text")
    assert producer.flush(30) == 0

    stats = _prepare(kafka, capsys, topic, "--value-format", "text")
    assert stats["records_in"] == 41 and stats["duplicates"] == 1 and stats["documents_out"] == 39
    assert stats["dead_letter_kinds"] == {"encoding": 1}
    dead = _messages(kafka, f"{topic}.dlq", 1)[0]
    headers = dict(dead.headers())
    assert headers[KIND] == b"encoding" and headers[SOURCE_OFFSET] == b"40"
    assert dead.value() == b"\xff\xfe not text"


def _envelope(op: str, row: dict[str, Any] | None, before: dict[str, Any] | None = None) -> bytes:
    """A Debezium change event as its JSON converter writes it without schemas."""
    return json.dumps({"before": before, "after": row, "op": op, "ts_ms": 1764565200000,
                       "source": {"connector": "postgresql", "db": "app", "table": "docs"}}).encode()


def test_debezium_envelopes_by_nested_fields(kafka: ConnectionSettings, make_topic,
                                             capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    body = "The quick brown fox jumps over the lazy dog, document number {i} of the table."
    producer = Producer({"bootstrap.servers": kafka.bootstrap})
    for i in range(30):
        row = {"id": 1000 + i, "body": body.format(i=i), "lang": "en", "stars": i % 5}
        producer.produce(topic, key=json.dumps({"id": 1000 + i}).encode(), value=_envelope("c", row))
    producer.produce(topic, key=b'{"id": 1000}', value=_envelope("d", None, {"id": 1000}))  # a delete
    producer.produce(topic, key=b'{"id": 1000}', value=None)  # its tombstone
    producer.produce(topic, value=b"{not json")
    producer.produce(topic, value=_envelope("c", {"id": 2000, "body": 42}))  # a mistyped field
    assert producer.flush(30) == 0
    config = tmp_path / "kafeed.toml"
    config.write_text(f'[formats."{topic}"]\nformat = "json"\ntext_field = "after.body"\n'
                      'id_field = "after.id"\nlabel_field = "after.stars"\n'
                      'meta_fields = ["after.lang", "op"]\n')

    stats = _prepare(kafka, capsys, topic, "--config", str(config))
    assert stats["records_in"] == 34 and stats["documents_out"] == 30
    assert stats["dead_letter_kinds"] == {"missing_text": 1, "decode": 2, "text_not_string": 1}
    docs = [TokenizedDocument.FromString(m.value()) for m in _messages(kafka, f"{topic}.tokens", 30)]
    assert sorted(d.id for d in docs) == [str(1000 + i) for i in range(30)]
    assert {d.metadata["after.lang"] for d in docs} == {"en"} and {d.metadata["op"] for d in docs} == {"c"}
    assert sorted(int(d.target_values[0]) for d in docs) == sorted(i % 5 for i in range(30))
    kinds = sorted(dict(m.headers())[KIND].decode() for m in _messages(kafka, f"{topic}.dlq", 4))
    assert kinds == ["decode", "decode", "missing_text", "text_not_string"]
