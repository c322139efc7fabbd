"""Prepare end to end vs the tokenizer alone, on the same texts.

Starts a LocalCluster on free ports in a temporary directory, writes ``--docs``
TrainingSample records (tinyshakespeare paragraphs, each with a unique suffix so
dedup keeps them) to a raw topic, then measures

1. the tokenizer alone: ``encode_batch`` over the same texts in memory, in
   batches of ``--batch-size``;
2. ``run_prepare`` over the broker (decode → normalize → filters → dedup →
   tokenize → produce, one transaction per batch), busy time only.

and prints records/s, tokens/s and the ratio. Not a test.

    PYTHONPATH=src python benchmarks/bench_prepare.py --docs 50000 --tokenizer minilm
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.prepare import PrepareSettings, TokenizerSettings, load_tokenizer, normalize_text, run_prepare
from kafeed.prepare.dedup import content_hash
from kafeed.schema import make_sample
from kafeed.topics import TopicAdmin, plan_topic

SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


def texts(n: int, path: Path) -> list[str]:
    if path.exists():
        paras = [p for p in path.read_text().split("\n\n") if len(p.split()) >= 3]
    else:
        paras = ["To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer"]
    return [f"{paras[i % len(paras)]}\n(copy {i})" for i in range(n)]


def write_raw(conn: ConnectionSettings, topic: str, docs: list[str]) -> float:
    from confluent_kafka import Producer

    producer = Producer(conn.client_config() | {
        "linger.ms": 50, "compression.type": "lz4", "enable.idempotence": True,
        "queue.buffering.max.messages": 1_000_000, "logger": logging.getLogger("kafeed.librdkafka")})
    start = time.perf_counter()
    for i, text in enumerate(docs):
        key = content_hash(text).hex()
        producer.produce(topic, key=key.encode(),
                         value=make_sample(text, id=key, source="bench").SerializeToString())
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)
    return time.perf_counter() - start


def tokenizer_alone(docs: list[str], settings: TokenizerSettings, batch: int, repeats: int) -> tuple[float, int]:
    tok = load_tokenizer(settings)
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = 0
        for i in range(0, len(docs), batch):
            tokens += int(tok.encode_batch(docs[i:i + batch]).ids.size)
        best = min(best, time.perf_counter() - start)
    return best, tokens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20_000, help="records to prepare (size flag)")
    ap.add_argument("--tokenizer", default="minilm")
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--linger-ms", type=int, default=20)
    ap.add_argument("--compression", default="lz4")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)

    docs = texts(args.docs, SHAKESPEARE)
    tok_settings = TokenizerSettings(name=args.tokenizer)
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            TopicAdmin(conn).create(plan_topic("raw", brokers=1, partitions=args.partitions,
                                               compression="lz4"))
            write_s = write_raw(conn, "raw", docs)
            settings = PrepareSettings(
                input="raw", output="tokens", group="bench", idle_s=1.0, tokenizer=tok_settings,
                kafka={"batch_size": args.batch_size, "linger_ms": args.linger_ms,
                       "compression": args.compression},
            )
            stats = run_prepare(settings, conn, until_caught_up=True)
        finally:
            cluster.stop(timeout=15, purge=True)
    # The tokenizer alone on the texts prepare tokenized (normalized), after the broker is gone.
    normalized = [normalize_text(t) for t in docs]
    tok_s, tok_tokens = tokenizer_alone(normalized, tok_settings, args.batch_size, repeats=2)
    result = {
        "docs": args.docs, "tokenizer": args.tokenizer, "batch_size": args.batch_size,
        "linger_ms": args.linger_ms, "compression": args.compression, "partitions": args.partitions,
        "write_raw_s": round(write_s, 2),
        "tokenizer_alone": {"records_per_s": round(len(docs) / tok_s), "tokens_per_s": round(tok_tokens / tok_s)},
        "prepare": {"records_per_s": round(stats.records_per_s), "tokens_per_s": round(stats.tokens_per_s),
                    "busy_s": round(stats.busy_s, 2), "documents_out": stats.documents_out,
                    "balanced": stats.balanced},
        "ratio": round(stats.records_per_s / (len(docs) / tok_s), 3),
    }
    if args.json:
        print(json.dumps(result))
    else:
        ta, pr = result["tokenizer_alone"], result["prepare"]
        print(f"tokenizer alone ({args.tokenizer}): {ta['records_per_s']:,} records/s, "  # type: ignore[index]
              f"{ta['tokens_per_s']:,} tokens/s")  # type: ignore[index]
        print(f"prepare end to end:   {pr['records_per_s']:,} records/s, {pr['tokens_per_s']:,} tokens/s "  # type: ignore[index]
              f"({pr['documents_out']:,} docs in {pr['busy_s']} s)")  # type: ignore[index]
        print(f"ratio prepare / tokenizer alone: {result['ratio']:.2f}x")


if __name__ == "__main__":
    main()
