"""Sharding, elastic resume, bounded/unbounded, modes, bad records, samples."""

from __future__ import annotations

import gc
import logging
import threading
import time
from typing import Any

import numpy as np
import pytest
import torch
from confluent_kafka import Consumer

import kafeed
from kafeed.config import ConnectionSettings
from tests.integration.loader_data import EOS, counts, produce_docs, produce_samples
from tests.kafka_fixtures import TopicFactory


def _loader(kafka: ConnectionSettings, topic: str, *, rank: int | None = None, world: int | None = None,
            workers: int = 0, batch: int = 4, **kw: Any) -> kafeed.StreamLoader:
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, connection=kafka, eos_id=EOS, rank=rank,
                                  world_size=world, **kw)
    return kafeed.StreamLoader(ds, batch_size=batch, num_workers=workers)


def test_two_ranks_two_workers_disjoint_and_covering(
    kafka: ConnectionSettings, make_topic: TopicFactory
) -> None:
    topic = make_topic(partitions=5)
    expected = produce_docs(kafka.bootstrap, topic, 800, seed=5)
    seen = []
    for rank in range(2):
        loader = _loader(kafka, topic, rank=rank, world=2, workers=2)
        seen.append(counts(list(loader), len(expected)))
        owned = [set(r["reader"]["partitions"]) for r in loader.state_dict()["readers"].values()]
        assert len(owned) == 2 and not owned[0] & owned[1]
    docs = [set(np.flatnonzero(c)) for c in seen]
    assert docs[0] and docs[1] and not docs[0] & docs[1]  # a document lives in one partition
    assert np.array_equal(seen[0] + seen[1], expected)


def test_fewer_partitions_than_readers(kafka: ConnectionSettings, make_topic: TopicFactory,
                                       caplog: pytest.LogCaptureFixture) -> None:
    topic = make_topic(partitions=1)
    expected = produce_docs(kafka.bootstrap, topic, 100)
    with caplog.at_level(logging.WARNING, logger="kafeed"):
        got = [counts(list(_loader(kafka, topic, rank=r, world=3)), len(expected)) for r in range(3)]
    assert "will be idle" in caplog.text
    assert got[1].sum() == 0 and got[2].sum() == 0
    assert np.array_equal(got[0], expected)


def test_an_idle_worker_of_an_unbounded_run_ends_and_the_others_go_on(
        kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    # One partition, two workers: DataLoader takes batches from the workers in turn, so a
    # worker with nothing to read that waited instead of ending held every batch back.
    topic = make_topic(partitions=1)
    expected = produce_docs(kafka.bootstrap, topic, 200, seed=6)
    loader = _loader(kafka, topic, workers=2, end=None, poll_timeout_s=0.2)
    got: list[Any] = []

    def take() -> None:
        for batch in loader:
            got.append(batch)
            if len(got) == 5:
                return

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    thread.join(120)
    assert len(got) == 5, f"{len(got)} batches within 120 s from a topic holding {expected.sum()} tokens"


def test_elastic_two_to_three_ranks_exactly_once(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=4)
    expected = produce_docs(kafka.bootstrap, topic, 600, seed=9)
    total = np.zeros_like(expected)
    states = []
    for rank in range(2):
        loader = _loader(kafka, topic, rank=rank, world=2, shuffle_buffer=20, seed=rank)
        it = iter(loader)
        batches = [next(it) for _ in range(7 + 3 * rank)]
        it.close()
        total += counts(batches, len(expected))
        states.append(loader.state_dict())
    merged = kafeed.merge_states(states)
    assert any(r["packer"]["carry"] for r in merged["readers"].values())  # a document was cut mid-way
    for rank in range(3):
        loader = _loader(kafka, topic, rank=rank, world=3, shuffle_buffer=20)
        loader.load_state_dict(merged)
        total += counts(list(loader), len(expected))
    assert np.array_equal(total, expected)


def test_exact_resume_needs_every_reader_for_elastic(
    kafka: ConnectionSettings, make_topic: TopicFactory
) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 50)
    loader = _loader(kafka, topic, rank=0, world=2)
    next(iter(loader))
    other = _loader(kafka, topic, rank=0, world=3)
    other.load_state_dict(loader.state_dict())
    with pytest.raises(kafeed.ResumeMismatch, match="merge_states"):
        next(iter(other))


