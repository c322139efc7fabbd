"""Read a topic back the way a downstream stage would: read_committed, to the high watermark."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from kafeed.config import ConnectionSettings

SRC = Path(__file__).resolve().parents[2] / "src"


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]
    partition: int


def read_all(kafka: ConnectionSettings, topic: str, timeout: float = 30.0) -> list[Rec]:
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        parts = sorted(meta.partitions)
        highs = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
                 for p in parts}
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[Rec] = []
        deadline = time.monotonic() + timeout
        while True:
            for msg in consumer.consume(num_messages=10_000, timeout=0.3):
                if msg.error() is None:
                    out.append(Rec(msg.key(), msg.value(), dict(msg.headers() or []), msg.partition()))
            positions = {tp.partition: tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in parts])}
            if all(highs[p] == 0 or positions[p] >= highs[p] for p in parts):
                return out
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: positions {positions} never reached {highs}")
    finally:
        consumer.close()


def run_cli(*args: str, stdin: bytes | None = None,
            timeout: float = 120) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "kafeed.cli.main", "ingest", *args], input=stdin,
                          capture_output=True, env=env, timeout=timeout, check=False)
