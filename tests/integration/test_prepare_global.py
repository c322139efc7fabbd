"""Global dedup: copies under new ids in other partitions meet; restart reads a snapshot plus its tail."""

from __future__ import annotations

import uuid

from kafeed.config import ConnectionSettings
from kafeed.prepare import PrepareSettings, run_prepare
from tests.prepare_support import (
    document_ids,
    high_watermarks,
    paragraphs,
    produce,
    read_topic,
    sample_record,
)


def _copy(text: str) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]] | None]:
    """The same text under a fresh id and key: the key partitioner scatters the copies."""
    fresh = uuid.uuid4().hex
    return sample_record(text, id=fresh, key=fresh)


def test_copies_under_new_ids_meet_and_restart_reads_snapshot_plus_tail(
        kafka: ConnectionSettings, make_topic) -> None:  # type: ignore[no-untyped-def]
    raw = make_topic(partitions=4)
    good = paragraphs(400)
    copies = [_copy(t) for t in good[::4]] + [_copy(t) for t in good[::8]]  # 100 + 50 copies
    produce(kafka, raw, [_copy(t) for t in good] + copies)
    group = f"g-{raw}"
    settings = PrepareSettings(input=raw, output=f"{raw}.tokens", group=group, idle_s=1.0,
                               dedup={"snapshot_every": 3},  # type: ignore[arg-type]
                               kafka={"batch_size": 20, "transaction_timeout_ms": 10_000})  # type: ignore[arg-type]
    stats = run_prepare(settings, kafka, until_caught_up=True)
    assert stats.balanced and stats.global_dedup, stats
    assert (stats.records_in, stats.documents_out, stats.duplicates) == (550, 400, 150)
    assert stats.routed_out == stats.routed_in == 550
    ids = document_ids(read_topic(kafka, settings.output))
    assert len(ids) == len(set(ids)) == 400

    # A new worker of the group: its state comes from the newest snapshot of each partition plus
    # the tail after it (at most snapshot_every - 1 tail records, two chunks and the end marker).
    produce(kafka, raw, [_copy(t) for t in good[:30]] + [_copy(paragraphs(1, seed="late")[0])])
    again = run_prepare(settings, kafka, until_caught_up=True)
    assert (again.records_in, again.duplicates, again.documents_out) == (31, 30, 1)
    changelog = high_watermarks(kafka, settings.changelog_topic)
    assert 0 < again.state_records_read <= 4 * (2 * 3 + 4)
    assert again.state_records_read < changelog / 2  # far less than the whole history

    # A count bound forgets: with at most 8 hashes per partition, early texts pass again.
    bounded = settings.model_copy(update={
        "group": f"{group}-bounded", "output": f"{raw}.bounded",
        "dedup": settings.dedup.model_copy(update={"max_entries": 8})})
    forgetful = run_prepare(bounded, kafka, until_caught_up=True)
    assert forgetful.balanced
    assert forgetful.records_in == 581
    assert 0 < forgetful.duplicates < 180  # the first run's 150 + the late 30, minus forgotten
    assert forgetful.documents_out > 401


def test_near_duplicates_across_partitions(kafka: ConnectionSettings, make_topic) -> None:  # type: ignore[no-untyped-def]
    import random

    from tests.unit.test_prepare_minhash import _corpus, _edit

    rng = random.Random(5)
    raw = make_topic(partitions=3)
    originals = _corpus(40, words_per_doc=250)
    variants = [_edit(t, 2, rng) for t in originals[:15]]       # small edits, new ids
    produce(kafka, raw, [_copy(t) for t in originals + variants + originals[20:25]])
    settings = PrepareSettings(input=raw, output=f"{raw}.tokens", group=f"g-{raw}", idle_s=1.0,
                               dedup={"near": True},  # type: ignore[arg-type]
                               kafka={"batch_size": 20, "transaction_timeout_ms": 10_000})  # type: ignore[arg-type]
    stats = run_prepare(settings, kafka, until_caught_up=True)
    assert stats.balanced, stats
    assert stats.documents_out == 40
    # Arrival order decides which of a pair is kept; an exact copy of a dropped text counts as near.
    assert stats.near_duplicates >= 15 and stats.near_duplicates + stats.duplicates == 20
    assert stats.as_dict()["near_duplicates"] == stats.near_duplicates
    assert len(set(document_ids(read_topic(kafka, settings.output)))) == 40


def _offsets(kafka: ConnectionSettings, topic: str, group: str) -> dict[int, tuple[int, int, int]]:
    """Per partition of ``topic``: (first offset, high watermark, ``group``'s committed offset)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(kafka.client_config() | {"group.id": group, "enable.auto.commit": False})
    try:
        parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        committed = {tp.partition: tp.offset
                     for tp in consumer.committed([TopicPartition(topic, p) for p in parts], timeout=10)}
        out = {}
        for p in parts:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)
            out[p] = (low, high, committed[p])
        return out
    finally:
        consumer.close()


def test_repartition_records_are_deleted_once_the_dedup_step_committed_them(
        kafka: ConnectionSettings, make_topic) -> None:  # type: ignore[no-untyped-def]
    from kafeed.prepare.rekey import RouteStage
    from kafeed.stream import StreamProcessor

    raw = make_topic(partitions=2)
    good = paragraphs(120, seed="purge")
    produce(kafka, raw, [_copy(t) for t in good] + [_copy(t) for t in good[:20]])
    settings = PrepareSettings(input=raw, output=f"{raw}.tokens", group=f"g-{raw}", idle_s=1.0,
                               kafka={"batch_size": 25})  # type: ignore[arg-type]
    repartition, dedup_group = settings.repartition_topic, f"{settings.group}.dedup"
    first = run_prepare(settings, kafka, until_caught_up=True)
    assert (first.documents_out, first.duplicates) == (120, 20)
    after_first = _offsets(kafka, repartition, dedup_group)
    # Everything the dedup step committed is gone (the purge at exit waits for the broker).
    assert all(0 < low == committed for low, _, committed in after_first.values()), after_first

    # The route step alone: re-keyed records the dedup step has not committed are kept.
    late = paragraphs(40, seed="purge-late")
    produce(kafka, raw, [_copy(t) for t in late] + [_copy(t) for t in good[:10]])
    StreamProcessor(RouteStage(settings), settings.route_settings(), kafka).run(until_caught_up=True)
    waiting = _offsets(kafka, repartition, dedup_group)
    assert sum(high - committed for _, high, committed in waiting.values()) >= 50  # 50 records + markers
    assert [low for low, _, _ in waiting.values()] == [low for low, _, _ in after_first.values()]

    # The dedup step reads every one of them, purging as it goes (every 0.05 s) and at exit.
    purging = settings.dedup.model_copy(update={"repartition_purge_s": 0.05})
    eager = settings.model_copy(update={"dedup": purging})
    second = run_prepare(eager, kafka, until_caught_up=True)
    assert (second.documents_out, second.duplicates) == (40, 10)
    assert second.balanced
    ids = document_ids(read_topic(kafka, settings.output))
    assert len(ids) == len(set(ids)) == 160
    final = _offsets(kafka, repartition, dedup_group)
    assert all(low == committed > after_first[p][2] for p, (low, _, committed) in final.items()), final
