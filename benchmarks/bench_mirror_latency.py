"""End-to-end latency: a site's produce -> `kafeed mirror run` -> `kafeed prepare` -> the trainer's batch.

Not a test. Starts two 1-node LocalClusters (site-a, train) on free ports in a temp dir
(``bench_mirror.running_clusters``) and measures the same pipeline twice, one run after the other:

- **mirror**: a producer at site-a writes ``raw``; ``kafeed mirror run`` (MirrorMaker 2,
  exactly-once source) copies it into the training cluster as ``site-a.raw``; ``kafeed prepare
  --input site-a.raw --output tokens-mirror`` (defaults: filters, global dedup, the ``bytes``
  tokenizer) runs continuously; a ``kafeed.StreamLoader`` over ``KafkaTokenDataset`` iterates
  batches in this process.
- **direct**: the same without the mirror: the producer writes the training cluster's ``raw``.

Every record is a ``TrainingSample`` of exactly ``--size`` ASCII bytes that starts with
``probe <seq>``; the producer (its own process) keeps each record's send time (wall clock,
taken just before ``produce()``) by ``seq``. The loader's window is ``seq_len = --size``: with
the end-of-document token the loader appends, one document fills one row, so each batch row
names the record it holds and the moment the loop got the batch is that record's arrival.
Kafka timestamps are not used: prepare's output records carry prepare's own produce time, and
its lineage fields (input topic, partition, offset) name the training cluster's copy, not the
send. An observer process reads the raw topic in the training cluster and prepare's output,
both read_committed, and notes when each ``seq`` became visible there, which splits the total
into hops: produce -> read_committed in the training cluster, -> prepare's output
read_committed, -> handed out in a batch (the loader, and waiting for the batch to fill).

Each run first sends one record every 0.2 s until the first batch comes (the mirror, prepare and
the loader are all up), then writes ``--rate`` records/s; the first ``--warmup`` seconds of
that are not counted, the next ``--seconds`` are.

At these rates a batch of prepare's (2,000 records) never fills, so each of its two stages
(route by content hash, then dedup and tokenize: docs/prepare.md) closes a batch, one
transaction, ``consume_timeout_s`` (0.5 s) after it started. ``--prepare-wait S`` sets that
timeout (``[prepare.kafka]`` in a ``--config`` file), to show how much of prepare's hop it is.

    PYTHONPATH=src python -u benchmarks/bench_mirror_latency.py [--rate 500] [--seconds 20] [--batch 8]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from bench_mirror import mirror_settings, running_clusters
from confluent_kafka import Consumer, Producer

from kafeed.config import ConnectionSettings
from kafeed.mirror import MirrorSettings
from kafeed.schema import TokenizedDocument, TrainingSample
from kafeed.signals import ends_with_this_process
from kafeed.topics import TopicAdmin, plan_topic

PROBE_EVERY_S = 0.2
DRAIN_S = 60.0  # after the measured window: how long the records sent in it may take to arrive
EOS = 256  # the bytes tokenizer's ids are 0-255; the loader appends this after each document
_SEQ = re.compile(rb"probe (\d{9}) ")


def text_of(seq: int, size: int) -> str:
    """``size`` ASCII bytes, unchanged by prepare's normalization and passing its filters."""
    words = ("kafka", "mirror", "site", "record", "tokens", "trainer", "batch", "lineage")
    parts, n = [f"probe {seq:09d}"], 15
    while n < size:
        parts.append(words[len(parts) % len(words)])
        n += 1 + len(parts[-1])
    return " ".join(parts)[:size - 1] + "x"


