"""Prepare on realistic documents: kafeed prepare vs the tokenizer alone vs datatrove, side by side.

The corpus: ``--docs`` documents of 2-4 KB, each a random draw of tinyshakespeare
paragraphs under a unique first line, plus ``--dup-share`` of them again as exact
copies under new ids and keys (so they land in other partitions). Each round runs,
on the same texts, with one process each and the BERT WordPiece tokenizer (minilm,
truncation off everywhere):

1. the tokenizer alone: ``encode_batch`` over the normalized texts in memory;
2. ``kafeed prepare`` end to end over a local broker: decode, normalize, filters,
   route by content hash, global exact dedup, tokenize, exactly-once commits
   (busy time: first record consumed to last commit);
3. the same with ``--near-dedup`` (``--near``);
4. datatrove (``pip install 'kafeed[bench]'``): ``JsonlReader`` → Gopher repetition
   and quality filters → C4 quality filter → ``DocumentTokenizer`` writing local
   files, through its ``LocalPipelineExecutor`` (wall time of ``run()``; no dedup);
5. datatrove reader → tokenizer only, to show what its filters cost.

Not a test.

    PYTHONPATH=src python benchmarks/bench_prepare_corpus.py --docs 6000 --rounds 2 --near
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.prepare import PrepareSettings, TokenizerSettings, load_tokenizer, normalize_text, run_prepare
from kafeed.prepare.tokenize import minilm_tokenizer_path
from kafeed.schema import make_sample
from kafeed.topics import TopicAdmin, plan_topic

SHAKESPEARE = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"


def corpus(n: int, dup_share: float, seed: int = 0) -> tuple[list[tuple[str, str]], int]:
    """(id, text) records: ``n`` distinct documents of 2-4 KB and copies under new ids; and n."""
    if SHAKESPEARE.exists():
        text = SHAKESPEARE.read_text()
    else:  # the copy bundled in the package
        import gzip
        from importlib import resources

        text = gzip.decompress(
            resources.files("kafeed.data").joinpath("tinyshakespeare.txt.gz").read_bytes()).decode()
    paras = [p for p in text.split("\n\n") if len(p.split()) >= 3]
    rng = random.Random(seed)
    docs = []
    for i in range(n):
        size, parts = rng.randint(2048, 4096), [f"Document {i} of the collection."]
        while sum(map(len, parts)) < size:
            parts.append(rng.choice(paras))
        docs.append("\n\n".join(parts)[:size])
    records = [(uuid.UUID(int=rng.getrandbits(128)).hex, d) for d in docs]
    copies = int(n * dup_share)
    records += [(uuid.UUID(int=rng.getrandbits(128)).hex, rng.choice(docs)) for _ in range(copies)]
    rng.shuffle(records)
    return records, n


def write_raw(conn: ConnectionSettings, topic: str, records: list[tuple[str, str]]) -> None:
    from confluent_kafka import Producer

    producer = Producer(conn.client_config() | {
        "linger.ms": 50, "compression.type": "lz4", "enable.idempotence": True,
        "queue.buffering.max.messages": 1_000_000, "logger": logging.getLogger("kafeed.librdkafka")})
    for i, (doc_id, text) in enumerate(records):
        producer.produce(topic, key=doc_id.encode(),
                         value=make_sample(text, id=doc_id, source="bench").SerializeToString())
        if i % 5_000 == 0:
            producer.poll(0)
    producer.flush(120)


def tokenizer_alone(texts: list[str], settings: TokenizerSettings, chunk: int) -> tuple[float, int]:
    tok = load_tokenizer(settings)
    start = time.perf_counter()
    tokens = 0
    for i in range(0, len(texts), chunk):
        tokens += int(tok.encode_batch(texts[i:i + chunk]).ids.size)
    return time.perf_counter() - start, tokens


def untruncated_minilm(directory: Path) -> Path:
    """minilm's tokenizer.json with its 128-token truncation removed, as kafeed loads it."""
    spec = json.loads(minilm_tokenizer_path().read_text())
    spec["truncation"] = None
    spec["padding"] = None
    path = directory / "tokenizer.json"
    path.write_text(json.dumps(spec))
    return path


