"""The demo job: a local cluster, a planned topic, records through it, a summary."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from kafeed.broker import LocalCluster
from kafeed.config import ConnectionSettings
from kafeed.topics import TopicAdmin, plan_topic


class DemoOptions(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path | None = None
    port: int | None = None
    records: int = Field(default=5000, ge=1)
    data: Path | None = None


def run_demo(options: DemoOptions, *, console: Console) -> dict[str, Any]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    cluster = LocalCluster(options.data_dir, port=options.port)
    with console.status("Starting (or reusing) the local Kafka cluster..."):
        started = cluster.start()
    console.print(f"Kafka {'started' if started else 'already running'} at {cluster.bootstrap}")
    settings = ConnectionSettings(bootstrap=cluster.bootstrap)
    admin = TopicAdmin(settings)
    topic = "demo.records"
    admin.create(plan_topic(topic, brokers=admin.broker_count(), throughput_mbps=30,
                            per_partition_mbps=10), exist_ok=True)
    info = admin.describe(topic, sizes=False)

    t0 = time.monotonic()
    producer = Producer({**settings.client_config(), "acks": "all", "enable.idempotence": True,
                         "compression.type": "zstd", "linger.ms": 20})
    for i in range(options.records):
        producer.produce(topic, key=f"doc-{i}".encode(), value=f"record {i}".encode())
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(30)
    produced_s = time.monotonic() - t0

    consumer = Consumer({**settings.client_config(), "group.id": "kafeed-demo",
                         "enable.auto.commit": False})
    # Read from where the topic ended before this run, so a re-run counts its own records.
    consumer.assign([TopicPartition(topic, p.partition, p.high_watermark) for p in info.partitions])
    got = 0
    deadline = time.monotonic() + 30
    while got < options.records and time.monotonic() < deadline:
        got += sum(m.error() is None for m in consumer.consume(1000, timeout=0.5))
    consumer.close()
    return {
        "bootstrap": cluster.bootstrap,
        "topic": topic,
        "partitions": len(info.partitions),
        "records_produced": options.records,
        "records_consumed": got,
        "produce_seconds": round(produced_s, 3),
        "total_seconds": round(time.monotonic() - t0, 3),
    }