def produce(bootstrap: str, topic: str, size: int, rate: float, sent: Any, go: Any, stop: Any,
            first: Any) -> None:
    """Probes until ``go``, then ``rate`` records/s until ``stop``; ``sent[seq]`` = ms sent.
    ``first.value`` is the first seq sent at the rate."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "enable.idempotence": True})
    seq = 0

    def send() -> None:
        nonlocal seq
        value = TrainingSample(input_data=text_of(seq, size).encode(), id=f"p{seq}",
                               timestamp=int(time.time() * 1000)).SerializeToString()
        sent[seq] = time.time() * 1000
        producer.produce(topic, value=value, key=f"p{seq}".encode())
        producer.poll(0)
        seq += 1

    while not go.wait(PROBE_EVERY_S):
        send()
    first.value = seq
    t0 = time.monotonic()
    while not stop.is_set() and seq < len(sent):
        wait = t0 + (seq - first.value) / rate - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        send()
    producer.flush(30)


def seq_of_sample(value: bytes) -> int | None:
    found = _SEQ.match(TrainingSample.FromString(value).input_data)
    return int(found.group(1)) if found else None


def seq_of_document(value: bytes) -> int | None:
    doc = TokenizedDocument.FromString(value)
    ids = np.frombuffer(doc.tokens, dtype="<u2" if doc.dtype == 1 else "<u4")[:16]
    found = _SEQ.match(ids.astype(np.uint8).tobytes())
    return int(found.group(1)) if found else None


def observe(bootstrap: str, topic: str, parse: Any, seen: Any, stop: Any) -> None:
    """``seen[seq]`` = ms when a read_committed consumer of ``topic`` first got the record.

    One ``poll`` per record: ``consume(n, timeout)`` returns only once it has ``n`` records or
    the timeout has passed, which would add up to the timeout to every record's time."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.subscribe([topic])
    while not stop.is_set():
        msg = consumer.poll(0.1)
        now = time.time() * 1000
        if msg is not None and msg.error() is None:
            seq = parse(msg.value())
            if seq is not None and seq < len(seen) and seen[seq] == 0:
                seen[seq] = now
    consumer.close()


def observe_both(bootstrap: str, raw: str, tokens: str, at_raw: Any, at_tokens: Any, stop: Any) -> None:
    """Both observers, in a process of their own so they take no time from the loader's."""
    threads = [threading.Thread(target=observe, args=(bootstrap, raw, seq_of_sample, at_raw, stop)),
               threading.Thread(target=observe, args=(bootstrap, tokens, seq_of_document, at_tokens, stop))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def kafeed_process(args: list[str], log: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """``kafeed ARGS`` with its output in ``log``; it gets SIGTERM if this process dies."""
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, "-m", "kafeed.cli.main", *args], stdout=out,
                                stderr=subprocess.STDOUT,
                                preexec_fn=ends_with_this_process(signal.SIGTERM)), log


def stop_process(proc: subprocess.Popen[bytes], log: Path) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if proc.returncode not in (0, 143, -signal.SIGTERM):
        print(f"{log.name} exited {proc.returncode}:\n{log.read_text()[-2000:]}", file=sys.stderr)


def mirror_toml(settings: MirrorSettings) -> str:
    """The settings as the TOML file ``kafeed mirror run --config`` reads (JSON scalars are TOML's)."""
    data = settings.model_dump(mode="json", exclude_none=True)
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict | list)]
    lines += ["[target]", *(f"{k} = {json.dumps(v)}" for k, v in data["target"].items())]
    for site in data["sites"]:
        lines += ["[[sites]]", *(f"{k} = {json.dumps(v)}" for k, v in site.items())]
    return "\n".join(lines) + "\n"


@dataclass
class Run:
    """Per record sent in the measured window, ms: each hop, and the whole way."""

    sent: int
    missing: int
    batches: int
    misaligned: int
    hops: dict[str, np.ndarray]


def wait_for_topic(train: ConnectionSettings, topic: str, mirror: subprocess.Popen[bytes], log: Path,
                   timeout: float) -> None:
    deadline = time.monotonic() + timeout
    admin = TopicAdmin(train)
    while topic not in admin.list():
        if mirror.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the mirror made no {topic} ({mirror.poll()=}):\n{log.read_text()[-2000:]}")
        time.sleep(0.5)


