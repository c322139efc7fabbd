"""Mirror throughput and latency: site clusters -> training cluster with `kafeed mirror` (MirrorMaker 2).

Not a test. Starts three single-node LocalClusters (site-a, site-b, train) on free ports
in a temp dir, then, side by side in one run:

1. **Direct baseline**: Kafka's own ``ProducerPerformance`` (``kafka-producer-perf-test``)
   writes N records of S bytes straight into the training cluster (acks=all).
2. **Mirror, 1 site and 2 sites**: the same N records (per site) are first written at the
   site(s) with ``ProducerPerformance``; then ``run_mirror(until_caught_up=True)`` copies
   them, exactly once. Throughput counts from the first mirrored record visible
   read_committed in the target to the last (the node's JVM start and Connect join are
   reported apart, as "start").
3. **Latency**: with the mirror running, a producer at site-a writes ``--rate`` records/s
   for ``--seconds``, each carrying its send time; a read_committed consumer of the
   training cluster takes receive - send per record (p50, p99). The same producer and
   consumer straight on the training cluster give the direct latency.

Ratios (mirror / direct) are printed in one table at the end. The latency on through
``kafeed prepare`` to the trainer's batch is ``bench_mirror_latency.py``'s.

    PYTHONPATH=src python benchmarks/bench_mirror.py [--records 200000] [--size 512] [--seconds 20]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from confluent_kafka import Consumer, Producer

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.jars import resolve_libs
from kafeed.mirror import ClusterSettings, MirrorSettings, SiteSettings, run_mirror
from kafeed.mirror.progress import end_offsets
from kafeed.topics import TopicAdmin, plan_topic

SITES = ("site-a", "site-b")


def producer_performance(bootstrap: str, topic: str, n: int, size: int) -> tuple[float, float]:
    """records/s and MB/s of Kafka's own ProducerPerformance (acks=all)."""
    libs = resolve_libs(fetch=False)
    cmd = [libs.java, "-Xmx512m", "-cp", libs.classpath, "org.apache.kafka.tools.ProducerPerformance",
           "--topic", topic, "--num-records", str(n), "--record-size", str(size), "--throughput", "-1",
           "--producer-props", f"bootstrap.servers={bootstrap}", "acks=all", "linger.ms=5",
           "batch.size=262144"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900)
    last = [ln for ln in proc.stdout.splitlines() if "records sent" in ln][-1]
    m = re.search(r"records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", last)
    if m is None:
        raise RuntimeError(f"unexpected ProducerPerformance output: {last}")
    return float(m.group(1)), float(m.group(2))


@contextmanager
def running_clusters(work: Path, names: Sequence[str]) -> Iterator[dict[str, LocalCluster]]:
    """1-node clusters named ``names`` (1 GiB heaps) under ``work``, started side by side, stopped and
    purged at exit. Their ports are one free block, two each (broker, controller), so no two of
    them can pick the same ones."""
    base = free_port_block(2 * len(names))
    clusters = {name: LocalCluster(work / name, nodes=1, port=base + 2 * i, heap_mb=1024)
                for i, name in enumerate(names)}
    try:
        with ThreadPoolExecutor(len(clusters)) as pool:
            for started in [pool.submit(c.start) for c in clusters.values()]:
                started.result()
        yield clusters
    finally:
        for cluster in clusters.values():
            cluster.stop(timeout=15, purge=True)


def mirror_settings(clusters: dict[str, LocalCluster], sites: tuple[str, ...], topic: str,
                    work: Path) -> MirrorSettings:
    return MirrorSettings(
        target=ClusterSettings(alias="train", bootstrap=clusters["train"].bootstrap),
        sites=tuple(SiteSettings(alias=s, bootstrap=clusters[s].bootstrap, topics=topic) for s in sites),
        work_dir=work, rebalance_delay_s=0, heap_mb=1024)


def timed_mirror(settings: MirrorSettings, target: ConnectionSettings, topics: list[str], total: int
                 ) -> tuple[float, float]:
    """(seconds from start to the first mirrored record, seconds from it to the last)."""
    t0 = time.monotonic()
    first: list[float] = []
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.1):
            if not first and sum(end_offsets(target, topics).values()) > 0:
                first.append(time.monotonic())

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    result = run_mirror(settings, until_caught_up=True)
    t_end = time.monotonic()
    done.set()
    watcher.join()
    assert result.caught_up and result.records >= total, result
    start = (first[0] if first else t_end) - t0
    return start, t_end - (first[0] if first else t0)


