"""Read-ahead within read_ahead_bytes, and batches handed out early under max_wait_s."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from confluent_kafka import Consumer, TopicPartition

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.loader.nodes.stream import _Stream
from kafeed.loader.sources.read_ahead import MIB, ReadAhead
from tests.integration.archive_support import topic_records
from tests.integration.loader_data import EOS, produce_docs
from tests.kafka_fixtures import TopicFactory


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


def _read_ahead(loader: kafeed.StreamLoader) -> ReadAhead:
    stream = loader.dataset._stream  # the main process's reader (num_workers=0)
    assert isinstance(stream, _Stream)
    return stream.reader.source.read_ahead


def _loader(kafka: ConnectionSettings, topic: str, *, batch: int = 4, **kw: Any) -> kafeed.StreamLoader:
    ds = kafeed.KafkaTokenDataset(topic, seq_len=255, connection=kafka, eos_id=EOS, **kw)
    return kafeed.StreamLoader(ds, batch_size=batch)


def test_slow_consumer_holds_no_more_than_the_bound(kafka: ConnectionSettings,
                                                    make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=4)
    # ~48 MB of records (uint16 tokens): twelve times the bound, all there from the start.
    expected = produce_docs(kafka.bootstrap, topic, 6000, low=3000, high=5000, seed=3)
    assert expected.sum() * 2 > 40 * MIB
    bound = 4 * MIB
    loader = _loader(kafka, topic, read_ahead_bytes=bound)
    it = iter(loader)
    ahead: ReadAhead | None = None
    base = peak_rss = 0
    start = time.monotonic()
    batches = 0
    while time.monotonic() - start < 6.0:  # a trainer taking ~8 KB every 20 ms
        next(it)
        batches += 1
        if ahead is None:
            ahead = _read_ahead(loader)
        if base == 0 and ahead.target == ahead.budget.floor:
            # Settled: the target starts at the ceiling (the consumer might be fast) and
            # falls to the floor as the rate is measured. Until then librdkafka may have
            # fetched more for a partition it was waiting on (docs/loader.md).
            base = peak_rss = _rss()
            settled = batches
        elif base:
            peak_rss = max(peak_rss, _rss())
        time.sleep(0.02)
    it.close()
    assert ahead is not None and base, "the target never fell to the floor"
    # The queues' own count never passed the ceiling plus one pull.
    assert ahead.peak <= ahead.budget.ceiling + ahead.budget.client, ahead.peak
    # The process once settled, librdkafka's buffers included. Without the pauses
    # librdkafka's queue held the whole topic (48 MB) within the first second. A partition
    # found empty at its turn is resumed, and fetches until its first records come and it
    # is paused again: a fetch round trip or more of 1 MiB responses, which a loaded
    # machine stretches (up to ~10 MB seen; docs/loader.md). So the margin: a third of the
    # topic, which the exact count above does not need.
    assert peak_rss - base < bound + 12 * MIB, (peak_rss - base) / MIB
    assert batches - settled > 50


def _partition_docs(kafka: ConnectionSettings, topic: str, partitions: int, total: int) -> list[list[int]]:
    """Each partition's document values in offset order, read with a bare consumer."""
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "read-ahead-check",
                  "enable.auto.commit": False, "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    docs: list[list[int]] = [[] for _ in range(partitions)]
    done: set[int] = set()
    deadline = time.monotonic() + 60
    while len(done) < partitions and time.monotonic() < deadline:
        for msg in c.consume(num_messages=1000, timeout=1.0):
            if msg.error() is not None:
                done.add(msg.partition())
                continue
            docs[msg.partition()].append(int(msg.key().decode().split("-")[1]) + 1)
    c.close()
    assert sum(len(d) for d in docs) == total
    return docs


def _documented_stream(kafka: ConnectionSettings, topic: str, partitions: int,
                       expected: np.ndarray) -> list[int]:
    """The reader's documented order: one record per partition per turn, in partition order."""
    per_partition = _partition_docs(kafka, topic, partitions, int((expected > 0).sum()))
    stream: list[int] = []
    for turn in range(max(len(d) for d in per_partition)):
        for docs in per_partition:
            if turn < len(docs):
                stream.extend([docs[turn]] * int(expected[docs[turn]]) + [EOS])
    return stream


