"""Mixture throughput against a single topic holding the same tokens.

Starts a LocalCluster on free ports in a temp dir, produces ``--tokens`` token ids split
over three topics (web 60 %, code 30 %, books 10 %, 2 partitions each) and the same
documents again into one 6-partition topic, then reads ``--read`` of the tokens with
StreamLoader (num_workers=0, seq_len 2048, batch ``--batch-size``, default 8): once from
the single topic, once as ``Mixture({"web": 0.6, "code": 0.3, "books": 0.1})``, each at
its default prefetch depth unless ``--prefetch-batches`` sets both, interleaved
``--repeat`` times; best of each is kept (the machine may be shared). Rates count from the
first batch, in tokens per second and per CPU second of the reading process; the time to
the first batch (one consumer to open per source) is printed apart. ``--baseline-src``
(another commit's ``src/``) reads the mixture with that kafeed too, side by side; every
read then runs in a process of its own, these included.

    PYTHONPATH=src python benchmarks/bench_mixture.py --tokens 120e6 --read 100e6
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Producer

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic

SHARES = {"web": 0.6, "code": 0.3, "books": 0.1}


def produce(conn: ConnectionSettings, tokens: int, doc_tokens: int, prefix: str = "") -> None:
    """The documents into each share's topic and into ``all`` (every name after ``prefix``)."""
    rng = np.random.default_rng(0)
    producer = Producer({**conn.client_config(), "linger.ms": 50, "batch.size": 1_000_000})
    for name, share in SHARES.items():
        for i in range(int(tokens * share) // doc_tokens):
            ids = rng.integers(1, 50_000, size=doc_tokens, dtype=np.uint16)
            doc = make_document(ids, id=f"{name}-{i}", vocab_size=65536, tokenizer="bench")
            value = doc.SerializeToString()
            for topic in (prefix + name, prefix + "all"):
                while True:
                    try:
                        producer.produce(topic, value=value)
                        break
                    except BufferError:
                        producer.poll(0.05)
    producer.flush(120)


def read(loader_of: object, tokens: int, batch_size: int = 8) -> tuple[float, float, float]:
    """(tokens/s after the first batch, seconds to the first batch, tokens per CPU second of
    the process after the first batch: every thread, librdkafka's included): opening one
    consumer per source is a fixed cost per run, apart from the rates. On a shared machine
    the CPU rate moves less with the load than the wall-clock one."""
    import kafeed

    loader = kafeed.StreamLoader(loader_of, batch_size=batch_size)  # type: ignore[arg-type]
    seen = 0
    t0 = time.perf_counter()
    first: float | None = None
    cpu = 0.0
    for batch in loader:
        if first is None:
            first = time.perf_counter()
            cpu = time.process_time()
        else:
            seen += batch["tokens"].numel()
        if seen >= tokens:
            break
    assert first is not None
    return seen / (time.perf_counter() - first), first - t0, seen / (time.process_time() - cpu)


def dataset(name: str, conn: ConnectionSettings, prefetch: int | None = None, prefix: str = "") -> object:
    """The single topic or the mixture, each at its default prefetch depth unless ``prefetch``."""
    import kafeed

    depth: dict[str, Any] = {} if prefetch is None else {"prefetch_batches": prefetch}
    if name == "single":
        return kafeed.KafkaTokenDataset(prefix + "all", seq_len=2048, eos_id=0, connection=conn, **depth)
    shares = {prefix + topic: share for topic, share in SHARES.items()}
    return kafeed.Mixture(shares, seq_len=2048, eos_id=0, connection=conn, **depth)


def read_apart(name: str, bootstrap: str, tokens: int, batch_size: int, src: str | None,
               prefetch: int | None) -> tuple[float, float, float]:
    """:func:`read` in a process of its own, with the kafeed of ``src`` (default: this one)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(([src] if src else []) + sys.path)}
    depth = [] if prefetch is None else [str(prefetch)]
    out = subprocess.run([sys.executable, __file__, "--reader", name, bootstrap, str(tokens), str(batch_size),
                          *depth],
                         capture_output=True, text=True, env=env, check=True).stdout
    rate, start, cpu_rate = json.loads(out.strip().splitlines()[-1])
    return float(rate), float(start), float(cpu_rate)


def main() -> int:
    if sys.argv[1:2] == ["--reader"]:
        name, bootstrap, tokens = sys.argv[2], sys.argv[3], int(sys.argv[4])
        batch_size = int(sys.argv[5])
        prefetch = int(sys.argv[6]) if len(sys.argv) > 6 else None
        data = dataset(name, ConnectionSettings(bootstrap=bootstrap), prefetch)
        print(json.dumps(read(data, tokens, batch_size)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=float, default=60e6)
    ap.add_argument("--read", type=float, default=40e6,
                    help="tokens read per run (at most what the books share allows: --tokens)")
    ap.add_argument("--doc-tokens", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline-src", default=None,
                    help="also read the mixture with the kafeed of this source tree (another commit's src/)")
    ap.add_argument("--batch-size", type=int, default=8, help="windows of 2,049 tokens per batch")
    ap.add_argument("--prefetch-batches", type=int, default=None,
                    help="read both at this prefetch depth (default: each at its own, 2 and 8)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kafeed-mix-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=1024)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            admin = TopicAdmin(conn)
            for name in SHARES:
                admin.create(plan_topic(name, brokers=1, partitions=2, compression="none"))
            admin.create(plan_topic("all", brokers=1, partitions=6, compression="none"))
            produce(conn, int(args.tokens), args.doc_tokens)
            runs = ["single", "mixture"] + (["mixture (baseline)"] if args.baseline_src else [])
            best = dict.fromkeys(runs, 0.0)
            best_cpu = dict.fromkeys(runs, 0.0)
            starts: dict[str, list[float]] = {name: [] for name in runs}
            for _ in range(args.repeat):
                for name in runs:
                    kind = name.split()[0]
                    if args.baseline_src:
                        src = args.baseline_src if name.endswith("(baseline)") else None
                        rate, start, cpu_rate = read_apart(kind, cluster.bootstrap, int(args.read),
                                                           args.batch_size, src, args.prefetch_batches)
                    else:
                        data = dataset(kind, conn, args.prefetch_batches)
                        rate, start, cpu_rate = read(data, int(args.read), args.batch_size)
                    best[name] = max(best[name], rate)
                    best_cpu[name] = max(best_cpu[name], cpu_rate)
                    starts[name].append(round(start, 2))
                print({k: f"{v / 1e6:.1f}M tokens/s" for k, v in best.items()},
                      {k: f"{v / 1e6:.1f}M tokens/CPU-s" for k, v in best_cpu.items()},
                      f"load average {os.getloadavg()[0]:.1f}", flush=True)
            for name in runs[1:]:
                print(f"{name} / single topic: {best[name] / best['single']:.2f}x, "
                      f"per CPU second {best_cpu[name] / best_cpu['single']:.2f}x")
            print(f"(after the first batch; seconds to the first batch: {starts})")
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