def test_unbounded_picks_up_new_records(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    first = produce_docs(kafka.bootstrap, topic, 50, seed=1)
    later: list[np.ndarray] = []

    def produce_later() -> None:
        time.sleep(2)
        later.append(produce_docs(kafka.bootstrap, topic, 50, seed=2, first=50))

    thread = threading.Thread(target=produce_later)
    thread.start()
    loader = _loader(kafka, topic, end=None, batch=2)
    got = np.zeros(102, dtype=np.int64)
    deadline = time.monotonic() + 60
    for batch in loader:
        got += counts([batch], 102)
        if got[52:].sum() > 0:  # documents 51.. exist only after the loader started
            break
        assert time.monotonic() < deadline, "new records never arrived"
    thread.join()
    assert later and got[52:].sum() > 0
    assert np.all(got[: len(first)] <= first)


def test_start_latest_and_explicit_end(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    expected = produce_docs(kafka.bootstrap, topic, 30)
    assert counts(list(_loader(kafka, topic, start="latest")), len(expected)).sum() == 0
    got = counts(list(_loader(kafka, topic, end={0: 10})), len(expected))
    assert np.array_equal(got[:11], expected[:11]) and got[11:].sum() == 0
    tail = counts(list(_loader(kafka, topic, start={0: 10})), len(expected))
    assert np.array_equal(got + tail, expected)


def test_bad_records_are_skipped_counted_and_dead_lettered(kafka: ConnectionSettings,
                                                           make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    dlq = make_topic(partitions=1)
    expected = produce_docs(kafka.bootstrap, topic, 60, bad=[3, 17, 40])
    ds = kafeed.KafkaTokenDataset(topic, seq_len=7, eos_id=0, connection=kafka, dlq_topic=dlq)
    assert np.array_equal(counts(list(ds), len(expected)), expected)
    assert ds.stats()["bad"] == 3
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "dlq-check",
                         "auto.offset.reset": "earliest", "logger": logging.getLogger("kafeed.librdkafka")})
    consumer.subscribe([dlq])
    msgs: list[Any] = []
    deadline = time.monotonic() + 30
    while len(msgs) < 3 and time.monotonic() < deadline:
        msgs += [m for m in consumer.consume(10, timeout=1) if m.error() is None]
    consumer.close()
    assert len(msgs) == 3
    assert all(dict(m.headers())["kafeed.error.reason"] for m in msgs)


def test_replicated_mode_every_reader_reads_all(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 90)
    for rank in range(2):
        got = counts(list(_loader(kafka, topic, rank=rank, world=2, mode="replicated")), len(expected))
        assert np.array_equal(got, expected)


def test_group_mode_reads_all_and_resumes(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 300)
    group = f"g-{topic}"
    loader = _loader(kafka, topic, mode="group", group=group)
    it = iter(loader)
    first = [next(it) for _ in range(10)]
    it.close()
    state = loader.state_dict()
    committed = loader.commit_offsets()
    assert committed and all(v >= 0 for v in committed.values())
    again = _loader(kafka, topic, mode="group", group=group)
    again.load_state_dict(state)
    total = counts(first, len(expected)) + counts(list(again), len(expected))
    assert np.array_equal(total, expected)


def test_sample_dataset_batches(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    produce_samples(kafka.bootstrap, topic, 50)
    loader = kafeed.StreamLoader(kafeed.KafkaSampleDataset(topic, connection=kafka, shuffle_buffer=10),
                                 batch_size=8, num_workers=2)
    batches = list(loader)
    ids = [i for b in batches for i in b["id"]]
    assert sorted(ids) == sorted(f"s-{i}" for i in range(50))
    b = batches[0]
    assert b["targets"].shape[1] == 1 and b["targets"].dtype.is_floating_point
    for text, target in zip(b["text"], b["targets"][:, 0].tolist(), strict=True):
        assert float(int(text.split()[1]) % 3) == target


@pytest.mark.parametrize("workers", [0, 2])
def test_breaking_out_and_iterating_again_continues(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                    workers: int) -> None:
    topic = make_topic(partitions=2)
    expected = produce_docs(kafka.bootstrap, topic, 300)
    loader = _loader(kafka, topic, workers=workers, shuffle_buffer=10)
    it = iter(loader)
    first = [next(it) for _ in range(5)]  # the workers prefetched more than this
    it.close()
    total = counts(first, len(expected)) + counts(list(loader), len(expected))
    assert np.array_equal(total, expected)
    again = list(loader)  # that run ended: iterating again is a new epoch, shuffled differently
    assert np.array_equal(counts(again, len(expected)), expected)
    assert [b["tokens"].tolist() for b in again[:3]] != [b["tokens"].tolist() for b in first[:3]]


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")  # more workers than cores
def test_many_workers_with_boundaries_start_and_read_every_token(kafka: ConnectionSettings,
                                                                 make_topic: TopicFactory) -> None:
    """Six workers' slots, tokens and boundaries, reach each worker as one shared block: a
    tensor per slot was a file descriptor each, past the 256 a new process is sent."""
    topic = make_topic(partitions=6)
    expected = produce_docs(kafka.bootstrap, topic, 120)
    batches = list(_loader(kafka, topic, workers=6, return_boundaries=True))
    assert np.array_equal(counts(batches, len(expected)), expected)
    assert all(b["doc_start"].shape == b["tokens"].shape for b in batches)


def test_dataset_yields_dicts_and_new_epochs(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    expected = produce_docs(kafka.bootstrap, topic, 80)
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=EOS, connection=kafka, return_boundaries=True)
    windows = list(ds)
    first = windows[0]
    assert sorted(first) == ["doc_start", "input_ids", "labels", "tokens"]
    assert first["tokens"].shape == (16,) and first["input_ids"].tolist() == first["tokens"][:-1].tolist()
    assert first["labels"].tolist() == first["tokens"][1:].tolist() and first["doc_start"].dtype == torch.bool
    assert np.array_equal(counts(windows, len(expected)), expected)
    assert np.array_equal(counts(list(ds), len(expected)), expected)  # a second epoch
    batch = next(iter(torch.utils.data.DataLoader(ds, batch_size=4)))  # default collate: a dict too
    assert batch["tokens"].shape == (4, 16) and batch["labels"].shape == (4, 15)


def test_sample_loader_collate_fn(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    produce_samples(kafka.bootstrap, topic, 10)
    loader = kafeed.StreamLoader(kafeed.KafkaSampleDataset(topic, connection=kafka), batch_size=4,
                                 num_workers=1, prefetch_factor=1, collate_fn=_ids)
    assert list(loader) == [["s-0", "s-1", "s-2", "s-3"], ["s-4", "s-5", "s-6", "s-7"], ["s-8", "s-9"]]
    with pytest.raises(kafeed.ConfigError, match="no collate_fn"):
        kafeed.StreamLoader(kafeed.KafkaTokenDataset(topic, seq_len=3, eos_id=0), batch_size=2,
                            collate_fn=_ids)


def _ids(samples: list[dict[str, Any]]) -> list[str]:  # module level: workers pickle it
    return [s["id"] for s in samples]


def test_workers_freeze_what_they_start_with(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    """A worker's inherited objects (torch, kafeed) are out of its collector's passes, which
    would walk them and copy the pages it shares; the trainer's are left as they are."""
    topic = make_topic(partitions=1)
    produce_samples(kafka.bootstrap, topic, 4)
    before = gc.get_freeze_count()
    # The forkserver's workers (the default in this process, which runs Kafka clients);
    # forked ones run the same worker_init_fn.
    loader = kafeed.StreamLoader(kafeed.KafkaSampleDataset(topic, connection=kafka), batch_size=2,
                                 num_workers=1, collate_fn=_frozen)
    frozen = list(loader)
    assert len(frozen) == 2 and min(frozen) > 10_000, frozen
    assert gc.get_freeze_count() == before


def _frozen(samples: list[dict[str, Any]]) -> int:
    return gc.get_freeze_count()


def test_start_and_end_by_timestamp(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    from datetime import UTC, datetime, timedelta

    topic = make_topic(partitions=2)
    expected = produce_docs(kafka.bootstrap, topic, 40)
    future = datetime.now(UTC) + timedelta(hours=1)
    assert counts(list(_loader(kafka, topic, start=future)), len(expected)).sum() == 0
    assert np.array_equal(counts(list(_loader(kafka, topic, start=0, end=future)), len(expected)), expected)
    assert counts(list(_loader(kafka, topic, end=0)), len(expected)).sum() == 0
