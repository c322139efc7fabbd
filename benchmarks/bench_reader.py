"""The reader's hot path alone, before and after: CPU per record and per token, low noise.

bench_loader.py reads a real topic through librdkafka, a prefetch thread and StreamLoader, and
its rows move by about 10 % between runs on a shared machine. This reads the same way minus
all of that, so a change to the reader, its sources or the token stream shows: a
``TokenStream`` over the one reader, with no prefetch thread, in a process of its own, over

- ``kafka``: FakeKafka (kafeed.kafka.FakeKafka, in memory) holding ``--records`` records of
  ``--doc-tokens`` tokens per partition (4 partitions): the reader's per-record work, and the
  fake's consume() in place of librdkafka's;
- ``files``: four Arrow IPC files of the same documents (kafeed.loader.sources.file_source).

Each process reads ``--reads`` times and keeps the best (process CPU time); ``--processes``
processes per version alternate with those of ``--baseline-src`` (another commit's ``src/``).

    mkdir -p /tmp/base && git archive <rev> src | tar -x -C /tmp/base
    PYTHONPATH=src python benchmarks/bench_reader.py --baseline-src /tmp/base/src
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_loader import read_apart

PARTITIONS = 4


def _documents(records: int, doc_tokens: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [rng.integers(1, 50_000, doc_tokens, dtype=np.uint32) for _ in range(records)]


def _stream(settings: Any, reader: Any) -> Any:
    from kafeed.loader.nodes.stream import TokenStream

    stream = TokenStream(settings, reader)
    stream.open()
    return stream


def _kafka_reader(settings: Any, fake: Any) -> Any:
    try:  # this tree's name for it, then older ones'
        from kafeed.loader.nodes.readers import kafka_reader

        return kafka_reader(settings, index=0, count=1, clients=fake)
    except ImportError:
        from kafeed.loader.nodes.reader import KafkaReader  # type: ignore[attr-defined]

        return KafkaReader(settings, index=0, count=1, clients=fake)


def _file_reader(settings: Any) -> Any:
    try:
        from kafeed.loader.nodes.readers import file_reader

        return file_reader(settings, index=0, count=1)
    except ImportError:
        from kafeed.loader.file_reader import PositionReader  # type: ignore[import-not-found]

        from kafeed.loader.sources.file_source import FileSource

        return PositionReader(settings, FileSource(settings), index=0, count=1)


def child(kind: str, args: dict[str, Any]) -> dict[str, float]:
    """``args["reads"]`` reads in this process: the best CPU time per record and per token."""
    from kafeed.loader.settings import LoaderSettings
    from kafeed.schema import make_document

    docs = _documents(args["records"], args["doc_tokens"])
    if kind == "kafka":
        from kafeed.kafka import FakeKafka

        fake = FakeKafka()
        fake.create_topic("t", PARTITIONS)
        producer = fake.producer()
        values = [make_document(d, id=str(i), vocab_size=65_536 * 2).SerializeToString()
                  for i, d in enumerate(docs)]
        for p in range(PARTITIONS):
            for value in values:
                producer.produce("t", value, None, partition=p)
        settings = LoaderSettings(topics=("t",), seq_len=2048, eos_id=0, end="latest")

        def make() -> Any:
            return _kafka_reader(settings, fake)
    else:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        root = Path(args["dir"])
        table = pa.table({"input_ids": pa.array(docs, type=pa.list_(pa.uint32()))})
        for p in range(PARTITIONS):
            with ipc.new_file(root / f"{p}.arrow", table.schema) as writer:
                for batch in table.to_batches(max_chunksize=1000):
                    writer.write_batch(batch)
        settings = LoaderSettings(topics=("f",), seq_len=2048, eos_id=0, end="latest",
                                  files=(str(root),))

        def make() -> Any:
            return _file_reader(settings)
    best = float("inf")
    tokens = records = 0
    for _ in range(args["reads"]):
        stream = _stream(settings, make())
        gc.collect()
        start = time.process_time()
        tokens = 0
        while (batch := stream.next(8)) is not None:
            tokens += batch["tokens"].size
        best = min(best, time.process_time() - start)
        records = stream.stats()["records"]
        stream.close()
    return {"ns_record": best / records * 1e9, "ns_token": best / tokens * 1e9}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--records", type=int, default=6000, help="documents per partition or file")
    ap.add_argument("--doc-tokens", type=int, default=1024)
    ap.add_argument("--reads", type=int, default=5, help="reads per process (the best is kept)")
    ap.add_argument("--processes", type=int, default=3, help="processes per version and source")
    ap.add_argument("--baseline-src", default=None, help="another commit's src/, read alike")
    ap.add_argument("--json", default=None, help="also write the results to this file")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], json.loads(args.child[1]))), flush=True)
        return
    versions = {"this": None, **({"baseline": args.baseline_src} if args.baseline_src else {})}
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        params = {"records": args.records, "doc_tokens": args.doc_tokens, "reads": args.reads, "dir": tmp}
        for attempt in range(args.processes):
            for kind in ("kafka", "files"):
                for name, src in versions.items():
                    got = read_apart(kind, params, src, script=__file__)
                    row = results.setdefault(f"{kind} {name}", {"ns_record": [], "ns_token": []})
                    for key in row:
                        row[key].append(got[key])
                    print(f"process {attempt + 1} {kind} {name}: {got['ns_record']:.0f} ns/record, "
                          f"{got['ns_token']:.3f} ns/token", flush=True)
    print(f"{'read':<16}{'ns/record (best, median)':>28}{'ns/token (best)':>18}")
    for name, row in results.items():
        print(f"{name:<16}{min(row['ns_record']):>16.0f}{statistics.median(row['ns_record']):>12.0f}"
              f"{min(row['ns_token']):>18.3f}")
    if args.baseline_src:
        for kind in ("kafka", "files"):
            this, base = results[f"{kind} this"], results[f"{kind} baseline"]
            best = min(this["ns_token"]) / min(base["ns_token"])
            median = statistics.median(this["ns_token"]) / statistics.median(base["ns_token"])
            print(f"{kind} this/baseline, CPU per token: {best:.2f}x (best), {median:.2f}x (median)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
