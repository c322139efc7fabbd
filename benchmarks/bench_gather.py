"""The cost of gathering every rank's loader state at a checkpoint: world size N against 1.

Every path that checkpoints a job of several ranks saves what ``kafeed.gather_states`` returns
(an ``all_gather_object`` of the ranks' states) and rank 0 writes the document. This measures
that step as a training job pays it: per checkpoint, the time until every rank has its part
done (the gather, and on rank 0 the JSON document written to disk, as ``KafeedTrainer``
writes ``kafeed_loader.json``), the slowest rank's time. World size 1 is the same loader
state step with no process group: the state wrapped alone and written.

The states are real: one loader per rank over a topic of ``--partitions`` partitions, each
with a shuffle buffer of ``--shuffle-buffer`` records, read until the buffers are full and
``--batches`` batches are out, so each state holds its buffer, its delivered offsets beyond
``next`` and its packer carry. The ranks are gloo processes on this machine (forked, as
torchrun's workers would be separate processes).

    PYTHONPATH=src python benchmarks/bench_gather.py --world 4 --checkpoints 50

With ``--bootstrap`` it uses a running broker instead of starting a LocalCluster.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Producer

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.loader.state.checkpoint import buffered
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    rng = np.random.default_rng(0)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(partitions * per_partition):
        doc = make_document(rng.integers(1, 50_000, size=int(rng.integers(20, 400))), id=f"doc-{i}",
                            vocab_size=65536, tokenizer="bench")
        producer.produce(topic, key=doc.id.encode(), value=doc.SerializeToString(), partition=i % partitions)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def loader_states(bootstrap: str, topic: str, world: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """Each rank's ``StreamLoader.state_dict()`` after ``args.batches`` batches."""
    import kafeed

    states = []
    for rank in range(world):
        dataset = kafeed.KafkaTokenDataset(topic, seq_len=args.seq_len, eos_id=0,
                                           connection=ConnectionSettings(bootstrap=bootstrap),
                                           shuffle_buffer=args.shuffle_buffer, seed=rank,
                                           rank=rank, world_size=world)
        loader = kafeed.StreamLoader(dataset, batch_size=args.batch_size)
        batches = iter(loader)
        for _ in range(args.batches):
            next(batches)
        states.append(loader.state_dict())
        loader.close()
    return states


def _rank(rank: int, world: int, port: int, state: dict[str, Any], checkpoints: int, out: str,
          results: Any) -> None:
    """One rank: ``checkpoints`` checkpoint steps, each rank's time of each sent back."""
    import torch
    import torch.distributed as dist

    import kafeed

    torch.set_num_threads(1)
    if world > 1:
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=world)
    path = Path(out) / "kafeed_loader.json"
    times = []
    for i in range(checkpoints + 2):  # the first two warm the process group's buffers up
        if world > 1:
            dist.barrier()
        t0 = time.perf_counter()
        doc = kafeed.gather_states(state)
        if rank == 0:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"step": i, "loader": doc}))
            tmp.replace(path)
        if i >= 2:
            times.append(time.perf_counter() - t0)
    results.put((rank, times, path.stat().st_size if rank == 0 else 0))
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def measure(states: list[dict[str, Any]], checkpoints: int, out: Path) -> dict[str, Any]:
    """Per checkpoint, the slowest rank's time (ms): its median and p90, and the document's size."""
    world = len(states)
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    port = free_port_block(1)
    procs = [ctx.Process(target=_rank, args=(r, world, port, states[r], checkpoints, str(out), results))
             for r in range(world)]
    for proc in procs:
        proc.start()
    got: dict[int, list[float]] = {}
    sizes = 0
    for _ in range(world):
        rank, times, size = results.get(timeout=600)
        got[rank] = times
        sizes = max(sizes, size)
    for proc in procs:
        proc.join(60)
        if proc.exitcode != 0:
            raise RuntimeError(f"rank process exited with {proc.exitcode}")
    slowest = np.max(np.array([got[r] for r in range(world)]), axis=0) * 1000
    return {"world": world, "median_ms": round(float(np.median(slowest)), 3),
            "p90_ms": round(float(np.percentile(slowest, 90)), 3), "document_bytes": sizes,
            "buffer_entries": sum(len(buffered(r)) for s in states for r in s["readers"].values())}


def run(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    topic = f"bench-gather-{os.getpid()}"
    TopicAdmin(ConnectionSettings(bootstrap=bootstrap)).create(
        plan_topic(topic, brokers=1, partitions=args.partitions))
    produce(bootstrap, topic, args.partitions, args.per_partition)
    rows = []
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-gather-") as tmp:
        for world in (1, args.world):
            out = Path(tmp) / f"w{world}"
            out.mkdir()
            rows.append(measure(loader_states(bootstrap, topic, world, args), args.checkpoints, out))
    one, many = rows
    return {"rows": rows, "extra_ms": round(many["median_ms"] - one["median_ms"], 3),
            "ratio": round(many["median_ms"] / one["median_ms"], 2) if one["median_ms"] else None,
            "settings": {k: getattr(args, k) for k in ("partitions", "per_partition", "shuffle_buffer",
                                                       "batches", "batch_size", "seq_len", "checkpoints")}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--world", type=int, default=4, help="ranks to compare against one (default 4)")
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--per-partition", type=int, default=400, help="documents per partition")
    ap.add_argument("--shuffle-buffer", type=int, default=1024, help="records per reader's buffer")
    ap.add_argument("--batches", type=int, default=20, help="batches each rank reads before its state")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--checkpoints", type=int, default=50, help="checkpoint steps timed per world size")
    ap.add_argument("--bootstrap", help="a running broker (default: start a LocalCluster)")
    ap.add_argument("--json", action="store_true", help="print the result as one JSON document")
    args = ap.parse_args(argv)
    if args.bootstrap:
        result = run(args.bootstrap, args)
    else:
        with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
            cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2))
            cluster.start()
            try:
                result = run(cluster.bootstrap, args)
            finally:
                cluster.stop(purge=True)
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'world':>5} {'median ms':>10} {'p90 ms':>8} {'document':>10} {'buffer entries':>15}")
    for row in result["rows"]:
        print(f"{row['world']:>5} {row['median_ms']:>10.2f} {row['p90_ms']:>8.2f} "
              f"{row['document_bytes']:>10} {row['buffer_entries']:>15}")
    print(f"extra per checkpoint at world {args.world}: {result['extra_ms']:.2f} ms ({result['ratio']}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
