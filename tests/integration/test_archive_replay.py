"""`kafeed replay` on the real broker and a real table: idempotent, and never into its own topic."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from kafeed.archive import CatalogSettings
from kafeed.archive.replay import SOURCE_HEADER, replay
from kafeed.archive.sink import run_archive
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from tests.cli_support import usage_error
from tests.integration.archive_support import settings, table_rows, topic_records
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory


def _sources(kafka: ConnectionSettings, topic: str) -> list[bytes]:
    """The replay source header of every committed record of ``topic`` (duplicates kept)."""
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "replay-test-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, -2) for p in parts])
        out: list[bytes] = []
        eof: set[int] = set()
        while len(eof) < len(parts):
            for msg in c.consume(1000, timeout=1.0):
                if msg.error() is not None:
                    eof.add(msg.partition())
                    continue
                out += [v for k, v in msg.headers() or () if k == SOURCE_HEADER]
        return out
    finally:
        c.close()


def _replay(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    capsys.readouterr()
    assert main(["replay", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_replay_twice_writes_once_and_never_into_its_own_topic(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 40)
    wall = time.time()
    while time.time() < wall + 0.005:  # the second batch gets later record timestamps
        pass
    produce_docs(kafka.bootstrap, topic, 40, first=40)
    assert run_archive(settings(topic, tmp_path), kafka, until_caught_up=True).rows_written == 80
    base = ["--table", "arch.t", "--warehouse", str(tmp_path), "-b", kafka.bootstrap]

    # Into the topic it archives: refused, nothing written.
    before = topic_records(kafka, topic)
    line = usage_error(["replay", *base, "--topic", topic], capsys)
    assert "is the archive of topic" in line
    assert topic_records(kafka, topic) == before

    # Into a fresh topic, twice: the second run writes nothing.
    target = make_topic(partitions=2)
    assert _replay([*base, "--topic", target], capsys) == {"records": 80, "partitions": 2,
                                                            "already_there": 0}
    assert _replay([*base, "--topic", target], capsys) == {"records": 0, "partitions": 2,
                                                            "already_there": 80}
    assert topic_records(kafka, target) == topic_records(kafka, topic)  # same bytes, same offsets
    sources = _sources(kafka, target)
    assert len(sources) == len(set(sources)) == 80

    # A part first, then the whole: the whole writes only what the part did not.
    later = min(r["timestamp"] for r in table_rows(tmp_path) if int(r["key"][4:]) >= 40)
    other = make_topic(partitions=2)
    part = replay("arch.t", CatalogSettings(warehouse=tmp_path), kafka, topic=other, since=later)
    assert 40 <= part.records < 80 and part.already_there == 0
    rest = replay("arch.t", CatalogSettings(warehouse=tmp_path), kafka, topic=other)
    assert (rest.records, rest.already_there) == (80 - part.records, part.records)
    values = Counter(topic_records(kafka, other).values())
    assert values == Counter(topic_records(kafka, topic).values())


def test_replay_into_a_topic_of_the_other_record_kind_is_refused(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.integration.loader_data import produce_samples

    topic = make_topic(partitions=1)
    produce_docs(kafka.bootstrap, topic, 10)
    assert run_archive(settings(topic, tmp_path), kafka, until_caught_up=True).rows_written == 10
    base = ["--table", "arch.t", "--warehouse", str(tmp_path), "-b", kafka.bootstrap]
    samples = make_topic(partitions=1)
    produce_samples(kafka.bootstrap, samples, 5)
    before = topic_records(kafka, samples)
    line = usage_error(["replay", *base, "--topic", samples], capsys)
    assert f"Topic '{samples}' holds samples records and table 'arch.t' holds tokens" in line
    assert topic_records(kafka, samples) == before
    # A topic that already holds tokens takes them.
    tokens = make_topic(partitions=1)
    produce_docs(kafka.bootstrap, tokens, 3, first=100)
    assert _replay([*base, "--topic", tokens], capsys)["records"] == 10
