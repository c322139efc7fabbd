"""Tiered reading: a topic whose early records retention deleted, read through its archive table
as if they were still there (the real broker, a local SQLite catalog)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafeed
import kafeed.loader.sources.cold_tier
from kafeed.archive import CatalogSettings
from kafeed.archive.sink import run_archive
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.loader.nodes.readers import kafka_reader, table_reader
from kafeed.loader.nodes.stream import TokenStream
from kafeed.loader.settings import LoaderSettings
from kafeed.schema.codec import decode_document
from kafeed.train.checkpoint import CheckpointManager
from kafeed.train.lineage import lineage_of
from tests.integration.archive_support import settings as archive_settings
from tests.integration.archive_support import topic_records
from tests.integration.loader_data import EOS, produce_docs, produce_samples
from tests.stateful_harness import Stateful, check_save_resume, piece_case


def small_segment_topic(kafka: ConnectionSettings, name: str, partitions: int = 2) -> str:
    """A topic with small segments, so retention has whole segments to delete."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    new = NewTopic(name, num_partitions=partitions, replication_factor=1,
                   config={"segment.bytes": str(1024 * 1024), "retention.ms": "-1"})
    admin.create_topics([new])[name].result(timeout=30)
    return name


def delete_below(kafka: ConnectionSettings, topic: str, offsets: dict[int, int]) -> None:
    """What retention does: the log start offsets move up to ``offsets`` (answered when done)."""
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    tps = [TopicPartition(topic, p, o) for p, o in offsets.items()]
    for future in admin.delete_records(tps).values():
        future.result(timeout=30)


def options(kafka: ConnectionSettings, warehouse: Path | None, **kw: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"seq_len": 16, "eos_id": EOS, "tokenizer": "test", "shuffle_buffer": 25,
                           "seed": 7, "queue_records": 40, "connection": kafka}
    if warehouse is not None:
        out.update(archive="arch.t", archive_catalog=CatalogSettings(warehouse=warehouse))
    return {**out, **kw}


