"""The archive sink on the real broker and a local SQLite catalog: exactly once, resumable."""

from __future__ import annotations

from pathlib import Path

from kafeed.archive.rows import record_value
from kafeed.archive.sink import run_archive
from kafeed.config import ConnectionSettings
from tests.integration.archive_support import settings, table_keys, table_rows, topic_records
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory


def test_archive_round_trip_and_resume(kafka: ConnectionSettings, make_topic: TopicFactory,
                                       tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 300, bad=[5, 17])
    s = settings(topic, tmp_path)
    first = run_archive(s, kafka, until_caught_up=True)
    assert first.rows_written == 300
    held = topic_records(kafka, topic)
    rows = table_rows(tmp_path)
    assert sorted((r["partition"], r["offset"]) for r in rows) == sorted(held)
    # Every row gives back the exact bytes that were consumed; the two bad ones are kept raw.
    assert all(record_value(r) == held[(r["partition"], r["offset"])] for r in rows)
    assert sum(r["kind"] == "raw" for r in rows) == 2
    # A second run starts from the table's positions: nothing again, then only what is new.
    assert run_archive(s, kafka, until_caught_up=True).rows_written == 0
    produce_docs(kafka.bootstrap, topic, 50, first=300)
    again = run_archive(s, kafka, until_caught_up=True)
    assert again.rows_written == 50
    keys = table_keys(tmp_path)
    assert len(keys) == len(set(keys)) == 350
