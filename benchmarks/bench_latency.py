"""Freshness: record timestamp -> batch handed to the step, with a producer at a fixed rate.

Starts a LocalCluster on free ports in a temp dir. First measures what the loader sustains
(records/s, reading a bounded backlog of the same documents), then for each rate and each
loader setting runs a producer process writing at that rate (``linger.ms=1``) to a fresh
topic while an unbounded StreamLoader reads it, and reports p50 / p99 / p99.9 of the time
from each record's Kafka timestamp (CreateTime, set by the producer, ms resolution) to the
moment the batch holding its last token is handed to the caller, plus the mean batch fill
and, to tell where a tail comes from, p99 of CreateTime -> the producer's delivery report
(before the loader: producer, broker, scheduling) and p99 of that report -> hand-out, per
record (the broker's fetch path and the loader).
The step itself takes no time here: what is measured is the loader's hand-off.

    PYTHONPATH=src python benchmarks/bench_latency.py [--seconds 15] [--full-only] [--workers N]
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.schema import make_document
from kafeed.topics import TopicAdmin, plan_topic

DOC_TOKENS = 127  # + end-of-document = 128 = one window of seq_len 127
SEQ_LEN = 127
BATCH = 8
WARMUP_S = 1.0


def _values(count: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    return [make_document(rng.integers(1, 50000, DOC_TOKENS, dtype=np.uint16), id=f"d{i}",
                          vocab_size=50000).SerializeToString() for i in range(count)]


def produce_at(bootstrap: str, topic: str, rate: float, seconds: float, acks: Any = None) -> None:
    """Write ``rate`` records/s for ``seconds`` (a separate process: no GIL shared with the loader).
    ``acks`` (a shared array of doubles, see :func:`_acked`) receives each record's CreateTime and
    the time its delivery report came, in ms: the part of the latency before the loader."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "acks": 1,
                  "logger": logging.getLogger("quiet")})
    values = _values(256)
    report = None if acks is None else _reporter(acks)
    start = time.monotonic()
    sent = 0
    while True:
        now = time.monotonic()
        if now - start >= seconds:
            break
        due = int((now - start) * rate) + 1
        while sent < due:
            try:
                p.produce(topic, value=values[sent % len(values)], on_delivery=report)
            except BufferError:
                p.poll(0.001)
                continue
            sent += 1
        p.poll(0)
        wait = start + sent / rate - time.monotonic()
        if wait >= 0.001:  # until the next record is due, not in 1 ms slices (delivery reports wake it)
            p.poll(wait)
        elif wait > 0:
            time.sleep(wait)
    p.flush(30)


def sustained(conn: ConnectionSettings, topic: str, records: int) -> float:
    """Records/s the loader reads from a backlog of ``records`` documents (num_workers=0)."""
    from confluent_kafka import Producer

    import kafeed

    p = Producer({"bootstrap.servers": conn.bootstrap, "linger.ms": 20, "logger": logging.getLogger("quiet")})
    values = _values(256)
    for i in range(records):
        while True:
            try:
                p.produce(topic, value=values[i % len(values)])
                break
            except BufferError:
                p.poll(0.05)
    p.flush(60)
    ds = kafeed.KafkaTokenDataset(topic, seq_len=SEQ_LEN, eos_id=0, connection=conn)
    loader = kafeed.StreamLoader(ds, batch_size=BATCH)
    t0 = time.perf_counter()
    for _ in loader:
        pass
    return records / (time.perf_counter() - t0)


def _reporter(acks: Any) -> Callable[[Any, Any], None]:
    """A delivery callback writing (CreateTime, now) in ms to ``acks``: slot 0 counts the
    records, the rest is a ring of pairs."""
    ring = (len(acks) - 1) // 2

    def report(err: Any, msg: Any) -> None:
        n = int(acks[0])
        acks[1 + 2 * (n % ring)] = msg.timestamp()[1]
        acks[2 + 2 * (n % ring)] = time.time() * 1000
        acks[0] = n + 1

    return report