def windows(topic: str, **kw: Any) -> list[list[int]]:
    return [w["tokens"].tolist() for w in kafeed.KafkaTokenDataset(topic, **kw)]


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read the table a few dozen offsets at a time (as queue_records=40 bounds the queues),
    so a read crosses many scans and the switch to Kafka lands mid-stream."""
    monkeypatch.setattr(kafeed.loader.sources.cold_tier, "COLD_CHUNK", 1)


@pytest.fixture
def topic(kafka: ConnectionSettings, request: pytest.FixtureRequest) -> str:
    name = f"tiered-{request.node.name[:30]}-{uuid.uuid4().hex[:8]}"
    return small_segment_topic(kafka, name)


@pytest.mark.usefixtures("small_chunks")
def test_tiered_read_gives_the_windows_of_the_unexpired_topic(kafka: ConnectionSettings, topic: str,
                                                                tmp_path: Path) -> None:
    produce_docs(kafka.bootstrap, topic, 400, bad=[3, 250])
    # Before anything expires: the reference, one per rank of two (one partition each).
    before = {rank: windows(topic, **options(kafka, None, rank=rank, world_size=2)) for rank in (0, 1)}
    assert all(len(w) > 100 for w in before.values())
    assert run_archive(archive_settings(topic, tmp_path), kafka, until_caught_up=True).rows_written == 400
    delete_below(kafka, topic, {0: 150, 1: 90})
    for rank in (0, 1):
        hot_only = windows(topic, **options(kafka, None, rank=rank, world_size=2))
        assert len(hot_only) < len(before[rank])  # the deletion took records away...
        # ... and the archive gives them back, in the same windows, shuffle and sharding.
        assert windows(topic, **options(kafka, tmp_path, rank=rank, world_size=2)) == before[rank]


@pytest.mark.usefixtures("small_chunks")
def test_tiered_resume_is_exact_while_the_boundary_moves(kafka: ConnectionSettings, topic: str,
                                                         tmp_path: Path) -> None:
    produce_docs(kafka.bootstrap, topic, 400, seed=1)
    everything = windows(topic, **options(kafka, None))
    run_archive(archive_settings(topic, tmp_path), kafka, until_caught_up=True)
    delete_below(kafka, topic, {0: 100, 1: 100})
    tiered = options(kafka, tmp_path)

    def state_after(count: int) -> dict[str, Any]:
        ds = kafeed.KafkaTokenDataset(topic, **tiered)
        it = iter(ds)
        assert [next(it)["tokens"].tolist() for _ in range(count)] == everything[:count]
        return ds.state_dict()

    def resumed(state: dict[str, Any]) -> list[list[int]]:
        ds = kafeed.KafkaTokenDataset(topic, **tiered)
        ds.load_state_dict(state)
        return [w["tokens"].tolist() for w in ds]

    # A state taken while both partitions are read from the table ...
    cold = state_after(40)
    assert all(p["next"] < 100 for p in cold["readers"]["0"]["reader"]["partitions"].values())
    # ... and one taken after both moved on to Kafka.
    hot = state_after(600)
    parts = hot["readers"]["0"]["reader"]["partitions"]
    assert all(100 < p["next"] < p["read"] for p in parts.values()), parts
    # Retention moves on past both (up to the hot state's read offsets, so its in-flight
    # records are gone too): each resumes exactly, reading what is gone from the table.
    delete_below(kafka, topic, {int(key.rpartition(":")[2]): p["read"] for key, p in parts.items()})
    assert resumed(cold) == everything[40:]
    assert resumed(hot) == everything[600:]
    # The shared harness: a stream resumed from its state continues with the same batches
    # and ends in the same state (counts included).
    settings = LoaderSettings(topics=(topic,), **tiered)

    class Node:  # opened on the first step, after a state was loaded
        def __init__(self) -> None:
            self.stream = TokenStream(settings, kafka_reader(settings, index=0, count=1))

        def next(self) -> Any:
            if not self.stream.reader.source.opened:
                self.stream.open()
            return self.stream.next(3)

    check_save_resume(Stateful(make=Node, step=Node.next, state=lambda n: n.stream.state(),
                               load=lambda n, st: n.stream.reset(st),
                               close=lambda n: n.stream.close()), 30, 40)


def test_tiered_samples(kafka: ConnectionSettings, topic: str, tmp_path: Path) -> None:
    produce_samples(kafka.bootstrap, topic, 120)
    opts = {"shuffle_buffer": 10, "seed": 3, "connection": kafka}

    def read(**kw: Any) -> list[tuple[str, int, int]]:
        dataset = kafeed.KafkaSampleDataset(topic, **opts, **kw)
        return [(s["id"], s["partition"], s["offset"]) for s in dataset]

    def workers(**kw: Any) -> list[list[tuple[str, int, int]]]:  # a reader per DataLoader worker
        loader = kafeed.StreamLoader(kafeed.KafkaSampleDataset(topic, **opts, **kw), batch_size=8,
                                     num_workers=2)
        return [list(zip(b["id"], b["partition"], b["offset"], strict=True)) for b in loader]

    before, before_workers = read(), workers()
    run_archive(archive_settings(topic, tmp_path, kind="samples"), kafka, until_caught_up=True)
    delete_below(kafka, topic, {0: 40, 1: 30})
    assert len(read()) == 120 - 70
    tiered = {"archive": "arch.t", "archive_catalog": CatalogSettings(warehouse=tmp_path)}
    assert read(**tiered) == before
    assert workers(**tiered) == before_workers


def test_tiered_bad_input_is_one_sentence(kafka: ConnectionSettings, topic: str, tmp_path: Path) -> None:
    other = small_segment_topic(kafka, topic + "-other", partitions=1)
    produce_docs(kafka.bootstrap, other, 10)
    run_archive(archive_settings(other, tmp_path, table="arch.other"), kafka, until_caught_up=True)
    produce_docs(kafka.bootstrap, topic, 100)
    with pytest.raises(kafeed.ConfigError) as info:
        windows(topic, **options(kafka, tmp_path, archive="arch.other"))
    assert info.value.message == f"Table 'arch.other' archives topic '{other}', not '{topic}'."
    assert info.value.hint
    # Records deleted before the sink archived them: the gap is named, nothing is read past it.
    run_archive(archive_settings(topic, tmp_path), kafka, until_caught_up=True)
    produce_docs(kafka.bootstrap, topic, 100, first=100)
    delete_below(kafka, topic, {0: 80, 1: 80})
    with pytest.raises(kafeed.ConfigError, match=r"^Offsets \d+\.\.79 of partition .*:\d are neither in "
                                                 r"table 'arch.t' \(archived up to \d+\) nor in the topic"):
        windows(topic, **options(kafka, tmp_path))
    with pytest.raises(kafeed.ConfigError, match="archive= reads with mode=\"static\" or \"replicated\""):
        kafeed.KafkaTokenDataset(topic, **options(kafka, tmp_path, mode="group", group="g"))


def test_tiered_read_goes_back_to_the_table_when_retention_overtakes_it(
        kafka: ConnectionSettings, topic: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for round_ in range(8):  # one record batch per round and partition
        produce_docs(kafka.bootstrap, topic, 50, first=50 * round_)
    everything = windows(topic, **options(kafka, None))
    run_archive(archive_settings(topic, tmp_path), kafka, until_caught_up=True)
    # The consumer fetches about one batch ahead, and the reader holds at most queue_records
    # (40) of a partition, pausing it there, so retention can overtake it.
    tiered = options(kafka, tmp_path, consumer_config={
        "queued.min.messages": 1, "queued.max.messages.kbytes": 1, "fetch.max.bytes": 1000,
        "message.max.bytes": 1000, "max.partition.fetch.bytes": 1000})
    it = iter(kafeed.KafkaTokenDataset(topic, **tiered))
    got = [next(it)["tokens"].tolist() for _ in range(10)]
    delete_below(kafka, topic, {0: 150, 1: 150})
    with caplog.at_level("INFO", logger="kafeed"):
        got += [w["tokens"].tolist() for w in it]
    assert got == everything
    assert "retention overtook" in caplog.text


def test_lineage_lists_the_documents_a_checkpoint_trained_on(
        kafka: ConnectionSettings, topic: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    produce_docs(kafka.bootstrap, topic, 200, bad=[7])
    ids = {po: decode_document(v).id for po, v in topic_records(kafka, topic).items()
           if v is not None and not v.startswith(b"\xff")}  # the bad record has no id
    run_archive(archive_settings(topic, tmp_path), kafka, until_caught_up=True)
    delete_below(kafka, topic, {0: 60, 1: 60})
    # Train (here: read) on the expired topic through its archive, and checkpoint the state.
    ds = kafeed.KafkaTokenDataset(topic, **options(kafka, tmp_path))
    it = iter(ds)
    for _ in range(120):
        next(it)
    state = ds.state_dict()
    lineage = lineage_of(state, {key: 0 for key in state["readers"]["0"]["reader"]["partitions"]})
    CheckpointManager(tmp_path / "ck").save(1, {}, manifest={"lineage": lineage, "config": {"topic": topic}})
    capsys.readouterr()
    assert main(["lineage", str(tmp_path / "ck"), "--archive", "arch.t", "--warehouse", str(tmp_path),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    trained = [(int(key.rpartition(":")[2]), o) for key, entry in lineage["partitions"].items()
               for a, b in entry["ranges"] for o in range(a, b)]
    expected = [ids[po] for po in sorted(trained) if po in ids]
    assert report["archive"]["document_ids"] == expected
    assert len(expected) == lineage["documents"] > 0
    # A table of another topic: one sentence.
    other = small_segment_topic(kafka, topic + "-other", partitions=1)
    produce_docs(kafka.bootstrap, other, 5)
    run_archive(archive_settings(other, tmp_path, table="arch.other"), kafka, until_caught_up=True)
    assert main(["lineage", str(tmp_path / "ck"), "--archive", "arch.other",
                 "--warehouse", str(tmp_path)]) == 2
    assert "which checkpoint" in capsys.readouterr().err


def test_archive_only_reads_the_topic_as_archived_without_the_cluster(kafka: ConnectionSettings, topic: str,
                                                                        tmp_path: Path) -> None:
    produce_docs(kafka.bootstrap, topic, 300, bad=[5, 170])
    # The reference: the topic read from Kafka, by one rank (both partitions, interleaved) and
    # by each of two (one partition each).
    expected = {(rank, world): windows(topic, **options(kafka, None, rank=rank, world_size=world))
                for rank, world in ((0, 1), (0, 2), (1, 2))}
    assert run_archive(archive_settings(topic, tmp_path), kafka, until_caught_up=True).rows_written == 300
    # No broker listens there: a loader that reached for the cluster would fail or hang.
    nowhere = ConnectionSettings(bootstrap="127.0.0.1:9")
    for (rank, world), reference in expected.items():
        got = windows(topic, **options(nowhere, tmp_path, rank=rank, world_size=world, archive_only=True))
        assert got == reference
    # Saved in the middle of a partition, resumed exactly, from the table alone.
    settings = LoaderSettings(topics=(topic,), **options(nowhere, tmp_path, archive_only=True))
    check_save_resume(piece_case(lambda: TokenStream(settings, table_reader(settings, index=0, count=1)),
                                 lambda stream: stream.next(3)), 30, 40)


def test_a_state_from_kafka_resumes_from_the_tables_alone_and_back(kafka: ConnectionSettings, topic: str,
                                                                   tmp_path: Path) -> None:
    """The two read the same partitions at the same offsets, so a checkpoint taken reading
    one resumes exactly reading the other: the windows, shuffled, are those of one read."""
    produce_docs(kafka.bootstrap, topic, 200, bad=[7, 120])
    assert run_archive(archive_settings(topic, tmp_path), kafka, until_caught_up=True).rows_written == 200
    from_kafka = options(kafka, None)
    from_tables = options(ConnectionSettings(bootstrap="127.0.0.1:9"), tmp_path, archive_only=True)
    reference = windows(topic, **from_kafka)
    assert windows(topic, **from_tables) == reference
    for first, then in ((from_kafka, from_tables), (from_tables, from_kafka)):
        loader = kafeed.StreamLoader(kafeed.KafkaTokenDataset(topic, **first), batch_size=3)
        head: list[list[int]] = []
        for batch in loader:
            head.extend(batch["tokens"].tolist())
            if len(head) >= 30:
                break
        state = loader.state_dict()
        loader.close()
        resumed = kafeed.StreamLoader(kafeed.KafkaTokenDataset(topic, **then), batch_size=3)
        resumed.load_state_dict(state)
        tail = [window for batch in resumed for window in batch["tokens"].tolist()]
        assert 30 <= len(head) < len(reference) and head + tail == reference


def test_archive_only_refuses_what_it_cannot_read() -> None:
    base = {"topics": ("t",), "seq_len": 8, "eos_id": 0, "end": "latest"}
    with pytest.raises(ValueError, match="name them with archive="):
        LoaderSettings(**base, archive_only=True)
    with pytest.raises(ValueError, match="start='latest' does not apply"):
        LoaderSettings(**base, archive="arch.t", archive_only=True, start="latest")
    with pytest.raises(ValueError, match="end=None does not apply"):
        LoaderSettings(**{**base, "end": None}, archive="arch.t", archive_only=True)
