"""What security costs: ingest and loader throughput on a secured cluster vs a plaintext one.

Not a test. Starts two single-node LocalClusters on free ports in temp dirs, one plaintext
and one with ``secure=True`` (TLS + SASL/SCRAM-SHA-512 + ACLs), and on each, in one run:

- ingest: ``kafeed.ingest.ingest`` of the same JSON-lines file (transactional, acks=all,
  zstd) as the ``ingest`` role; rate = records / produce_seconds;
- loader: ``StreamLoader(KafkaTokenDataset)`` over the same TokenizedDocument records as the
  ``trainer`` role; rate = tokens / second from the first batch to the end.

Both clusters run side by side and the measurements alternate between them for
``--rounds`` rounds; the report puts the medians side by side with the ratio
secured / plaintext.

    PYTHONPATH=src python benchmarks/bench_secure.py --records 50000 --tokens 10000000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.ingest import IngestOptions, ingest
from kafeed.kafka import client_config
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic


def make_corpus(path: Path, records: int) -> None:
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
    with path.open("w") as fh:
        for i in range(records):
            text = " ".join(words[(i + j) % len(words)] for j in range(24))
            fh.write(json.dumps({"id": f"doc-{i}", "text": f"{text} {i}"}) + "\n")


def produce_tokens(admin: ConnectionSettings, topic: str, tokens: int, doc_len: int = 2048) -> int:
    from confluent_kafka import Producer

    producer = Producer(client_config(admin, {"linger.ms": 50, "compression.type": "lz4"}))
    docs = max(1, tokens // doc_len)
    ids = np.arange(doc_len, dtype=np.int64) % 50000 + 1
    for i in range(docs):
        record = make_document(ids, id=f"doc-{i}", vocab_size=65536, tokenizer="bench")
        producer.produce(topic, key=f"doc-{i}".encode(), value=record.SerializeToString())
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(120) == 0
    return docs * doc_len


def setup(cluster: LocalCluster, tokens: int, topic: str = "tokens") -> None:
    admin = cluster.connection()
    TopicAdmin(admin).create(plan_topic(topic, brokers=1, partitions=4), exist_ok=True)
    produce_tokens(admin, topic, tokens)


def ingest_rate(cluster: LocalCluster, corpus: Path, records: int, round_: int, raw: str = "raw") -> float:
    # A fresh raw topic per round (the ingest role's ACLs name "raw": recreate it as admin).
    admin = TopicAdmin(cluster.connection())
    if admin.exists(raw):
        admin.delete(raw)
        while admin.exists(raw):
            time.sleep(0.2)
    admin.create(plan_topic(raw, brokers=1, partitions=4), exist_ok=True)
    summary = ingest([corpus], topic=raw, settings=cluster.connection("ingest"),
                     options=IngestOptions(job_id=f"bench-{round_}"))
    assert summary.produced == records, summary
    return records / summary.produce_seconds


def loader_rate(cluster: LocalCluster, topic: str = "tokens") -> float:
    import kafeed

    loader = kafeed.StreamLoader(kafeed.KafkaTokenDataset(
        topic, seq_len=2048, connection=cluster.connection("trainer"), eos_id=0), batch_size=16)
    seen = 0
    start: float | None = None
    for batch in loader:
        if start is None:
            start = time.perf_counter()
        seen += int(batch["tokens"].numel())
    elapsed = time.perf_counter() - (start or time.perf_counter())
    return seen / elapsed if elapsed > 0 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--tokens", type=int, default=20_000_000)
    parser.add_argument("--rounds", type=int, default=3, help="Alternating rounds; medians are reported.")
    args = parser.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.ERROR)
    names = ("plaintext", "secured")
    rates: dict[str, dict[str, list[float]]] = {n: {"ingest": [], "loader": []} for n in names}
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-secure-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        make_corpus(corpus, args.records)
        clusters = {name: LocalCluster(Path(tmp) / name, nodes=1, secure=name == "secured",
                                       port=free_port_block(3), heap_mb=1024) for name in names}
        try:
            for cluster in clusters.values():
                cluster.start(timeout=240)
                setup(cluster, args.tokens)
            # Both clusters run throughout and the rounds alternate, so a change in the
            # machine's load hits both sides alike.
            for round_ in range(args.rounds):
                for name, cluster in clusters.items():
                    rates[name]["ingest"].append(ingest_rate(cluster, corpus, args.records, round_))
                    rates[name]["loader"].append(loader_rate(cluster))
        finally:
            for cluster in clusters.values():
                cluster.stop(timeout=15)
    med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in rates.items()}
    print(f"{'':24}{'plaintext':>14}{'secured':>14}{'ratio':>8}   (medians of {args.rounds} rounds)")
    for key, label in (("ingest", "ingest records/s"), ("loader", "loader tokens/s")):
        plain, secured = med["plaintext"][key], med["secured"][key]
        print(f"{label:24}{plain:>14,.0f}{secured:>14,.0f}{secured / plain:>8.2f}")
    print(json.dumps(rates))


if __name__ == "__main__":
    main()