def latencies(produce_to: ConnectionSettings, topic: str, read_from: ConnectionSettings, read_topic: str,
              rate: int, seconds: float, size: int) -> np.ndarray:
    """Milliseconds from each record's send to its read_committed receipt at ``read_from``."""
    consumer = Consumer(read_from.client_config() | {
        "group.id": f"bench-{uuid.uuid4().hex[:8]}", "isolation.level": "read_committed",
        "auto.offset.reset": "latest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.subscribe([read_topic])
    got: list[float] = []
    expected = int(rate * seconds)
    deadline_box: list[float] = []
    assigned = threading.Event()

    def read() -> None:
        while not deadline_box or time.monotonic() < deadline_box[0]:
            # poll, not consume(500, timeout=0.1): consume returns once it has 500 records or
            # the timeout has passed, which added up to 100 ms to every record's latency.
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                got.append(time.time() * 1000 - float(msg.value()[:20].decode()))
            if consumer.assignment():
                assigned.set()
            if len(got) >= expected:
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assigned.wait(60)
    time.sleep(1.0)  # the consumer's position at "latest" is taken once assigned
    producer = Producer(produce_to.client_config() | {"linger.ms": 1, "enable.idempotence": True})
    pad = b"x" * max(0, size - 20)
    t0 = time.monotonic()
    for i in range(expected):
        wait = t0 + i / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        producer.produce(topic, value=f"{time.time() * 1000:<20.3f}".encode() + pad)
        producer.poll(0)
    producer.flush(30)
    deadline_box.append(time.monotonic() + 60)
    reader.join()
    consumer.close()
    return np.array(got)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="Records per site (and for the baseline).")
    ap.add_argument("--size", type=int, default=512, help="Bytes per record.")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--rate", type=int, default=500, help="Records/s for the latency runs.")
    ap.add_argument("--seconds", type=float, default=20.0, help="Length of each latency run.")
    args = ap.parse_args(argv)
    n, size = args.records, args.size

    with (tempfile.TemporaryDirectory(prefix="kafeed-bench-mirror-") as tmp,
          running_clusters(Path(tmp), (*SITES, "train")) as clusters):
        work = Path(tmp)
        conn: Callable[[str], ConnectionSettings] = lambda name: ConnectionSettings(  # noqa: E731
            bootstrap=clusters[name].bootstrap)
        train = conn("train")
        for name in (*SITES, "train"):
            admin = TopicAdmin(conn(name))
            for topic in ("one", "two", "lat"):
                admin.create(plan_topic(topic, brokers=1, partitions=args.partitions))
        rows: list[tuple[str, str, str, str]] = []

        d_rps, d_mbps = producer_performance(clusters["train"].bootstrap, "one", n, size)
        print(f"direct ProducerPerformance into train: {d_rps:,.0f} rec/s, {d_mbps:.1f} MB/s")
        direct_rate = f"{d_rps:,.0f} rec/s, {d_mbps:.1f} MB/s"

        for label, sites, topic in (("1 site", SITES[:1], "one"), ("2 sites", SITES, "two")):
            for site in sites:
                producer_performance(clusters[site].bootstrap, topic, n, size)
            total = n * len(sites)
            start, secs = timed_mirror(mirror_settings(clusters, sites, topic, work / f"mm-{label[0]}"),
                                       train, [f"{s}.{topic}" for s in sites], total)
            rps, mbps = total / secs, total * size / secs / 1e6
            print(f"mirror {label}: {total:,} records in {secs:.1f} s after a {start:.1f} s start: "
                  f"{rps:,.0f} rec/s, {mbps:.1f} MB/s")
            rows.append((f"throughput, {label} (node start {start:.0f} s apart)",
                         f"{rps:,.0f} rec/s, {mbps:.1f} MB/s", direct_rate, f"{rps / d_rps:.2f}"))

        direct = latencies(train, "lat", train, "lat", args.rate, args.seconds, size)
        stop = threading.Event()
        node = threading.Thread(target=run_mirror, daemon=True, kwargs={
            "settings": mirror_settings(clusters, SITES[:1], "lat", work / "mm-lat"), "stop_event": stop})
        node.start()
        deadline = time.monotonic() + 180
        while "site-a.lat" not in TopicAdmin(train).list() and time.monotonic() < deadline:
            time.sleep(0.5)
        time.sleep(5.0)  # the flow's tasks start after the topic is created
        mirrored = latencies(conn("site-a"), "lat", train, "site-a.lat", args.rate, args.seconds, size)
        stop.set()
        node.join(60)
        for what, d, m in (("p50", 50, 50), ("p99", 99, 99)):
            dv, mv = np.percentile(direct, d), np.percentile(mirrored, m)
            rows.append((f"latency {what}: produce -> read_committed in train", f"{mv:,.1f} ms",
                         f"{dv:,.1f} ms", f"{mv / dv:.1f}"))
        print(f"latency: {len(mirrored):,} mirrored and {len(direct):,} direct records at {args.rate}/s")

        print(f"\n{n:,} records of {size} B per site, {args.partitions} partitions, 1-node clusters")
        print(f"{'what':<48} {'mirror':>22} {'direct':>22} {'ratio':>6}")
        for row in rows:
            print(f"{row[0]:<48} {row[1]:>22} {row[2]:>22} {row[3]:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
