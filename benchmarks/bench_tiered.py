"""Loader tokens/s reading a topic's records from its archive table vs from Kafka. Not a test.

Starts a LocalCluster on free ports in a temporary directory, writes ``--docs``
TokenizedDocument records (``--tokens`` ids each) to a topic, archives it into a fresh
local SQLite catalog, then reads the same records into packed windows twice, with the
same settings (one reader, ``--seq-len``, ``--shuffle``, batches of ``--batch``):

1. from Kafka (the topic as written);
2. from the table: every record deleted from the topic first (delete_records up to the
   high watermark), read with ``archive=``.

Each pass runs ``--repeat`` times (opening included) and the fastest counts: the machine
is shared and noisy. Every run must give the same windows (a checksum of every batch); it
prints tokens/s of each and the ratio table / Kafka (target >= 0.8).

    PYTHONPATH=src python benchmarks/bench_tiered.py --docs 30000 --tokens 256
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from kafeed.archive import ArchiveSettings, CatalogSettings
from kafeed.archive.sink import run_archive
from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.loader.opening import MAIN_PROCESS, open_stream
from kafeed.loader.settings import LoaderSettings
from kafeed.topics import TopicAdmin, plan_topic

try:
    from bench_archive import produce
except ImportError:  # run as a module
    from benchmarks.bench_archive import produce


def read_all(settings: LoaderSettings, batch: int) -> tuple[float, int, str]:
    """Seconds, tokens and a checksum of every window, opening included."""
    digest = hashlib.sha256()
    tokens = 0
    start = time.perf_counter()
    stream = open_stream(settings, MAIN_PROCESS, None, client_stats=False)
    try:
        while (out := stream.next(batch)) is not None:
            tokens += out["tokens"].size
            digest.update(out["tokens"].tobytes())
    finally:
        stream.close()
    return time.perf_counter() - start, tokens, digest.hexdigest()


def expire_all(conn: ConnectionSettings, topic: str, partitions: int) -> None:
    c = KafkaClients(conn).read_committed_consumer({"group.id": "bench-marks"})
    highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    c.close()
    admin = AdminClient({"bootstrap.servers": conn.bootstrap})
    for future in admin.delete_records([TopicPartition(topic, p, o) for p, o in highs.items()]).values():
        future.result(timeout=60)


def measure(conn: ConnectionSettings, warehouse: Path, topic: str, *, docs: int, tokens: int, partitions: int,
            seq_len: int, batch: int, shuffle: int, repeat: int) -> dict[str, Any]:
    """Writes and archives ``topic``, reads it ``repeat`` times from Kafka, expires it, then reads
    it as often from the table through the loader's cold tier: the rates and their ratio."""
    TopicAdmin(conn).create(plan_topic(topic, brokers=1, partitions=partitions))
    produce(conn, topic, docs, tokens)
    catalog = CatalogSettings(warehouse=warehouse)
    table = f"bench.{topic.replace('-', '_')}"
    stats = run_archive(ArchiveSettings(topic=topic, table=table, flush_interval_s=3600, catalog=catalog),
                        conn, until_caught_up=True)
    assert stats.rows_written == docs, stats.as_dict()
    common: dict[str, Any] = {"topics": (topic,), "connection": conn, "seq_len": seq_len,
                              "eos_id": 0, "shuffle_buffer": shuffle, "seed": 1}
    kafka_runs = [read_all(LoaderSettings(**common), batch) for _ in range(repeat)]
    expire_all(conn, topic, partitions)
    tiered = LoaderSettings(**common, archive=table, archive_catalog=catalog)
    table_runs = [read_all(tiered, batch) for _ in range(repeat)]
    assert len({run[1:] for run in kafka_runs + table_runs}) == 1, "the reads differ"
    kafka_s, kafka_tokens = min(run[0] for run in kafka_runs), kafka_runs[0][1]
    table_s, table_tokens = min(run[0] for run in table_runs), table_runs[0][1]
    return {"docs": docs, "tokens_per_doc": tokens, "partitions": partitions, "seq_len": seq_len,
            "shuffle_buffer": shuffle, "repeat": repeat, "tokens": kafka_tokens,
            "kafka_tokens_per_s": round(kafka_tokens / kafka_s),
            "table_tokens_per_s": round(table_tokens / table_s),
            "kafka_s": round(kafka_s, 2), "table_s": round(table_s, 2), "ratio": round(kafka_s / table_s, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=30000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--shuffle", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory() as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            result = measure(ConnectionSettings(bootstrap=cluster.bootstrap), Path(tmp) / "wh", "bench",
                             docs=args.docs, tokens=args.tokens, partitions=args.partitions,
                             seq_len=args.seq_len, batch=args.batch, shuffle=args.shuffle, repeat=args.repeat)
        finally:
            cluster.stop(timeout=15, purge=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
