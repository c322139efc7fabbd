"""Loader throughput: kafeed vs the anchors, on one topic, in one run (a script, not a test).

Starts a LocalCluster on free ports in a temp dir, produces ``--tokens`` token ids as
TokenizedDocument records (plus a JSON copy of a slice for the tutorial loader), then
measures, each on the same data:

- bare:      a confluent-kafka consume(num_messages=...) loop that only touches each message
             (the Python ceiling);
- kafeed:    StreamLoader(KafkaTokenDataset) yielding (B, seq_len+1) int64 batches
             (num_workers=0, and --workers);
- tutorial:  kafka-python KafkaConsumer, one record per iteration, json.loads of
             {"tokens": [...]}, Python-list packing, one sample at a time (on the JSON slice);
- java:      Kafka's own ConsumerPerformance (MB/s);
- memmap:    a local np.memmap token file cut into the same batches;
- peak RSS of the kafeed loader over 1x and 10x the data (separate processes).

    PYTHONPATH=src python benchmarks/bench_loader.py --tokens 200_000_000
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from kafeed.broker import LocalCluster, free_port_block, resolve_libs
from kafeed.config import ConnectionSettings
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic

QUIET = logging.getLogger("kafeed.librdkafka")


def produce(bootstrap: str, topic: str, json_topic: str, tokens: int, doc_tokens: int, json_tokens: int,
            token_file: Path, eos: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    rng = np.random.default_rng(0)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                  "queue.buffering.max.kbytes": 1_048_576, "logger": QUIET})
    made = docs = json_docs = 0
    payload = 0
    pool = rng.integers(1, 50000, size=doc_tokens * 4, dtype=np.uint16)
    with token_file.open("wb") as out:
        while made < tokens:
            n = int(rng.integers(doc_tokens // 2, doc_tokens * 3 // 2))
            start = int(rng.integers(0, len(pool) - n))
            ids = pool[start : start + n]
            value = make_document(ids, id=f"d{docs}", vocab_size=50000).SerializeToString()
            while True:
                try:
                    p.produce(topic, key=f"d{docs}".encode(), value=value)
                    break
                except BufferError:
                    p.poll(0.1)
            if made < json_tokens:
                body = json.dumps({"tokens": ids.tolist()}).encode()
                while True:
                    try:
                        p.produce(json_topic, key=f"d{docs}".encode(), value=body)
                        break
                    except BufferError:
                        p.poll(0.1)
                json_docs += 1
            out.write(ids.tobytes())
            out.write(np.array([eos], dtype=np.uint16).tobytes())
            payload += len(value)
            made += n
            docs += 1
            if docs % 500 == 0:
                p.poll(0)
    p.flush(120)
    return {"tokens": made, "docs": docs, "bytes": payload, "json_docs": json_docs}


def bare_loop(bootstrap: str, topic: str, partitions: int, docs: int) -> tuple[float, int]:
    from confluent_kafka import Consumer, TopicPartition

    # The loader's own fetch settings, so the ceiling is fair (kafeed/loader/reader.py).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-bare", "enable.auto.commit": False,
                  "queued.max.messages.kbytes": 131072, "fetch.max.bytes": 32 * 1024 * 1024,
                  "max.partition.fetch.bytes": 8 * 1024 * 1024, "logger": QUIET})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = nbytes = 0
    t0 = time.perf_counter()
    while seen < docs:
        for m in c.consume(num_messages=2000, timeout=1.0):
            if m.error() is None:
                nbytes += len(m.value())
                seen += 1
    dt = time.perf_counter() - t0
    c.close()
    return dt, nbytes


def kafeed_loader(bootstrap: str, topic: str, seq_len: int, batch: int, workers: int) -> tuple[float, int]:
    import kafeed

    ds = kafeed.KafkaTokenDataset(topic, seq_len=seq_len, bootstrap=bootstrap, eos_id=0)
    loader = kafeed.StreamLoader(ds, batch_size=batch, num_workers=workers)
    t0 = time.perf_counter()
    tokens = 0
    for b in loader:
        tokens += b["tokens"].numel()
    return time.perf_counter() - t0, tokens


def tutorial_loader(bootstrap: str, topic: str, docs: int, seq_len: int, batch: int) -> tuple[float, int]:
    import torch
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, group_id=None, consumer_timeout_ms=10000)

    def samples() -> Any:
        buf: list[int] = []
        for n, record in enumerate(consumer):
            buf.extend(json.loads(record.value)["tokens"])
            buf.append(0)
            while len(buf) >= seq_len + 1:
                yield torch.tensor(buf[: seq_len + 1], dtype=torch.long)
                buf = buf[seq_len + 1 :]
            if n + 1 >= docs:
                return

    t0 = time.perf_counter()
    tokens = 0
    pending = []
    for s in samples():
        pending.append(s)
        if len(pending) == batch:
            tokens += torch.stack(pending).numel()
            pending = []
    dt = time.perf_counter() - t0
    consumer.close()
    return dt, tokens


def java_perf(bootstrap: str, topic: str, docs: int) -> dict[str, float]:
    libs = resolve_libs()
    out = subprocess.run(
        [libs.java, "-Xmx512m", "-cp", libs.classpath, "org.apache.kafka.tools.ConsumerPerformance",
         "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(docs), "--timeout", "60000"],
        capture_output=True, text=True, check=True, timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = [v.strip() for v in lines[-1].split(",")]
    row = dict(zip(header, values, strict=False))
    return {"MB.sec": float(row["MB.sec"]), "fetch.MB.sec": float(row["fetch.MB.sec"]),
            "MB": float(row["data.consumed.in.MB"])}


def memmap_loader(path: Path, seq_len: int, batch: int) -> tuple[float, int]:
    import torch

    mm = np.memmap(path, dtype=np.uint16, mode="r")
    step = batch * (seq_len + 1)
    t0 = time.perf_counter()
    tokens = 0
    for i in range(len(mm) // step):
        t = torch.from_numpy(mm[i * step : (i + 1) * step].astype(np.int64).reshape(batch, seq_len + 1))
        tokens += t.numel()
    return time.perf_counter() - t0, tokens


def rss_child(bootstrap: str, topic: str, seq_len: int, batch: int, fraction: float) -> None:
    """Read ``fraction`` of every partition with kafeed; print peak RSS (KiB) and tokens."""
    from confluent_kafka import Consumer, TopicPartition

    import kafeed

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-rss", "logger": QUIET})
    parts = c.list_topics(topic, timeout=10).topics[topic].partitions
    end = {p: int(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] * fraction) for p in parts}
    c.close()
    ds = kafeed.KafkaTokenDataset(topic, seq_len=seq_len, eos_id=0, bootstrap=bootstrap, end=end)
    tokens = sum(b["tokens"].numel() for b in kafeed.StreamLoader(ds, batch_size=batch))
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across fork+exec, so it would report the
    # (large) parent's peak; VmHWM belongs to this process's own address space.
    hwm = next(int(line.split()[1]) for line in Path("/proc/self/status").read_text().splitlines()
               if line.startswith("VmHWM:"))
    print(json.dumps({"maxrss_kib": hwm, "ru_maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                      "tokens": tokens}))


def rss(bootstrap: str, topic: str, seq_len: int, batch: int, fraction: float) -> dict[str, int]:
    out = subprocess.run([sys.executable, __file__, "--rss-child", bootstrap, topic, str(seq_len), str(batch),
                          str(fraction)], capture_output=True, text=True, check=True, env=dict(os.environ))
    result: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--rss-child":
        b, t, s, n, f = sys.argv[2:7]
        rss_child(b, t, int(s), int(n), float(f))
        return 0
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=float, default=50e6, help="token ids in the topic (default 50M)")
    ap.add_argument("--doc-tokens", type=int, default=1024, help="mean document length")
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2, help="DataLoader workers for the second kafeed run")
    ap.add_argument("--repeat", type=int, default=2, help="runs of bare and kafeed (best is kept)")
    ap.add_argument("--json-tokens", type=float, default=5e6, help="tokens in the JSON copy")
    args = ap.parse_args()
    results: dict[str, Any] = {"args": vars(args)}
    with tempfile.TemporaryDirectory(prefix="kafeed-bench-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=1024)
        cluster.start()
        try:
            bootstrap = cluster.bootstrap
            admin = TopicAdmin(ConnectionSettings(bootstrap=bootstrap))
            # Uncompressed: random token ids do not compress, and kafka-python lacks zstd here.
            for name in ("bench-tokens", "bench-json"):
                admin.create(plan_topic(name, brokers=1, partitions=args.partitions, compression="none"))
            t0 = time.perf_counter()
            data = produce(bootstrap, "bench-tokens", "bench-json", int(args.tokens), args.doc_tokens,
                           int(args.json_tokens), Path(tmp) / "tokens.bin", eos=0)
            data["produce_s"] = round(time.perf_counter() - t0, 1)
            results["data"] = data
            mb = data["bytes"] / 1e6
            print(f"topic: {data['tokens'] / 1e6:.1f}M tokens, {data['docs']} docs, {mb:.0f} MB", flush=True)

            bare_loop(bootstrap, "bench-tokens", args.partitions, data["docs"])  # warm the page cache
            import kafeed.loader.stream_loader  # noqa: F401 - import torch outside the timings
            # Best of --repeat, bare and kafeed interleaved: the machine may be shared. CPU
            # seconds (all threads of the process) show the work done, whatever the load.
            for _ in range(args.repeat):
                for name in ("bare", "kafeed_w0"):
                    c0 = time.process_time()
                    if name == "bare":
                        dt, _ = bare_loop(bootstrap, "bench-tokens", args.partitions, data["docs"])
                    else:
                        dt, _ = kafeed_loader(bootstrap, "bench-tokens", args.seq_len, args.batch, 0)
                    cpu = time.process_time() - c0
                    row = {"s": dt, "cpu_s": cpu, "MB_s": mb / dt, "Mtok_s": data["tokens"] / 1e6 / dt}
                    if name not in results or dt < results[name]["s"]:
                        results[name] = row
                    print(name, row, flush=True)
            if args.workers:
                dt, tokens = kafeed_loader(bootstrap, "bench-tokens", args.seq_len, args.batch, args.workers)
                results[f"kafeed_w{args.workers}"] = {"s": dt, "MB_s": mb / dt, "Mtok_s": tokens / 1e6 / dt}
                print(f"kafeed workers={args.workers}", results[f"kafeed_w{args.workers}"], flush=True)
            dt, tokens = tutorial_loader(bootstrap, "bench-json", data["json_docs"], args.seq_len, args.batch)
            results["tutorial"] = {"s": dt, "Mtok_s": tokens / 1e6 / dt}
            print("tutorial", results["tutorial"], flush=True)
            results["java"] = java_perf(bootstrap, "bench-tokens", data["docs"])
            print("java ConsumerPerformance", results["java"], flush=True)
            dt, tokens = memmap_loader(Path(tmp) / "tokens.bin", args.seq_len, args.batch)
            results["memmap"] = {"s": dt, "Mtok_s": tokens / 1e6 / dt}
            print("memmap", results["memmap"], flush=True)
            results["rss_1x"] = rss(bootstrap, "bench-tokens", args.seq_len, args.batch, 0.1)
            results["rss_5x"] = rss(bootstrap, "bench-tokens", args.seq_len, args.batch, 0.5)
            results["rss_10x"] = rss(bootstrap, "bench-tokens", args.seq_len, args.batch, 1.0)
            print("rss", results["rss_1x"], results["rss_5x"], results["rss_10x"], flush=True)
        finally:
            cluster.stop(timeout=30, purge=True)
    k = results["kafeed_w0"]
    summary = {
        "kafeed/bare (MB/s)": k["MB_s"] / results["bare"]["MB_s"],
        "kafeed/tutorial (tokens/s)": k["Mtok_s"] / results["tutorial"]["Mtok_s"],
        "kafeed/bare (CPU s)": k["cpu_s"] / results["bare"]["cpu_s"],
        "kafeed/java ConsumerPerformance (MB/s)": k["MB_s"] / results["java"]["MB.sec"],
        "kafeed/java ConsumerPerformance fetch-only (MB/s)": k["MB_s"] / results["java"]["fetch.MB.sec"],
        "kafeed/memmap (tokens/s)": k["Mtok_s"] / results["memmap"]["Mtok_s"],
        "peak RSS 1x, 5x, 10x (MiB)": [results[key]["maxrss_kib"] // 1024
                                       for key in ("rss_1x", "rss_5x", "rss_10x")],
    }
    results["summary"] = summary
    print(json.dumps(results, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
