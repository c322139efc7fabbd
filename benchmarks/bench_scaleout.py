"""Loader scale-out: aggregate tokens/s of 1..N reader processes on a three-broker cluster
(a script, not a test).

Starts a three-node LocalCluster (replication 3) on free ports in a temp dir, produces
``--tokens`` token ids as TokenizedDocument records into one topic of ``--partitions``
partitions, then for each reader count N in ``--readers`` runs N processes side by side, each
one rank of N reading its share of the partitions to the end, twice:

- bare:   a confluent-kafka consume(num_messages=...) loop over the rank's partitions that
          only touches each message (the Python ceiling for that many processes);
- kafeed: StreamLoader(KafkaTokenDataset(rank=r, world_size=N)) yielding (B, seq_len+1)
          int64 batches, num_workers=0.

Every process imports, connects and reports ready before a common start, so start-up is not
timed; the aggregate rate is all tokens over the time from the start to the last reader's end.

    PYTHONPATH=src python benchmarks/bench_scaleout.py --tokens 40e6 --readers 1,2,4,8
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic

QUIET = logging.getLogger("kafeed.librdkafka")
TOPIC = "scaleout-tokens"


def produce(bootstrap: str, tokens: int, doc_tokens: int, topic: str = TOPIC) -> dict[str, int]:
    from confluent_kafka import Producer

    rng = np.random.default_rng(0)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000, "acks": "all",
                  "queue.buffering.max.kbytes": 1_048_576, "logger": QUIET})
    pool = rng.integers(1, 50000, size=doc_tokens * 4, dtype=np.uint16)
    made = docs = payload = 0
    while made < tokens:
        n = int(rng.integers(doc_tokens // 2, doc_tokens * 3 // 2))
        start = int(rng.integers(0, len(pool) - n))
        value = make_document(pool[start : start + n], id=f"d{docs}", vocab_size=50000).SerializeToString()
        while True:
            try:
                p.produce(topic, key=f"d{docs}".encode(), value=value)
                break
            except BufferError:
                p.poll(0.1)
        made += n
        docs += 1
        payload += len(value)
        if docs % 500 == 0:
            p.poll(0)
    p.flush(300)
    return {"tokens": made, "docs": docs, "bytes": payload}


def reader(mode: str, bootstrap: str, rank: int, world: int, seq_len: int, batch: int,
           topic: str = TOPIC) -> None:
    """One reader process: get ready, print ``ready``, wait for a line on stdin, read its share
    to the end, print what it read and when it started and ended (wall clock, shared)."""
    tokens = nbytes = 0
    first: float | None = None
    if mode == "bare":
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"scaleout-bare-{rank}",
                      "enable.auto.commit": False, "queued.max.messages.kbytes": 131072,
                      "fetch.max.bytes": 32 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024,
                      "logger": QUIET})
        parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
        mine = [p for p in parts if p % world == rank]
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in mine}
        print("ready", flush=True)
        sys.stdin.readline()
        t0, c0 = time.time(), time.process_time()
        c.assign([TopicPartition(topic, p, 0) for p in mine])
        left = {p for p in mine if ends[p] > 0}
        while left:
            # A short timeout: consume() waits for all num_messages until it expires, which
            # would add up to the timeout to the last call of every reader.
            for m in c.consume(num_messages=2000, timeout=0.05):
                if m.error() is None:
                    first = first or time.time()
                    nbytes += len(m.value())
                    tokens += 1
                    if m.offset() + 1 >= ends[m.partition()]:
                        left.discard(m.partition())
        c.close()
    else:
        import kafeed

        ds = kafeed.KafkaTokenDataset(topic, seq_len=seq_len, bootstrap=bootstrap, eos_id=0, rank=rank,
                                      world_size=world)
        loader = kafeed.StreamLoader(ds, batch_size=batch, num_workers=0)
        print("ready", flush=True)
        sys.stdin.readline()
        t0, c0 = time.time(), time.process_time()
        for b in loader:
            first = first or time.time()
            tokens += b["tokens"].numel()
    print(json.dumps({"t0": t0, "t1": time.time(), "first": first or time.time(), "items": tokens,
                      "bytes": nbytes, "cpu_s": time.process_time() - c0}), flush=True)


def side_by_side(mode: str, bootstrap: str, world: int, seq_len: int, batch: int,
                 src: str | None = None, topic: str = TOPIC) -> dict[str, Any]:
    """``world`` readers started together; ``src``: another kafeed source tree to read with."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(([src] if src else []) + sys.path)}
    procs = [subprocess.Popen([sys.executable, __file__, "--reader", mode, bootstrap, str(rank), str(world),
                               str(seq_len), str(batch), topic], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env) for rank in range(world)]
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"a {mode} reader did not get ready: {line!r}")
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    rows = []
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"a {mode} reader failed ({p.returncode})")
        rows.append(json.loads(out.strip().splitlines()[-1]))
    wall = max(r["t1"] for r in rows) - min(r["t0"] for r in rows)
    return {"wall_s": round(wall, 2), "items": sum(r["items"] for r in rows),
            "cpu_s": round(sum(r["cpu_s"] for r in rows), 1),
            "slowest_reader_s": round(max(r["t1"] - r["t0"] for r in rows), 2),
            "slowest_first_item_s": round(max(r["first"] - r["t0"] for r in rows), 2)}


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--reader":
        mode, bootstrap, rank, world, seq_len, batch, topic = sys.argv[2:9]
        reader(mode, bootstrap, int(rank), int(world), int(seq_len), int(batch), topic)
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=float, default=40e6, help="token ids in the topic (default 40M)")
    ap.add_argument("--doc-tokens", type=int, default=1024, help="mean document length")
    ap.add_argument("--partitions", type=int, default=24, help="partitions, a multiple of every reader count")
    ap.add_argument("--readers", default="1,2,4,8", help="reader process counts, comma-separated")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--baseline-src", default=None,
                    help="also read with the kafeed of this source tree (another commit's src/)")
    args = ap.parse_args()
    counts = [int(n) for n in args.readers.split(",")]
    results: dict[str, Any] = {"args": vars(args), "cpus": os.cpu_count(), "rows": []}
    with tempfile.TemporaryDirectory(prefix="kafeed-scaleout-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=3, port=free_port_block(6), heap_mb=768)
        cluster.start()
        try:
            bootstrap = cluster.bootstrap
            TopicAdmin(ConnectionSettings(bootstrap=bootstrap)).create(
                plan_topic(TOPIC, brokers=3, partitions=args.partitions, replication=3, compression="none"))
            t0 = time.perf_counter()
            data = produce(bootstrap, int(args.tokens), args.doc_tokens)
            data["produce_s"] = round(time.perf_counter() - t0, 1)
            results["data"] = data
            mb = data["bytes"] / 1e6
            print(f"topic: {data['tokens'] / 1e6:.1f}M tokens, {data['docs']} docs, {mb:.0f} MB, "
                  f"{args.partitions} partitions on 3 brokers (RF 3)", flush=True)
            side_by_side("bare", bootstrap, 1, args.seq_len, args.batch)  # warm the page cache
            print("| readers | bare MB/s | kafeed MB/s | kafeed M tokens/s | kafeed / bare | "
                  "kafeed CPU s | kafeed first batch s | load avg |", flush=True)
            print("|---|---|---|---|---|---|---|---|", flush=True)
            for n in counts:
                bare = side_by_side("bare", bootstrap, n, args.seq_len, args.batch)
                ours = side_by_side("kafeed", bootstrap, n, args.seq_len, args.batch)
                if args.baseline_src:
                    other = side_by_side("kafeed", bootstrap, n, args.seq_len, args.batch, args.baseline_src)
                    results.setdefault("baseline", []).append({"readers": n, **other})
                    print(f"| {n} | (baseline) | {mb / other['wall_s']:.1f} | "
                          f"{other['items'] / 1e6 / other['wall_s']:.1f} | "
                          f"{bare['wall_s'] / other['wall_s']:.2f}x | {other['cpu_s']} | "
                          f"{other['slowest_first_item_s']} | |", flush=True)
                row = {"readers": n, "bare": bare, "kafeed": ours,
                       "bare_MB_s": round(mb / bare["wall_s"], 1),
                       "kafeed_MB_s": round(mb / ours["wall_s"], 1),
                       "kafeed_Mtok_s": round(ours["items"] / 1e6 / ours["wall_s"], 1),
                       "ratio": round(bare["wall_s"] / ours["wall_s"], 2),
                       "load": round(os.getloadavg()[0], 1)}
                results["rows"].append(row)
                print(f"| {n} | {row['bare_MB_s']} | {row['kafeed_MB_s']} | {row['kafeed_Mtok_s']} | "
                      f"{row['ratio']}x | {ours['cpu_s']} | {ours['slowest_first_item_s']} | {row['load']} |",
                      flush=True)
        finally:
            cluster.stop(timeout=30, purge=True)
    print(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
