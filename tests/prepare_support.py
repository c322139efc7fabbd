"""Helpers for prepare tests: write raw records, read a topic back (read_committed)."""

from __future__ import annotations

import logging
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.prepare.dedup import content_hash
from kafeed.schema import decode_document, make_sample

Raw = tuple[bytes | None, bytes | None, list[tuple[str, bytes]] | None]


def sample_record(text: str, *, id: str | None = None, key: str | None = None) -> Raw:
    """A raw record keyed by content hash (so duplicates share a partition), as ingest writes it."""
    doc_id = id or content_hash(text).hex()
    value = make_sample(text, id=doc_id, source="test").SerializeToString()
    return ((key or content_hash(text).hex()).encode(), value, None)


def produce(kafka: ConnectionSettings, topic: str, records: Iterable[Raw]) -> int:
    from confluent_kafka import Producer

    producer = Producer(kafka.client_config() | {
        "enable.idempotence": True, "linger.ms": 5,
        "logger": logging.getLogger("kafeed.librdkafka")})
    n = 0
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers)
        n += 1
        if n % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    return n


def read_topic(kafka: ConnectionSettings, topic: str, *, timeout: float = 30.0) -> list[Any]:
    """Every committed record of ``topic`` (read_committed, from the beginning to the end)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(kafka.client_config() | {
        "group.id": f"reader-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False,
        "isolation.level": "read_committed", "enable.partition.eof": True,
        "logger": logging.getLogger("kafeed.librdkafka")})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        parts = sorted(meta.partitions)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        pending = {p for p in parts if ends[p] > 0}
        out: list[Any] = []
        import time

        deadline = time.monotonic() + timeout
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(1000, timeout=0.5):
                if msg.error() is not None:
                    if msg.offset() >= ends[msg.partition()]:
                        pending.discard(msg.partition())
                    continue
                out.append(msg)
                if msg.offset() + 1 >= ends[msg.partition()]:
                    pending.discard(msg.partition())
        assert not pending, f"could not read {topic} to its end: {pending}"
        return out
    finally:
        consumer.close()


def document_ids(msgs: Sequence[Any]) -> list[str]:
    return [decode_document(m.value()).id for m in msgs]


def paragraphs(n: int, *, seed: str = "") -> list[str]:
    """``n`` distinct documents that pass the default filters."""
    words = ["river", "stone", "window", "garden", "letter", "morning", "silver", "candle",
             "harbor", "meadow", "thunder", "orchard", "lantern", "compass", "feather", "whisper"]
    out = []
    for i in range(n):
        body = " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12))
        out.append(f"Document {seed}{i} speaks of {body}.\nAnd then the second line ends it.")
    return out


def prepare_command(bootstrap: str, raw: str, output: str, group: str, *extra: str) -> list[str]:
    import sys

    return [sys.executable, "-m", "kafeed.cli.main", "prepare", "--bootstrap", bootstrap,
            "--input", raw, "--output", output, "--group", group, *extra]


def prepare_env(home: str) -> dict[str, str]:
    """Environment for a `kafeed prepare` subprocess running this checkout's code."""
    import os
    from pathlib import Path

    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ)
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["KAFEED_HOME"] = home
    return env


def high_watermarks(kafka: ConnectionSettings, topic: str, consumer: Any = None) -> int:
    """Sum of the high watermarks of ``topic`` (0 when it does not exist yet), asked with
    ``consumer`` (one of :func:`watermark_consumer`'s) or a consumer made for this call."""
    from confluent_kafka import KafkaException, TopicPartition

    own = consumer is None
    if own:
        consumer = watermark_consumer(kafka)
    try:
        meta = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if meta is None or meta.error is not None:
            return 0
        try:
            return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                       for p in meta.partitions)
        except KafkaException:  # just created: no leader yet
            return 0
    finally:
        if own:
            consumer.close()


def watermark_consumer(kafka: ConnectionSettings) -> Any:
    """A consumer for repeated :func:`high_watermarks` calls: a readiness wait that makes a
    client per check reacts a client's start-up later (seconds on a loaded machine)."""
    from confluent_kafka import Consumer

    return Consumer(kafka.client_config() | {
        "group.id": f"hw-{uuid.uuid4().hex[:8]}", "logger": logging.getLogger("kafeed.librdkafka")})


def start_and_kill(command: list[str], env: dict[str, str], ready: Callable[[], bool], *,
                   ready_s: float = 120.0) -> None:
    """Start ``command``, SIGKILL it once ``ready()`` says it did some of its work."""
    proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + ready_s
        while not ready():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the process did no work in time"
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if proc.stderr:
            proc.stderr.close()
