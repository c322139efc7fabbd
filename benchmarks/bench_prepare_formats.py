"""Prepare on a JSON topic against prepare on the same documents as TrainingSample records.

Writes ``--docs`` documents (tinyshakespeare paragraphs, each made unique so dedup keeps
them) twice: as ``TrainingSample`` records, as ``kafeed ingest`` writes them, and as the
JSON objects a service would produce (``{"id": ..., "text": ...}``). Then, per round, runs
``run_prepare`` over each topic (default settings: global dedup, the bytes tokenizer, so
that decoding weighs as much as it can) and compares records/s over busy time, and
records per second of this process's CPU (prepare runs in it: less moved by other load on
the machine than the wall clock). The order alternates between rounds; the figures are the
medians of the rounds' ratios. Not a test
(tests/integration/test_bench_prepare_formats.py runs a seconds-long version).

    PYTHONPATH=src python benchmarks/bench_prepare_formats.py --docs 20000 --rounds 5
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import statistics
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.prepare import PrepareSettings, run_prepare
from kafeed.schema import make_sample
from kafeed.topics import TopicAdmin, plan_topic


def documents(n: int) -> list[tuple[str, str]]:
    """``n`` (id, text) pairs of distinct paragraphs."""
    text = gzip.decompress(resources.files("kafeed.data").joinpath("tinyshakespeare.txt.gz").read_bytes())
    paras = [p for p in text.decode().split("\n\n") if len(p.split()) >= 3]
    return [(f"doc-{i}", f"{paras[i % len(paras)]}\n(copy {i})") for i in range(n)]


def write_topics(conn: ConnectionSettings, docs: list[tuple[str, str]], *, partitions: int,
                 prefix: str) -> tuple[str, str]:
    """The two topics, ``<prefix>samples`` and ``<prefix>json``, holding the same documents."""
    from confluent_kafka import Producer

    samples, objects = f"{prefix}samples", f"{prefix}json"
    admin = TopicAdmin(conn)
    for topic in (samples, objects):
        admin.create(plan_topic(topic, brokers=1, partitions=partitions, compression="lz4"))
    producer = Producer(conn.client_config() | {"linger.ms": 50, "compression.type": "lz4",
                                                "queue.buffering.max.messages": 1_000_000})
    for i, (doc_id, text) in enumerate(docs):
        key = doc_id.encode()
        sample = make_sample(text, id=doc_id, source="bench")
        producer.produce(samples, key=key, value=sample.SerializeToString())
        producer.produce(objects, key=key, value=json.dumps({"id": doc_id, "text": text}).encode())
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    return samples, objects


def measure(conn: ConnectionSettings, docs: int, rounds: int, *, partitions: int = 3, batch_size: int = 2000,
            prefix: str = "bench-") -> dict[str, Any]:
    """Prepare over both topics ``rounds`` times; per round each one's figures and the ratio."""
    samples, objects = write_topics(conn, documents(docs), partitions=partitions, prefix=prefix)
    formats = {samples: {}, objects: {"format": "json"}}
    out: list[dict[str, Any]] = []
    for r in range(rounds):
        runs: dict[str, Any] = {}
        order = (samples, objects) if r % 2 == 0 else (objects, samples)
        for topic in order:
            settings = PrepareSettings.model_validate({
                "input": topic, "output": f"{topic}-tokens-{r}", "group": f"{topic}-{r}", "idle_s": 1.0,
                "kafka": {"batch_size": batch_size}, "formats": {"topics": {topic: formats[topic]}}})
            cpu = time.process_time()
            stats = run_prepare(settings, conn, until_caught_up=True)
            cpu_s = time.process_time() - cpu
            runs["json" if topic == objects else "kafeed"] = {
                "records_per_s": round(stats.records_per_s), "busy_s": round(stats.busy_s, 3),
                "records_per_cpu_s": round(stats.records_in / cpu_s), "cpu_s": round(cpu_s, 3),
                "documents_out": stats.documents_out, "dead_lettered": stats.dead_lettered,
                "balanced": stats.balanced}
        runs["ratio"] = round(runs["json"]["records_per_s"] / runs["kafeed"]["records_per_s"], 3)
        runs["cpu_ratio"] = round(runs["json"]["records_per_cpu_s"] / runs["kafeed"]["records_per_cpu_s"], 3)
        out.append(runs)
    return {"docs": docs, "rounds": out, "median_ratio": statistics.median(r["ratio"] for r in out),
            "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20_000, help="documents per topic")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            start = time.perf_counter()
            result = measure(ConnectionSettings(bootstrap=cluster.bootstrap), args.docs, args.rounds,
                             partitions=args.partitions, batch_size=args.batch_size)
            result["seconds"] = round(time.perf_counter() - start, 1)
        finally:
            cluster.stop(timeout=15, purge=True)
    if args.json:
        print(json.dumps(result))
        return
    for i, rd in enumerate(result["rounds"]):
        kafeed, objects = rd["kafeed"], rd["json"]
        print(f"round {i}: TrainingSample {kafeed['records_per_s']:,} records/s "
              f"({kafeed['records_per_cpu_s']:,}/CPU-s), JSON {objects['records_per_s']:,} records/s "
              f"({objects['records_per_cpu_s']:,}/CPU-s), ratio {rd['ratio']:.3f}x "
              f"(CPU {rd['cpu_ratio']:.3f}x)")
    print(f"median ratio JSON / TrainingSample: {result['median_ratio']:.3f}x over busy time, "
          f"{result['median_cpu_ratio']:.3f}x per CPU second")


if __name__ == "__main__":
    main()
