"""What security costs: ingest and loader throughput on a secured cluster vs a plaintext one.

Not a test. Starts two single-node LocalClusters on free ports in temp dirs, one plaintext
and one with ``secure=True`` (TLS + SASL/SCRAM-SHA-512 + ACLs), and on each, in one run:

- ingest: ``kafeed.ingest.ingest`` of the same JSON-lines file (transactional, acks=all,
  zstd) as the ``ingest`` role; rate = records / produce_seconds;
- loader: ``StreamLoader(KafkaTokenDataset)`` over the same TokenizedDocument records as the
  ``trainer`` role; rate = tokens / second from the first batch to the end.

The report puts each pair side by side with the ratio secured / plaintext.

    PYTHONPATH=src python benchmarks/bench_secure.py --records 100000 --tokens 20000000
"""

from __future__ import annotations

import argparse
import json
import logging
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


def measure(cluster: LocalCluster, corpus: Path, records: int, tokens: int) -> dict[str, float]:
    import kafeed

    admin = cluster.connection()
    topics = TopicAdmin(admin)
    topics.create(plan_topic("raw", brokers=1, partitions=4), exist_ok=True)
    topics.create(plan_topic("tokens", brokers=1, partitions=4), exist_ok=True)
    summary = ingest([corpus], topic="raw", settings=cluster.connection("ingest"),
                     options=IngestOptions(job_id="bench"))
    assert summary.produced == records, summary
    produced_tokens = produce_tokens(admin, "tokens", tokens)
    loader = kafeed.StreamLoader(kafeed.KafkaTokenDataset(
        "tokens", seq_len=2048, connection=cluster.connection("trainer"), eos_id=0), batch_size=16)
    seen = 0
    start: float | None = None
    for batch in loader:
        if start is None:
            start = time.perf_counter()
        seen += int(batch["tokens"].numel())
    elapsed = time.perf_counter() - (start or time.perf_counter())
    return {"ingest_records_per_s": records / summary.produce_seconds,
            "loader_tokens_per_s": seen / elapsed if elapsed > 0 else float("nan"),
            "tokens_produced": float(produced_tokens)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--tokens", type=int, default=20_000_000)
    args = parser.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.ERROR)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-secure-") as tmp:
        corpus = Path(tmp) / "corpus.jsonl"
        make_corpus(corpus, args.records)
        for name, secure in (("plaintext", False), ("secured", True)):
            cluster = LocalCluster(Path(tmp) / name, nodes=1, secure=secure,
                                   port=free_port_block(3 if secure else 2), heap_mb=1024)
            cluster.start(timeout=240)
            try:
                results[name] = measure(cluster, corpus, args.records, args.tokens)
            finally:
                cluster.stop(timeout=15)
    plain, secured = results["plaintext"], results["secured"]
    print(f"{'':24}{'plaintext':>14}{'secured':>14}{'ratio':>8}")
    for key, label in (("ingest_records_per_s", "ingest records/s"), ("loader_tokens_per_s", "loader tokens/s")):
        print(f"{label:24}{plain[key]:>14,.0f}{secured[key]:>14,.0f}{secured[key] / plain[key]:>8.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
