"""Prepare end to end vs the tokenizer alone, on the same texts.

Starts a LocalCluster on free ports in a temporary directory, writes ``--docs``
TrainingSample records (tinyshakespeare paragraphs, each with a unique suffix so
dedup keeps them) to a raw topic, then measures

1. the tokenizer alone: ``encode_batch`` over the same texts in memory, in
   batches of ``--batch-size``;
2. ``run_prepare`` over the broker (decode → normalize → filters → dedup →
   tokenize → produce, one transaction per batch), busy time only.

and prints records/s, tokens/s and the ratio. Not a test.

    PYTHONPATH=src python benchmarks/bench_prepare.py --docs 20000 --rounds 3 --modes sync,commit,both
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
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
        text = path.read_text()
    else:  # the copy bundled in the package
        import gzip
        from importlib import resources

        text = gzip.decompress(
            resources.files("kafeed.data").joinpath("tinyshakespeare.txt.gz").read_bytes()).decode()
    paras = [p for p in text.split("\n\n") if len(p.split()) >= 3]
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


def tokenizer_alone(
    docs: list[str], settings: TokenizerSettings, batch: int, repeats: int,
) -> tuple[float, int]:
    tok = load_tokenizer(settings)
    best, tokens = float("inf"), 0
    for _ in range(repeats):
        start = time.perf_counter()
        tokens = 0
        for i in range(0, len(docs), batch):
            tokens += int(tok.encode_batch(docs[i:i + batch]).ids.size)
        best = min(best, time.perf_counter() - start)
    return best, tokens


MODES = {  # name: (tokenize in a background thread, commit on a helper thread)
    "sync": (False, False), "tok": (True, False), "commit": (False, True), "both": (True, True),
}


def measure(conn: ConnectionSettings, docs: list[str], n_rounds: int, modes: list[str],
            tok_settings: TokenizerSettings, *, batch_size: int, linger_ms: int, compression: str,
            changelog_format: str, raw: str = "raw") -> list[dict[str, object]]:
    """Per round: the tokenizer alone before and after, and prepare of ``raw`` in every mode."""
    normalized = [normalize_text(t) for t in docs]  # what prepare hands the tokenizer
    rounds: list[dict[str, object]] = []
    for r in range(n_rounds):
        before_s, tokens = tokenizer_alone(normalized, tok_settings, batch_size, repeats=1)
        runs = {}
        for mode in modes:
            tok_overlap, commit_overlap = MODES[mode]
            settings = PrepareSettings(
                input=raw, output=f"{raw}-tokens-{mode}-{r}", group=f"{raw}-bench-{mode}-{r}", idle_s=1.0,
                tokenizer=tok_settings.model_copy(update={"overlap": tok_overlap}),
                dedup={"changelog_format": changelog_format},
                kafka={"batch_size": batch_size, "linger_ms": linger_ms,
                       "compression": compression, "overlap_commit": commit_overlap},
            )
            stats = run_prepare(settings, conn, until_caught_up=True)
            runs[mode] = stats
        after_s, _ = tokenizer_alone(normalized, tok_settings, batch_size, repeats=1)
        tok_rate = len(docs) / ((before_s + after_s) / 2)
        rounds.append({
            "tokenizer_alone": {"records_per_s": round(tok_rate),
                                "tokens_per_s": round(tokens / ((before_s + after_s) / 2))},
            "prepare": {m: {"records_per_s": round(st.records_per_s),
                            "tokens_per_s": round(st.tokens_per_s), "busy_s": round(st.busy_s, 2),
                            "balanced": st.balanced, "documents_out": st.documents_out,
                            "ratio": round(st.records_per_s / tok_rate, 3)}
                        for m, st in runs.items()},
        })
    return rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20_000, help="records to prepare (size flag)")
    ap.add_argument("--tokenizer", default="minilm")
    ap.add_argument("--batch-size", type=int, default=2000)
    ap.add_argument("--linger-ms", type=int, default=20)
    ap.add_argument("--compression", default="lz4")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3,
                    help="each round: tokenizer alone, prepare (every mode), tokenizer alone")
    ap.add_argument("--modes", default="both", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--changelog-format", choices=("hash", "batch"), default="hash")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}")
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
            rounds = measure(conn, docs, args.rounds, modes, tok_settings, batch_size=args.batch_size,
                             linger_ms=args.linger_ms, compression=args.compression,
                             changelog_format=args.changelog_format)
        finally:
            cluster.stop(timeout=15, purge=True)
    summary = {m: statistics.median(rd["prepare"][m]["ratio"] for rd in rounds)  # type: ignore[index]
               for m in modes}
    result = {"docs": args.docs, "tokenizer": args.tokenizer, "batch_size": args.batch_size,
              "linger_ms": args.linger_ms, "compression": args.compression,
              "partitions": args.partitions, "write_raw_s": round(write_s, 2), "rounds": rounds,
              "median_ratio": summary}
    if args.json:
        print(json.dumps(result))
        return
    for i, rd in enumerate(rounds):
        ta = rd["tokenizer_alone"]
        print(f"round {i}: tokenizer alone ({args.tokenizer}) {ta['records_per_s']:,} records/s, "  # type: ignore[index]
              f"{ta['tokens_per_s']:,} tokens/s")  # type: ignore[index]
        for m, pr in rd["prepare"].items():  # type: ignore[attr-defined]
            print(f"  prepare [{m}]: {pr['records_per_s']:,} records/s, {pr['tokens_per_s']:,} tokens/s, "
                  f"{pr['documents_out']:,} docs in {pr['busy_s']} s, ratio {pr['ratio']:.2f}x")
    for m, ratio in summary.items():
        print(f"median ratio prepare [{m}] / tokenizer alone: {ratio:.2f}x")


if __name__ == "__main__":
    main()
