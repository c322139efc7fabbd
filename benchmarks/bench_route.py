"""The router vs a bare consume-produce loop on the same records.

Starts a LocalCluster on free ports in a temporary directory, writes ``--docs``
TrainingSample records to a raw topic, then measures, each round:

1. a bare loop (before and after each router): a consumer (read_committed, batch consume) and a plain
   idempotent producer copying every record to one topic, no transactions,
   no decoding, no rules, until all records are copied and flushed;
2. ``run_route`` with four rules (source, regex, language, length) and a default,
   exactly once, with route's default batching (or ``--batch-size``), busy time only;
3. with ``--baseline-src DIR``, the router of another source tree (a checkout of an
   older commit) the same way, so a change is measured against what it replaces on
   the same broker, data and machine load.

Each router runs in its own process (``--route-only``) and prints its counts as JSON.
Prints records/s and the ratios to the bare loop (target: >= 0.6x). Not a test.

    PYTHONPATH=src python benchmarks/bench_route.py --docs 100000 --rounds 3 --baseline-src ../old/src
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
import uuid
from pathlib import Path
from typing import Any

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


def rules_after(prefix: str) -> dict[str, Any]:
    """RULES with every target topic's name after ``prefix``."""
    def to(topic: str) -> str:
        return topic if topic == "drop" else prefix + topic

    return {"default": to(RULES["default"]),
            "rule": [rule | {"to": to(rule["to"])} for rule in RULES["rule"]]}


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


def route_once(bootstrap: str, group: str, batch_size: int | None, src: str | None,
               prefix: str = "") -> dict[str, Any]:
    """The counts of one router run over all of ``raw``, in a process that imports kafeed from ``src``."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src
    cmd = [sys.executable, __file__, "--route-only", "--bootstrap", bootstrap, "--group", group,
           "--prefix", prefix]
    if batch_size is not None:
        cmd += ["--batch-size", str(batch_size)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    stats: dict[str, Any] = json.loads(done.stdout)
    return stats


def route_only(bootstrap: str, group: str, batch_size: int | None, prefix: str = "") -> None:
    kafka = {"batch_size": batch_size} if batch_size is not None else {}
    settings = RouteSettings(input=prefix + "raw", group=group, idle_s=1.0, kafka=kafka)  # type: ignore[arg-type]
    stats = run_route(settings, parse_rules(rules_after(prefix)), ConnectionSettings(bootstrap=bootstrap),
                      until_caught_up=True)
    print(json.dumps(stats.as_dict() | {"balanced": stats.balanced}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=100_000, help="records to route (size flag)")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="router records per transaction (default: route's own default)")
    ap.add_argument("--poll", type=int, default=2000, help="records per consume call of the bare loop")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline-src", default=None,
                    help="also time the router of this source tree (e.g. an older checkout's src/)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--route-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    ap.add_argument("--group", help=argparse.SUPPRESS)
    ap.add_argument("--prefix", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    if args.route_only:
        route_only(args.bootstrap, args.group, args.batch_size, args.prefix)
        return
    records = docs(args.docs)
    rules = parse_rules(RULES)
    variants = {"route": None} | ({"baseline": args.baseline_src} if args.baseline_src else {})
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
                # The bare loop runs before and after each router; a router's ratio is to the mean
                # of the two, so a change of machine load during the round shows in both.
                # Alternate which router goes first, so neither always meets a warmer broker.
                order = list(variants.items()) if r % 2 == 0 else list(variants.items())[::-1]
                bare = [bare_copy(conn, "raw", "copy", len(records), args.poll)]
                row: dict[str, Any] = {}
                for name, src in order:
                    batch = args.batch_size if src is None else None  # the baseline keeps its defaults
                    stats = route_once(cluster.bootstrap, f"bench-{name}-{r}", batch, src)
                    assert stats["balanced"] and stats["records_in"] == len(records), stats
                    bare.append(bare_copy(conn, "raw", "copy", len(records), args.poll))
                    around = (bare[-2] + bare[-1]) / 2
                    row[f"{name}_records_per_s"] = round(stats["records_per_s"])
                    row[f"{name}_bare_records_per_s"] = round(around)
                    row[f"{name}_ratio"] = round(stats["records_per_s"] / around, 3)
                    row[f"{name}_batches"] = stats["batches"]
                rounds.append(row)
        finally:
            cluster.stop(timeout=15, purge=True)
    result: dict[str, Any] = {"docs": args.docs, "batch_size": args.batch_size, "partitions": args.partitions,
                              "rounds": rounds}
    for name in variants:
        result[f"{name}_median_ratio"] = statistics.median(rd[f"{name}_ratio"] for rd in rounds)
    if args.json:
        print(json.dumps(result))
        return
    for i, rd in enumerate(rounds):
        for name in variants:
            print(f"round {i}: {name:8s} {rd[f'{name}_records_per_s']:>8,} records/s in "
                  f"{rd[f'{name}_batches']:>3} transactions, bare loop around it "
                  f"{rd[f'{name}_bare_records_per_s']:>8,} records/s: {rd[f'{name}_ratio']:.2f}x")
    for name in variants:
        print(f"median ratio {name} / bare: {result[f'{name}_median_ratio']:.2f}x")


if __name__ == "__main__":
    main()
