"""A topic deleted and created again under its name is not the topic whose positions the table
holds: the sink refuses it in one sentence instead of skipping the new topic's first records."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kafeed.archive.sink import run_archive
from kafeed.config import ConnectionSettings
from kafeed.errors import ResumeMismatch, TopicError
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.archive_support import settings, table_keys
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory


def _create_again(admin: TopicAdmin, name: str) -> None:
    """Create ``name`` again once its deletion went through."""
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create(plan_topic(name, brokers=1, partitions=1))
            return
        except TopicError:  # still being deleted
            assert time.monotonic() < deadline, f"could not create {name} again"
            time.sleep(0.2)


def test_a_recreated_topic_is_refused_not_skipped(kafka: ConnectionSettings, admin: TopicAdmin,
                                                  make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    produce_docs(kafka.bootstrap, topic, 80)
    first = run_archive(settings(topic, tmp_path), kafka, until_caught_up=True)
    assert first.rows_written == 80
    # Archiving again is no change: the topic and its id are the ones the table holds.
    again = run_archive(settings(topic, tmp_path), kafka, until_caught_up=True)
    assert again.rows_written == 0

    admin.delete(topic)
    _create_again(admin, topic)
    produce_docs(kafka.bootstrap, topic, 50, first=1000)
    with pytest.raises(ResumeMismatch) as refused:
        run_archive(settings(topic, tmp_path), kafka, until_caught_up=True)
    message = str(refused.value)
    assert f"archived an earlier topic named {topic!r}, which was deleted and created again" in message
    assert "topic id" in message and "new table" in message and "\n" not in message
    assert len(table_keys(tmp_path)) == 80  # nothing of the new topic went in under the old positions
    # Into a new table the new topic is archived from its start.
    fresh = run_archive(settings(topic, tmp_path, table="arch.again"), kafka, until_caught_up=True)
    assert fresh.rows_written == 50