def test_batches_and_state_do_not_depend_on_the_read_ahead(kafka: ConnectionSettings,
                                                          make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 1500, low=500, high=3500, seed=4)  # ~6 MB
    stream = _documented_stream(kafka, topic, 3, expected)
    runs = {}
    for bound in (4 * MIB, 1024 * MIB):  # the cap pauses partitions / never reached
        loader = _loader(kafka, topic, batch=8, read_ahead_bytes=bound)
        tokens = np.concatenate([b["tokens"].numpy().ravel() for b in loader])
        runs[bound] = (tokens, loader.state_dict())
    small, large = runs[4 * MIB], runs[1024 * MIB]
    assert np.array_equal(small[0], large[0])
    assert small[1] == large[1]
    got = small[0]
    assert np.array_equal(got[: len(stream)], np.array(stream))
    assert not got[len(stream):].any()  # the last window's padding


def test_records_past_a_partitions_cap_are_read_again_not_lost(kafka: ConnectionSettings,
                                                                make_topic: TopicFactory) -> None:
    """Small records, so one consume() brings far more of a partition than queue_records: what
    it brings past the cap is dropped and fetched again (kafeed.loader.nodes.reader)."""
    topic = make_topic(partitions=2)
    expected = produce_docs(kafka.bootstrap, topic, 1000, low=1, high=8, seed=5)
    stream = _documented_stream(kafka, topic, 2, expected)
    # Each refill of a partition fetched to its log end waits for its leader's long poll
    # (fetch.wait.max.ms, 500 ms by default): shorter here, to keep the test short.
    loader = _loader(kafka, topic, batch=8, queue_records=32, consumer_config={"fetch.wait.max.ms": 50})
    tokens = np.concatenate([b["tokens"].numpy().ravel() for b in loader])
    largest = max(len(v or b"") for v in topic_records(kafka, topic).values())
    assert _read_ahead(loader).peak <= 2 * 32 * largest  # not the 1,000 one pull brings
    assert np.array_equal(tokens[: len(stream)], np.array(stream))
    assert not tokens[len(stream):].any()
    assert all(p["next"] == p["read"] == p["end"] and not p["delivered"]
               for reader in loader.state_dict()["readers"].values()
               for p in reader["reader"]["partitions"].values())


def test_max_wait_hands_out_a_partial_batch(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    expected = produce_docs(kafka.bootstrap, topic, 6, low=40, high=41)  # 246 tokens: 15 windows of 16
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, connection=kafka, eos_id=EOS, end=None, max_wait_s=0.05)
    loader = kafeed.StreamLoader(ds, batch_size=64)  # 1,024 tokens: never filled
    got: list[Any] = []

    def first_batch() -> None:
        got.append(next(iter(loader)))

    thread = threading.Thread(target=first_batch, daemon=True)
    thread.start()
    thread.join(60)
    assert got, "no batch within 60 s: the batch waited to be filled"
    rows = got[0]["tokens"].shape[0]
    assert 1 <= rows <= int(expected.sum() + 6) // 16 < 64
    assert not (got[0]["tokens"] == EOS).all(axis=1).any()  # whole windows of data, no padding


def _fetched_by_loaders() -> float:
    """Messages librdkafka received for the loader's consumers so far (from its statistics)."""
    from kafeed.telemetry.metrics import REGISTRY

    return sum(sample.value for family in REGISTRY.collect() for sample in family.samples
               if sample.name == "kafeed_client_rx_messages_total" and sample.labels.get("stage") == "loader")


def test_many_partitions_under_a_small_bound_are_fetched_about_once(kafka: ConnectionSettings,
                                                                     make_topic: TopicFactory) -> None:
    """Pausing a partition drops what librdkafka had fetched for it. A policy that paused every
    partition with records once the queues passed the target, and resumed one only when it
    was found empty at its turn, fetched the short partitions again and again for a few
    records each (one fetch round, up to 0.5 s, each time)."""
    topic = make_topic(partitions=24)
    records = 9600
    produce_docs(kafka.bootstrap, topic, records, low=500, high=1500, seed=5)  # ~19 MB
    before = _fetched_by_loaders()
    loader = _loader(kafka, topic, batch=8, read_ahead_bytes=16 * MIB,
                     consumer_config={"statistics.interval.ms": 100})
    tokens = sum(int(b["tokens"].numel()) for b in loader)
    fetched = _fetched_by_loaders() - before
    assert tokens > 0
    # The last statistics interval may be missed at close, so not exactly once either way.
    assert records * 0.5 <= fetched <= records * 1.5, fetched