def pipeline_latency(work: Path, train: ConnectionSettings, produce_to: str, produce_topic: str,
                     raw: str, tokens: str, mirror: MirrorSettings | None, args: argparse.Namespace) -> Run:
    import kafeed

    work.mkdir(parents=True)
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    ctx = mp.get_context("spawn")
    capacity = int(args.start_timeout / PROBE_EVERY_S
                   + args.rate * (args.warmup + args.seconds + DRAIN_S + 30))
    sent, at_raw, at_tokens = (ctx.Array("d", capacity, lock=False) for _ in range(3))
    go, stop, first = ctx.Event(), ctx.Event(), ctx.Value("q", -1, lock=False)
    helpers: list[Any] = []
    at_batch = np.zeros(capacity)
    batches = misaligned = 0
    try:
        if mirror is not None:
            config = work / "sites.toml"
            config.write_text(mirror_toml(mirror))
            procs.append(kafeed_process(["mirror", "run", "--config", str(config)], work / "mirror.log"))
            wait_for_topic(train, raw, *procs[-1], args.start_timeout)
        tuning: list[str] = []
        if args.prepare_wait is not None:  # how long one batch (transaction) of each stage gathers records
            (work / "prepare.toml").write_text(f"[prepare.kafka]\nconsume_timeout_s = {args.prepare_wait}\n")
            tuning = ["--config", str(work / "prepare.toml")]
        procs.append(kafeed_process(["prepare", "--input", raw, "--output", tokens, "--group", f"bench-{raw}",
                                     "--tokenizer", "bytes", "-b", train.bootstrap, *tuning],
                                    work / "prepare.log"))
        helpers = [
            ctx.Process(target=observe_both, args=(train.bootstrap, raw, tokens, at_raw, at_tokens, stop)),
            ctx.Process(target=produce, args=(produce_to, produce_topic, args.size, args.rate, sent, go, stop,
                                              first))]
        for helper in helpers:
            helper.start()
        ds = kafeed.KafkaTokenDataset(tokens, seq_len=args.size, eos_id=EOS, connection=train, end=None)
        loader = kafeed.StreamLoader(ds, batch_size=args.batch)
        # The loop only looks at the clock when a batch comes: a pipeline that never starts or
        # stalls is ended by closing the loader from here.
        window_end = [time.monotonic() + args.start_timeout]
        watchdog_stop = threading.Event()

        def watchdog() -> None:
            while not watchdog_stop.wait(1.0):
                if time.monotonic() > window_end[0] + DRAIN_S:
                    print("stopped waiting: records sent in the window still missing", file=sys.stderr)
                    loader.close()
                    return

        guard = threading.Thread(target=watchdog, daemon=True)
        guard.start()
        sent_ms = np.frombuffer(sent, dtype=np.float64)
        measured = np.zeros(0, dtype=np.int64)
        for batch in loader:
            now = time.time() * 1000
            rows = batch["tokens"].numpy()
            batches += 1
            misaligned += int(np.count_nonzero(rows[:, -1] != EOS))
            flat = np.where(rows == EOS, 10, rows).astype(np.uint8).tobytes()
            for found in _SEQ.finditer(flat):
                seq = int(found.group(1))
                if seq < capacity and at_batch[seq] == 0:
                    at_batch[seq] = now
            if not go.is_set():
                go.set()
                window_end[0] = time.monotonic() + args.warmup + args.seconds
                continue
            if time.monotonic() > window_end[0]:
                if not measured.size:
                    t0 = float(sent_ms[first.value]) + args.warmup * 1000
                    seqs = np.arange(first.value, capacity)
                    measured = seqs[(sent_ms[seqs] >= t0) & (sent_ms[seqs] < t0 + args.seconds * 1000)]
                if np.all(at_batch[measured] > 0):
                    break
        watchdog_stop.set()
        loader.close()
    finally:
        stop.set()
        for helper in helpers:
            helper.join(60)
        for proc, log in reversed(procs):
            stop_process(proc, log)
    if not measured.size:
        raise RuntimeError(f"no batch came within {args.start_timeout:.0f} s; see the logs in {work}")
    got = measured[at_batch[measured] > 0]
    s, r, t, b = (np.asarray(a)[got] for a in (sent, at_raw, at_tokens, at_batch))
    seen = (r > 0) & (t > 0)  # the observers' own misses (none expected) leave only the total
    return Run(sent=int(measured.size), missing=int(measured.size - got.size), batches=batches,
               misaligned=misaligned,
               hops={"total": b - s, "to_train": (r - s)[seen], "prepare": (t - r)[seen],
                     "to_batch": (b - t)[seen]})


