"""Archive throughput vs a bare consume loop on the same topic. Not a test.

Starts a LocalCluster on free ports in a temporary directory, writes ``--docs``
TokenizedDocument records (``--tokens`` ids each) to a topic, then measures, on the
same records:

1. a bare ``read_committed`` consume loop (``consume(num_messages=5000)``) to the end;
2. ``run_archive --until-caught-up`` into a fresh local SQLite catalog: decode, map to
   rows, write Parquet, commit with positions (``--flush-mb`` per commit).

and prints records/s and MB/s of each and the ratio (target >= 0.5).

    PYTHONPATH=src python benchmarks/bench_archive.py --docs 50000 --tokens 256
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
from confluent_kafka import Producer, TopicPartition

from kafeed.archive import ArchiveSettings, CatalogSettings
from kafeed.archive.sink import run_archive
from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.kafka import client_config, read_committed_consumer
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic


def produce(conn: ConnectionSettings, topic: str, docs: int, tokens: int) -> int:
    p = Producer(client_config(conn, {"linger.ms": 50, "compression.type": "lz4"}))
    rng = np.random.default_rng(0)
    size = 0
    for i in range(docs):
        value = make_document(rng.integers(0, 50000, tokens), id=f"d{i}", vocab_size=50304,
                              tokenizer="bench").SerializeToString()
        size += len(value)
        p.produce(topic, key=f"d{i}".encode(), value=value)
        if i % 1000 == 0:
            p.poll(0)
    p.flush(60)
    return size


def bare_consume(conn: ConnectionSettings, topic: str, partitions: int, docs: int) -> float:
    c = read_committed_consumer(conn, {"group.id": "bench-bare", "fetch.max.bytes": 32 << 20,
                                       "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    start = time.perf_counter()
    n = 0
    while n < docs:
        n += sum(1 for m in c.consume(5000, timeout=1.0) if m.error() is None)
    took = time.perf_counter() - start
    c.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=50000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--flush-mb", type=float, default=32)
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            TopicAdmin(conn).create(plan_topic("bench", brokers=1, partitions=args.partitions))
            size = produce(conn, "bench", args.docs, args.tokens)
            bare = bare_consume(conn, "bench", args.partitions, args.docs)
            settings = ArchiveSettings(topic="bench", table="bench.t", flush_interval_s=3600,
                                       target_file_bytes=int(args.flush_mb * 1024 * 1024),
                                       catalog=CatalogSettings(warehouse=Path(tmp) / "wh"))
            stats = run_archive(settings, conn, until_caught_up=True)
            assert stats.rows_written == args.docs, stats.as_dict()
            archive = stats.elapsed_s
        finally:
            cluster.stop(timeout=15, purge=True)
    mb = size / 1e6
    print(json.dumps({
        "docs": args.docs, "tokens_per_doc": args.tokens, "mb": round(mb, 1),
        "bare_records_per_s": round(args.docs / bare), "bare_mb_per_s": round(mb / bare, 1),
        "archive_records_per_s": round(args.docs / archive), "archive_mb_per_s": round(mb / archive, 1),
        "archive_commits": stats.commits, "ratio": round(bare / archive, 3)}))


if __name__ == "__main__":
    main()
