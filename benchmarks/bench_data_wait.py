"""Where the trainer's data-wait goes: the demo's GPT run, profiled in-process.

Starts a LocalCluster on free ports in a temp dir, produces the bundled corpus as
byte-tokenized documents (what `make demo` trains on), then trains the demo's GPT
(300 steps, batch 8, seq_len 128, num_workers 0, shuffle buffer 256; the stream opened
before torch is imported, as ``kafeed train`` opens it) and reports the
data-wait share (time in ``next(loader)`` over the run), the first batch's wait apart
from the steady state, and the loader functions that take the most time inside the
waits (cProfile, cumulative).

    PYTHONPATH=src python benchmarks/bench_data_wait.py [--steps 300] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import gzip
import io
import pstats
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.prepare.settings import TokenizerSettings
from kafeed.prepare.tokenize import load_tokenizer
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic


def produce(conn: ConnectionSettings, topic: str, docs: int | None = None) -> int:
    """The corpus's paragraphs (the first ``docs`` of them) as documents over three partitions."""
    corpus = resources.files("kafeed.data").joinpath("tinyshakespeare.txt.gz")
    with corpus.open("rb") as fh, gzip.open(fh) as src:
        text = src.read().decode()
    paras = [p.strip() for p in text.split("\n\n") if p.strip()][:docs]
    tok = load_tokenizer(TokenizerSettings(name="bytes"))
    batch = tok.encode_batch(paras)
    producer = Producer({**conn.client_config(), "linger.ms": 20})
    for i in range(len(paras)):
        ids = batch.ids[batch.offsets[i]: batch.offsets[i + 1]]
        doc = make_document(ids, id=f"doc-{i}", vocab_size=tok.vocab_size, tokenizer=tok.fingerprint)
        producer.produce(topic, value=doc.SerializeToString(), partition=i % 3)
        if i % 1000 == 0:
            producer.poll(0)
    producer.flush(60)
    return len(paras)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--profile", action="store_true", help="cProfile the waits (slows the run)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafeed-wait-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=1024)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            TopicAdmin(conn).create(plan_topic("tokens", brokers=1, partitions=3))
            docs = produce(conn, "tokens")
            print(f"{docs:,} documents produced", flush=True)
            wait = run(conn, Path(tmp), args.steps, args.profile)
        finally:
            cluster.stop()
    print(f"steps {wait['steps']}, run {wait['seconds']:.1f} s, "
          f"data-wait {wait['data_wait_seconds']:.2f} s = {100 * wait['data_wait_share']:.2f} %")
    later = wait["later_ms"]
    print(f"first batch {wait['first_ms']:.1f} ms; later batches {wait['each_ms']:.2f} ms each = "
          f"{wait['steady_share'] * 100:.2f} % of the run (median {later[len(later) // 2]:.2f} ms, "
          f"p90 {later[int(0.9 * (len(later) - 1))]:.2f} ms, max {later[-1]:.1f} ms)")
    if wait["profile"]:
        print(wait["profile"])
    return 0


def run(conn: ConnectionSettings, tmp: Path, steps: int, profile: bool,
        topic: str = "tokens") -> dict[str, Any]:
    """Train ``steps`` steps on ``topic``; the run's data-wait and each batch's wait, timed apart."""
    from kafeed.train.options import TrainOptions
    from kafeed.train.startup import start

    options = TrainOptions(topic=topic, steps=steps, batch_size=8, seq_len=128, tokenizer="bytes",
                           checkpoint_dir=tmp / "ck", checkpoint_every=100, log_every=100)
    # As `kafeed train` does: the stream opens before torch is imported, so the consumer
    # joins and fetches while the import runs.
    startup = start(options, conn)
    from kafeed.loader import stream_loader
    from kafeed.train.gpt import train_gpt

    waits: list[float] = []
    profiler = cProfile.Profile() if profile else None
    original = stream_loader.StreamLoader.__iter__

    def timed(self: Any) -> Any:
        it = original(self)
        while True:
            t0 = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            try:
                batch = next(it)
            except StopIteration:
                return
            finally:
                if profiler is not None:
                    profiler.disable()
                waits.append(time.perf_counter() - t0)
            yield batch
            del batch  # the runner frees each batch after its step, not inside the next wait

    stream_loader.StreamLoader.__iter__ = timed  # type: ignore[method-assign]
    try:
        result, _ = train_gpt(options, conn, progress=lambda line: None, startup=startup)
    finally:
        stream_loader.StreamLoader.__iter__ = original  # type: ignore[method-assign]
    steady = sum(waits[1:])
    report = ""
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(25)
        report = out.getvalue()
    return {"steps": result.steps, "seconds": result.seconds, "data_wait_seconds": result.data_wait_seconds,
            "data_wait_share": result.data_wait_share, "first_ms": 1000 * waits[0],
            "each_ms": 1000 * steady / max(1, len(waits) - 1), "steady_share": steady / result.seconds,
            "later_ms": sorted(1000 * w for w in waits[1:]) or [0.0], "profile": report}


if __name__ == "__main__":
    raise SystemExit(main())
