"""`kafeed infer` vs the model alone, at batch sizes 1, 8, 32 and 128 on CPU.

Starts a LocalCluster on free ports in a temporary directory, builds a classifier
checkpoint the way `kafeed train --model classifier` saves one (MiniLM-L6 when
installed, else the random-init encoder of its shape; weights as initialised: speed
does not depend on training), writes ``--docs`` TrainingSample records, then for each
batch size measures

1. the model alone: tokenize + forward under ``torch.inference_mode()`` over the
   same texts in memory: records/s, tokens/s, p99 time per batch;
2. the infer stage on the stream core over the broker (consume → decode → tokenize →
   forward → one prediction per record, one transaction per batch): records/s over
   busy time and p99 of the stage's time per batch (decode + tokenize + forward).

and prints the ratio (target at batch 32: >= 0.8x). Not a test.

    PYTHONPATH=src python benchmarks/bench_infer.py --docs 2000 --batch-sizes 1,8,32,128
"""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.infer import InferSettings, InferStage, load_served_model
from kafeed.infer.stage import resolve_device
from kafeed.schema import make_sample
from kafeed.stream import Record, StreamProcessor
from kafeed.topics import TopicAdmin, plan_topic
from kafeed.train.checkpoint import CheckpointManager
from kafeed.train.classifier import TextEncoder
from kafeed.train.models import build_classifier, minilm_dir

MAX_LENGTH = 64


def texts(n: int) -> list[str]:
    words = ["the", "river", "runs", "to", "the", "sea", "and", "it", "is", "cold", "in", "the",
             "morning", "when", "the", "boats", "come", "home"]
    return [" ".join(words[(i + j) % len(words)] for j in range(8 + i % 24)) for i in range(n)]


def make_checkpoint(directory: Path, pretrained: bool | None = None) -> Path:
    """A two-label classifier's checkpoint: MiniLM's weights where they are here (``pretrained``
    None), else (or False) the same architecture initialised at random."""
    pretrained = minilm_dir() is not None if pretrained is None else pretrained
    encode = TextEncoder(MAX_LENGTH, pretrained=pretrained)
    model, desc = build_classifier(2, pretrained=pretrained, vocab_size=encode.vocab_size)
    config = {"model": "classifier", "num_labels": 2, "max_length": MAX_LENGTH, "encoder": desc["encoder"]}
    return CheckpointManager(directory).save(1, {"model": model.state_dict()}, manifest={"config": config})


def model_alone(ckpt: Path, docs: Sequence[str], batch: int) -> dict[str, float]:
    served = load_served_model(ckpt)
    times, tokens = [], 0
    start = time.perf_counter()
    for i in range(0, len(docs), batch):
        t0 = time.perf_counter()
        ids, mask = served.encode(list(docs[i: i + batch]))
        with torch.inference_mode():
            torch.softmax(served.model(ids, mask), dim=-1).argmax(-1).tolist()
        times.append(time.perf_counter() - t0)
        tokens += int(mask.sum())
    elapsed = time.perf_counter() - start
    return {"records_per_s": len(docs) / elapsed, "tokens_per_s": tokens / elapsed,
            "p99_batch_ms": float(np.percentile(times, 99)) * 1000}


class TimedStage(InferStage):
    """Records the time of each batch's process() call."""

    times: list[float]

    def process(self, records: Sequence[Record]) -> Any:
        t0 = time.perf_counter()
        out = super().process(records)
        self.times.append(time.perf_counter() - t0)
        return out


def pipeline(conn: ConnectionSettings, ckpt: Path, batch: int, n: int, raw: str = "raw") -> dict[str, float]:
    settings = InferSettings(input=raw, output=f"{raw}-pred-{batch}", group=f"{raw}-bench-infer-{batch}",
                             batch_size=batch, max_wait_ms=100, idle_s=1.0)
    stage = TimedStage(load_served_model(ckpt, device=resolve_device("cpu")), settings)
    stage.times = []
    stats = StreamProcessor(stage, settings.stream_settings(), conn).run(until_caught_up=True)
    assert stats.balanced and stats.records_in == n, stats.as_dict()
    return {"records_per_s": stats.records_per_s,
            "p99_batch_ms": float(np.percentile(stage.times, 99)) * 1000}


def measure(conn: ConnectionSettings, ckpt: Path, docs: Sequence[str], sizes: Sequence[int], *,
            partitions: int = 3, raw: str = "raw") -> Iterator[dict[str, Any]]:
    """Writes ``docs`` to ``raw``, then per batch size the model alone beside the infer stage."""
    TopicAdmin(conn).create(plan_topic(raw, brokers=1, partitions=partitions))
    from confluent_kafka import Producer

    producer = Producer(conn.client_config() | {"linger.ms": 20})
    for i, text in enumerate(docs):
        producer.produce(raw, key=f"d{i}".encode(), value=make_sample(text, id=f"d{i}").SerializeToString())
        producer.poll(0)
    assert producer.flush(60) == 0
    for batch in sizes:
        alone = model_alone(ckpt, docs, batch)
        served = pipeline(conn, ckpt, batch, len(docs), raw)
        yield {"batch": batch, "model_alone": {k: round(v, 1) for k, v in alone.items()},
               "pipeline": {k: round(v, 1) for k, v in served.items()},
               "ratio": round(served["records_per_s"] / alone["records_per_s"], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=2000, help="records to serve (size flag)")
    ap.add_argument("--batch-sizes", default="1,8,32,128")
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    logging.getLogger("kafeed.librdkafka").setLevel(logging.CRITICAL)
    if args.threads:
        torch.set_num_threads(args.threads)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    docs = texts(args.docs)
    rows: list[dict[str, Any]] = []
    if not args.json:
        print(f"{args.docs} records, max_length {MAX_LENGTH}, {torch.get_num_threads()} torch threads",
              flush=True)
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        ckpt = make_checkpoint(Path(tmp) / "ck")
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            for row in measure(conn, ckpt, docs, sizes, partitions=args.partitions):
                rows.append(row)
                if not args.json:
                    _print(row)
        finally:
            cluster.stop(timeout=15, purge=True)
    if args.json:
        print(json.dumps({"docs": args.docs, "threads": torch.get_num_threads(), "rows": rows}))


def _print(row: dict[str, Any]) -> None:
    a, p = row["model_alone"], row["pipeline"]
    print(f"batch {row['batch']:>3}: model alone {a['records_per_s']:,.0f} rec/s "
          f"({a['tokens_per_s']:,.0f} tok/s, p99 {a['p99_batch_ms']:.0f} ms) | "
          f"infer {p['records_per_s']:,.0f} rec/s (p99 {p['p99_batch_ms']:.0f} ms) | "
          f"ratio {row['ratio']:.2f}x", flush=True)


if __name__ == "__main__":
    main()