def _acked(acks: Any, after_ms: float, until_ms: float) -> np.ndarray:
    """(CreateTime, delivery report) in ms of the records created between the two times,
    sorted by CreateTime."""
    pairs = np.frombuffer(acks, dtype=np.float64)[1 : 1 + 2 * min(int(acks[0]), (len(acks) - 1) // 2)]
    pairs = pairs.reshape(-1, 2)
    pairs = pairs[(pairs[:, 0] >= after_ms) & (pairs[:, 0] <= until_ms)]
    return pairs[np.argsort(pairs[:, 0], kind="stable")]


def _after_ack(acked: np.ndarray, stamps: np.ndarray, handed: np.ndarray) -> np.ndarray:
    """Per record handed out: ms from its producer's delivery report to the hand-out (records
    are matched by CreateTime, ms resolution: at high rates one of the same millisecond)."""
    if not acked.size or not stamps.size:
        return np.zeros(0)
    at = np.searchsorted(acked[:, 0], stamps).clip(max=len(acked) - 1)
    found = acked[at, 0] == stamps
    return handed[found] - acked[at[found], 1]


class _Recorder:
    """Stands in for the loader's metrics: keeps each record's timestamp and hand-off time."""

    def __init__(self) -> None:
        self.lat_ms: list[np.ndarray] = []
        self.stamps: list[np.ndarray] = []
        self.rows: list[int] = []
        self.after_ms = 0.0

    def positions(self, delivered: Any) -> None:
        pass

    def batch(self, delivered: Any, tokens: int) -> None:
        now = time.time() * 1000
        stamps = delivered.timestamps
        stamps = stamps[stamps >= self.after_ms]
        if stamps.size:
            self.lat_ms.append(now - stamps)
            self.stamps.append(stamps)
            self.rows.append(tokens // (SEQ_LEN + 1))

    def fold(self) -> None:
        """The loader folds its metrics when an iteration ends; each batch is kept as it comes."""


def run(conn: ConnectionSettings, topic: str, rate: float, seconds: float, max_wait: float | None,
        workers: int) -> dict[str, float]:
    import kafeed

    fresh = {} if max_wait is None else {"max_wait_s": max_wait}  # --full-only runs older code too
    ds = kafeed.KafkaTokenDataset(topic, seq_len=SEQ_LEN, eos_id=0, connection=conn, end=None, **fresh)
    loader = kafeed.StreamLoader(ds, batch_size=BATCH, num_workers=workers)
    recorder = _Recorder()
    loader._metrics = recorder  # type: ignore[assignment]  # a benchmark's hook
    # The producer outlives the loop and is stopped after it: the loop only looks at the clock
    # when a batch comes, and once records stopped, a batch short of rows would never come
    # (with workers, DataLoader waits for the next worker in turn, whose partitions may hold less).
    ctx = mp.get_context("spawn")
    acks = ctx.Array("d", 1 + 2 * int(rate * (seconds + 10)), lock=False)
    producer = ctx.Process(target=produce_at, args=(conn.bootstrap, topic, rate, seconds + 120, acks))
    producer.start()
    recorder.after_ms = time.time() * 1000 + WARMUP_S * 1000  # the consumer's start is not measured
    deadline = time.monotonic() + seconds - 0.5
    for _ in loader:
        if time.monotonic() > deadline:
            break
    until_ms = time.time() * 1000 - 1000  # records created since may not be acknowledged yet
    producer.terminate()
    producer.join()
    lat = np.concatenate(recorder.lat_ms) if recorder.lat_ms else np.zeros(1)
    stamps = np.concatenate(recorder.stamps).astype(np.float64) if recorder.stamps else np.zeros(0)
    acked = _acked(acks, recorder.after_ms, until_ms)
    after = _after_ack(acked, stamps, stamps + lat[: stamps.size])
    return {"records": float(lat.size), "p50": float(np.percentile(lat, 50)),
            "p99": float(np.percentile(lat, 99)), "p999": float(np.percentile(lat, 99.9)),
            "max": float(lat.max()), "fill": float(np.mean(recorder.rows)) / BATCH if recorder.rows else 0.0,
            "ack_p99": float(np.percentile(acked[:, 1] - acked[:, 0], 99)) if acked.size else float("nan"),
            "after_p99": float(np.percentile(after, 99)) if after.size else float("nan")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=15.0, help="per run")
    ap.add_argument("--backlog", type=int, default=100_000, help="records for the sustained-rate run")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--full-only", action="store_true", help="only the runs without max_wait_s")
    args = ap.parse_args()
    logging.getLogger("kafeed").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="kafeed-latency-") as tmp:
        cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=1024)
        cluster.start()
        try:
            conn = ConnectionSettings(bootstrap=cluster.bootstrap)
            admin = TopicAdmin(conn)
            admin.create(plan_topic("backlog", brokers=1, partitions=1))
            top = sustained(conn, "backlog", args.backlog)
            print(f"loader sustains {top:,.0f} records/s ({top * (DOC_TOKENS + 1) / 1e6:.1f}M tokens/s) "
                  f"of {DOC_TOKENS}-token documents, seq_len {SEQ_LEN}, batch {BATCH}", flush=True)
            plans: list[tuple[float, float | None]] = [
                (100, None), (100, 0.05), (100, 0.02), (100, 0.005),
                (top / 2, None), (top / 2, 0.02), (top / 2, 0.005)]
            if args.full_only:
                plans = [(rate, wait) for rate, wait in plans if wait is None]
            print("| rate (records/s) | max_wait_s | records | p50 ms | p99 ms | p99.9 ms | max ms "
                  "| batch fill | p99 ms to the producer's ack | p99 ms from it |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            for n, (rate, max_wait) in enumerate(plans):
                topic = f"fresh-{n}"
                # A partition per worker: a worker without one has nothing to read.
                admin.create(plan_topic(topic, brokers=1, partitions=max(1, args.workers)))
                r = run(conn, topic, rate, args.seconds, max_wait, args.workers)
                print(f"| {rate:,.0f} | {max_wait} | {r['records']:,.0f} | {r['p50']:.1f} | {r['p99']:.1f} | "
                      f"{r['p999']:.1f} | {r['max']:.1f} | {100 * r['fill']:.0f} % | {r['ack_p99']:.1f} | "
                      f"{r['after_p99']:.1f} |",
                      flush=True)
        finally:
            cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
