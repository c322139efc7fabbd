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
    assert changelog > 3 * again.state_records_read  # the history is much longer than what was read

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