def datatrove_run(records: list[tuple[str, str]], work: Path, tokenizer: Path, *,
                  filters: bool = True) -> dict[str, Any]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.filters import C4QualityFilter, GopherQualityFilter, GopherRepetitionFilter
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.tokens import DocumentTokenizer

    data = work / "in"
    data.mkdir(parents=True)
    with (data / "part.jsonl").open("w") as f:
        for doc_id, text in records:
            f.write(json.dumps({"id": doc_id, "text": text}) + "\n")
    steps: list[Any] = [JsonlReader(str(data))]
    if filters:
        steps += [GopherRepetitionFilter(), GopherQualityFilter(),
                  C4QualityFilter(filter_no_terminal_punct=False)]
    steps.append(DocumentTokenizer(str(work / "out"), tokenizer_name_or_path=str(tokenizer)))
    executor = LocalPipelineExecutor(pipeline=steps, tasks=1, workers=1, logging_dir=str(work / "logs"))
    start = time.perf_counter()
    executor.run()
    return {"seconds": time.perf_counter() - start}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=6000, help="distinct documents")
    ap.add_argument("--dup-share", type=float, default=0.1, help="copies under new ids, as a share of --docs")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--near", action="store_true", help="also run prepare with --near-dedup")
    ap.add_argument("--no-datatrove", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)

    records, distinct = corpus(args.docs, args.dup_share)
    normalized = [normalize_text(t) for _, t in records]
    tok_settings = TokenizerSettings(name="minilm")
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        tokenizer_json = untruncated_minilm(Path(tmp))
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            TopicAdmin(conn).create(plan_topic("raw", brokers=1, partitions=args.partitions,
                                               compression="lz4"))
            write_raw(conn, "raw", records)
            for r in range(args.rounds):
                row: dict[str, Any] = {}
                seconds, tokens = tokenizer_alone(normalized, tok_settings, 500)
                row["tokenizer"] = {"docs_per_s": len(records) / seconds, "tokens_per_s": tokens / seconds}
                for name, near in (("prepare", False), ("prepare_near", True)):
                    if near and not args.near:
                        continue
                    settings = PrepareSettings(
                        input="raw", output=f"tokens-{name}-{r}", group=f"bench-{name}-{r}", idle_s=1.0,
                        tokenizer=tok_settings, dedup={"near": near},  # type: ignore[arg-type]
                        kafka={"batch_size": args.batch_size})  # type: ignore[arg-type]
                    st = run_prepare(settings, conn, until_caught_up=True)
                    row[name] = {"docs_per_s": st.records_in / st.busy_s, "busy_s": st.busy_s,
                                 "elapsed_s": st.elapsed_s, "documents_out": st.documents_out,
                                 "duplicates": st.duplicates, "near_duplicates": st.near_duplicates,
                                 "balanced": st.balanced}
                if not args.no_datatrove:
                    dt = datatrove_run(records, Path(tmp) / f"datatrove-{r}", tokenizer_json)
                    row["datatrove"] = {"docs_per_s": len(records) / dt["seconds"], "seconds": dt["seconds"]}
                    dt = datatrove_run(records, Path(tmp) / f"datatrove-tok-{r}", tokenizer_json,
                                       filters=False)
                    row["datatrove_tokenize_only"] = {"docs_per_s": len(records) / dt["seconds"],
                                                      "seconds": dt["seconds"]}
                rounds.append(row)
                print(json.dumps({"round": r, **row}, default=round), flush=True)
        finally:
            cluster.stop()
    summary: dict[str, Any] = {"records": len(records), "distinct": distinct}
    for key in ("tokenizer", "prepare", "prepare_near", "datatrove", "datatrove_tokenize_only"):
        if key in rounds[0]:
            summary[f"{key}_docs_per_s"] = round(statistics.median(x[key]["docs_per_s"] for x in rounds))
    p = summary["prepare_docs_per_s"]
    summary["prepare_vs_tokenizer"] = round(p / summary["tokenizer_docs_per_s"], 3)
    if "datatrove_docs_per_s" in summary:
        summary["prepare_vs_datatrove"] = round(p / summary["datatrove_docs_per_s"], 3)
    if "prepare_near_docs_per_s" in summary:
        summary["near_vs_prepare"] = round(summary["prepare_near_docs_per_s"] / p, 3)
    print(json.dumps(summary, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
