"""The router vs a bare consume-produce loop on the same records.

Starts a LocalCluster on free ports in a temporary directory, writes ``--docs``
TrainingSample records to a raw topic, then measures, each round:

1. a bare loop: a consumer (read_committed, batch consume) and a plain
   idempotent producer copying every record to one topic, no transactions,
   no decoding, no rules, until all records are copied and flushed;
2. ``run_route`` with four rules (source, regex, language, length) and a default,
   exactly once (one transaction per ``--batch-size`` records), busy time only.

and prints records/s and the ratio (target: >= 0.6x). Not a test.

    PYTHONPATH=src python benchmarks/bench_route.py --docs 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.route import RouteSettings, parse_rules, run_route
from kafeed.schema import make_sample
from kafeed.topics import TopicAdmin, plan_topic

SOURCES = ("wiki", "news", "code", "forum")
RULES = {
    "default": "out.other",
    "rule": [
        {"name": "code", "regex": r"^\s*(def|class|import) ", "to": "out.code"},
        {"name": "wiki", "source": "wiki", "to": "out.wiki"},
        {"name": "english", "language": "en", "min_length": 40, "to": "out.en"},
        {"name": "tiny", "max_length": 10, "to": "drop"},
    ],
}


def docs(n: int) -> list[tuple[bytes, bytes]]:
    bodies = ["the river runs to the sea and it is cold in the morning, said the man",
              "def route(records): return [r for r in records if r]",
              "der Fluss ist kalt und die Stadt ist nicht weit von dem Meer",
              "ok"]
    out = []
    for i in range(n):
        text = f"{bodies[i % len(bodies)]} {i}" if i % len(bodies) != 3 else "ok"
        sample = make_sample(text, id=f"d{i}", source=SOURCES[i % len(SOURCES)])
        out.append((f"d{i}".encode(), sample.SerializeToString()))
    return out


def write(conn: ConnectionSettings, topic: str, records: list[tuple[bytes, bytes]]) -> None:
    from confluent_kafka import Producer

    producer = Producer(conn.client_config() | {"linger.ms": 50, "enable.idempotence": True,
                                                "logger": logging.getLogger("kafeed.librdkafka")})
    for key, value in records:
        producer.produce(topic, key=key, value=value)
        producer.poll(0)
    assert producer.flush(60) == 0


def bare_copy(conn: ConnectionSettings, source: str, target: str, n: int, batch: int) -> float:
    """Records/s of consume → produce without transactions, first record to last flush."""
    from confluent_kafka import Consumer, Producer

    log = logging.getLogger("kafeed.librdkafka")
    consumer = Consumer(conn.client_config() | {
        "group.id": f"bare-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "isolation.level": "read_committed", "logger": log})
    producer = Producer(conn.client_config() | {"linger.ms": 20, "enable.idempotence": True,
                                                "compression.type": "lz4", "logger": log})
    consumer.subscribe([source])
    copied, start = 0, None
    try:
        while copied < n:
            for m in consumer.consume(num_messages=batch, timeout=0.5):
                if m.error() is not None:
                    continue
                start = start or time.perf_counter()
                producer.produce(target, key=m.key(), value=m.value(), headers=m.headers())
                copied += 1
            producer.poll(0)
        producer.flush(60)
        assert start is not None
        return n / (time.perf_counter() - start)
    finally:
        consumer.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20_000, help="records to route (size flag)")
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    records = docs(args.docs)
    rules = parse_rules(RULES)
    rounds = []
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            admin = TopicAdmin(conn)
            for name in ("raw", "copy", *rules.topics):
                admin.create(plan_topic(name, brokers=1, partitions=args.partitions, compression="lz4"))
            write(conn, "raw", records)
            for r in range(args.rounds):
                bare = bare_copy(conn, "raw", "copy", len(records), args.batch_size)
                settings = RouteSettings(input="raw", group=f"bench-route-{r}", idle_s=1.0,
                                         kafka={"batch_size": args.batch_size})  # type: ignore[arg-type]
                stats = run_route(settings, rules, conn, until_caught_up=True)
                assert stats.balanced and stats.records_in == len(records), stats.as_dict()
                rounds.append({"bare_records_per_s": round(bare),
                               "route_records_per_s": round(stats.records_per_s),
                               "ratio": round(stats.records_per_s / bare, 3), "by_rule": stats.by_rule})
        finally:
            cluster.stop(timeout=15, purge=True)
    result = {"docs": args.docs, "batch_size": args.batch_size, "partitions": args.partitions,
              "rounds": rounds, "median_ratio": statistics.median(rd["ratio"] for rd in rounds)}
    if args.json:
        print(json.dumps(result))
        return
    for i, rd in enumerate(rounds):
        print(f"round {i}: bare consume-produce {rd['bare_records_per_s']:,} records/s, "
              f"route {rd['route_records_per_s']:,} records/s, ratio {rd['ratio']:.2f}x")
    print(f"median ratio route / bare: {result['median_ratio']:.2f}x")


if __name__ == "__main__":
    main()
