"""Archive throughput vs a bare consume loop on the same topic. Not a test.

Starts a LocalCluster on free ports in a temporary directory, writes ``--docs``
TokenizedDocument records (``--tokens`` ids each) to a topic, then measures, each round,
on the same records:

1. a bare ``read_committed`` consume loop (``consume(num_messages=5000)``) to the end,
   before and after each sink;
2. ``kafeed archive --until-caught-up`` (``ArchiveSink.run``) into a fresh table of a local
   SQLite catalog: decode, map to rows, write Parquet, commit with positions (``--flush-mb``
   per commit), in its own process;
3. with ``--baseline-src DIR``, the sink of another source tree (a checkout of an older
   commit) the same way, so a change is measured against what it replaces on the same
   broker, data and machine load.

Both loops are timed from the moment their partitions are assigned (the bare loop: its
``assign``; a sink: the end of its assignment callback, positions read) to the end (the
sink: its last commit landed). A sink's start (imports, opening the catalog and table,
joining the group) is printed apart as ``start_s``, a fixed cost per process, not per
record. Prints records/s, MB/s, each sink's ratio to the mean of the bare loops around it
(target >= 0.5), and ``cpu_s``: the CPU seconds the sink's process used (every thread) over
the same span, steadier than wall time on a machine shared with other jobs.

    PYTHONPATH=src python benchmarks/bench_archive.py --docs 30000 --baseline-src ../old/src
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Producer, TopicPartition

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients, client_config
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
    """Seconds from the assignment to the last record."""
    c = KafkaClients(conn).read_committed_consumer({"group.id": "bench-bare", "fetch.max.bytes": 32 << 20,
                                       "max.partition.fetch.bytes": 8 << 20})
    c.assign([TopicPartition(topic, p, -2) for p in range(partitions)])
    start = time.perf_counter()
    n = 0
    while n < docs:
        n += sum(1 for m in c.consume(5000, timeout=1.0) if m.error() is None)
    took = time.perf_counter() - start
    c.close()
    return took


def archive_only(bootstrap: str, table: str, warehouse: str, flush_mb: float, topic: str = "bench") -> None:
    """One sink run to the end of the topic; prints its timings and counts as JSON."""
    began = time.perf_counter()
    from kafeed.archive import ArchiveSettings, CatalogSettings
    from kafeed.archive.sink import ArchiveSink

    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    settings = ArchiveSettings(topic=topic, table=table, flush_interval_s=3600,
                               target_file_bytes=int(flush_mb * 1024 * 1024),
                               catalog=CatalogSettings(warehouse=Path(warehouse)))
    assigned: list[float] = []
    cpu: list[float] = []
    on_assign = ArchiveSink._on_assign

    # The benchmark's own hook on the sink's assignment callback (the old and the new sink both
    # have it), so each is timed the same way from its assignment.
    def timed_on_assign(self: ArchiveSink, consumer: Any, partitions: list[Any]) -> None:
        on_assign(self, consumer, partitions)
        assigned.append(time.perf_counter())
        cpu.append(time.process_time())

    ArchiveSink._on_assign = timed_on_assign  # type: ignore[method-assign]
    try:
        sink = ArchiveSink(settings, ConnectionSettings(bootstrap=bootstrap))
        sink.open()
        stats = sink.run(until_caught_up=True)
    finally:
        ArchiveSink._on_assign = on_assign  # type: ignore[method-assign]
    done, cpu_done = time.perf_counter(), time.process_time()
    print(json.dumps({"rows": stats.rows_written, "commits": stats.commits, "busy_s": done - assigned[0],
                      "cpu_s": cpu_done - cpu[0], "start_s": assigned[0] - began}))


def archive_once(bootstrap: str, table: str, warehouse: Path, flush_mb: float, src: str,
                 topic: str = "bench") -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=src)
    cmd = [sys.executable, __file__, "--archive-only", "--bootstrap", bootstrap, "--table", table,
           "--warehouse", str(warehouse), "--flush-mb", str(flush_mb), "--topic", topic]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=50000)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--flush-mb", type=float, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--baseline-src", default=None,
                    help="also time the sink of this source tree (e.g. an older checkout's src/)")
    ap.add_argument("--archive-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--table", help=argparse.SUPPRESS)
    ap.add_argument("--warehouse", help=argparse.SUPPRESS)
    ap.add_argument("--topic", default="bench", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.archive_only:
        archive_only(args.bootstrap, args.table, args.warehouse, args.flush_mb, args.topic)
        return
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    here = str(Path(__file__).resolve().parent.parent / "src")
    variants = {"archive": here} | ({"baseline": str(Path(args.baseline_src).resolve())}
                                    if args.baseline_src else {})
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            TopicAdmin(conn).create(plan_topic("bench", brokers=1, partitions=args.partitions))
            mb = produce(conn, "bench", args.docs, args.tokens) / 1e6
            for r in range(args.rounds):
                # Alternate which sink goes first, so neither always meets a warmer broker.
                order = list(variants.items()) if r % 2 == 0 else list(variants.items())[::-1]
                bare = [bare_consume(conn, "bench", args.partitions, args.docs)]
                row: dict[str, Any] = {}
                for name, src in order:
                    out = archive_once(cluster.bootstrap, f"bench.{name}_{r}", Path(tmp) / "wh",
                                       args.flush_mb, src)
                    assert out["rows"] == args.docs, out
                    bare.append(bare_consume(conn, "bench", args.partitions, args.docs))
                    around = (bare[-2] + bare[-1]) / 2
                    row |= {f"{name}_records_per_s": round(args.docs / out["busy_s"]),
                            f"{name}_mb_per_s": round(mb / out["busy_s"], 1),
                            f"{name}_bare_records_per_s": round(args.docs / around),
                            f"{name}_ratio": round(around / out["busy_s"], 3),
                            f"{name}_cpu_s": round(out["cpu_s"], 2),
                            f"{name}_commits": out["commits"], f"{name}_start_s": round(out["start_s"], 1)}
                rounds.append(row)
        finally:
            cluster.stop(timeout=15, purge=True)
    result: dict[str, Any] = {"docs": args.docs, "tokens_per_doc": args.tokens, "mb": round(mb, 1),
                              "rounds": rounds}
    for name in variants:
        result[f"{name}_median_ratio"] = statistics.median(rd[f"{name}_ratio"] for rd in rounds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
