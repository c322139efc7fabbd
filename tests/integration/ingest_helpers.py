"""Read a topic back the way a downstream stage would: read_committed, to the high watermark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from kafeed.config import ConnectionSettings
from kafeed.ingest import PROGRESS_TOPIC

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


def progress_end(kafka: ConnectionSettings) -> int:
    """The progress topic's end now (0 before any job made it): where a job started next
    writes its markers, for :func:`wait_for_marker` to start reading at."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}"})
    try:
        if PROGRESS_TOPIC not in consumer.list_topics(timeout=10).topics:
            return 0
        return int(consumer.get_watermark_offsets(TopicPartition(PROGRESS_TOPIC, 0), timeout=10)[1])
    finally:
        consumer.close()


def wait_for_marker(kafka: ConnectionSettings, job: str, timeout: float,
                    min_record: int = 1, start: int = 0) -> dict[str, object] | None:
    """The first committed progress marker of ``job`` at or past record ``min_record``, or None.
    ``start``: the progress topic's offset to read from (:func:`progress_end` taken before the
    job started; the whole topic, every earlier job's markers too, by default)."""
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": f"t-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        deadline = time.monotonic() + timeout
        assigned = False
        while time.monotonic() < deadline:
            if not assigned:
                if PROGRESS_TOPIC not in consumer.list_topics(timeout=5).topics:
                    time.sleep(0.05)
                    continue
                consumer.assign([TopicPartition(PROGRESS_TOPIC, 0, start)])
                assigned = True
            for msg in consumer.consume(num_messages=1000, timeout=0.05):
                if msg.error() is None and msg.key() == job.encode():
                    marker: dict[str, object] = json.loads(msg.value())
                    if int(marker["record"]) >= min_record or int(marker["index"]) > 0:  # type: ignore[call-overload]
                        return marker
        return None
    finally:
        consumer.close()