HOPS = (("total", "produce -> trainer's batch"),
        ("to_train", "  produce -> read_committed in train"),
        ("prepare", "  -> prepare's output, read_committed"),
        ("to_batch", "  -> handed out in a batch"))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=500, help="Records/s while measuring.")
    ap.add_argument("--seconds", type=float, default=20.0, help="Measured window of each run.")
    ap.add_argument("--warmup", type=float, default=5.0, help="Seconds at the rate before the window.")
    ap.add_argument("--size", type=int, default=512, help="Bytes per record (= tokens per document).")
    ap.add_argument("--batch", type=int, default=8, help="The loader's batch size (rows = documents).")
    ap.add_argument("--partitions", type=int, default=2)
    ap.add_argument("--prepare-wait", type=float, default=None,
                    help="prepare's consume_timeout_s ([prepare.kafka]; default: prepare's own, 0.5 s).")
    ap.add_argument("--start-timeout", type=float, default=300.0,
                    help="Seconds for the mirror's topic to appear and the first batch to come.")
    args = ap.parse_args(argv)

    with (tempfile.TemporaryDirectory(prefix="kafeed-bench-mirror-latency-") as tmp,
          running_clusters(Path(tmp), ("site-a", "train")) as clusters):
        work = Path(tmp)
        train = ConnectionSettings(bootstrap=clusters["train"].bootstrap)
        for name, topics in (("site-a", ("raw",)), ("train", ("raw", "tokens-direct", "tokens-mirror"))):
            admin = TopicAdmin(ConnectionSettings(bootstrap=clusters[name].bootstrap))
            for topic in topics:
                admin.create(plan_topic(topic, brokers=1, partitions=args.partitions))
        runs = {
            "direct": pipeline_latency(work / "direct", train, train.bootstrap, "raw", "raw", "tokens-direct",
                                       None, args),
            "mirror": pipeline_latency(work / "mirror", train, clusters["site-a"].bootstrap, "raw",
                                       "site-a.raw", "tokens-mirror",
                                       mirror_settings(clusters, ("site-a",), "raw", work / "mm"), args),
        }
    for label, run in runs.items():
        print(f"{label}: {run.sent:,} records sent in the window, {run.missing} not in a batch within "
              f"{DRAIN_S:.0f} s, {run.batches:,} batches, {run.misaligned} rows not one whole document")
    wait = "default" if args.prepare_wait is None else f"{args.prepare_wait} s"
    print(f"\n{args.rate:,.0f} records/s of {args.size} B, batches of {args.batch} x {args.size + 1} tokens, "
          f"{args.partitions} partitions, 1-node clusters, prepare's consume_timeout_s {wait}; ms")
    print(f"{'what':<40} {'mirror p50 / p99':>20} {'direct p50 / p99':>20} {'ratio p50':>10}")
    for key, what in HOPS:
        m, d = runs["mirror"].hops[key], runs["direct"].hops[key]
        mp50, mp99, dp50, dp99 = (float(np.percentile(a, q)) if a.size else float("nan")
                                  for a, q in ((m, 50), (m, 99), (d, 50), (d, 99)))
        print(f"{what:<40} {f'{mp50:,.0f} / {mp99:,.0f}':>20} {f'{dp50:,.0f} / {dp99:,.0f}':>20} "
              f"{mp50 / dp50:>10.1f}")
    return 0 if all(run.missing == 0 for run in runs.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
