"""Loader options out of range fail with ConfigError before any work starts."""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from typing import Any

import pytest

import kafeed
from kafeed.errors import ConfigError

VALID: dict[str, Any] = {"seq_len": 8, "eos_id": 0}


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"seq_len": 0}, "seq_len"),
    ({"seq_len": -1}, "seq_len"),
    ({"seq_len": 2**24 + 1}, "seq_len"),
    ({"eos_id": -1}, "eos_id"),
    ({"eos_id": 2**32}, "eos_id"),
    ({"shuffle_buffer": -1}, "shuffle_buffer"),
    ({"seed": -3}, "seed"),
    ({"consume_batch": 0}, "consume_batch"),
    ({"consume_batch": 1_000_001}, "consume_batch"),
    ({"queue_records": 0}, "queue_records"),
    ({"read_ahead_bytes": 4 * 1024 * 1024 - 1}, "read_ahead_bytes"),
    ({"read_ahead_bytes": 65 * 1024**3}, "read_ahead_bytes"),
    ({"read_ahead_bytes": True}, "read_ahead_bytes"),
    ({"max_wait_s": 0}, "max_wait_s"),
    ({"max_wait_s": float("nan")}, "max_wait_s"),
    ({"poll_timeout_s": 0}, "poll_timeout_s"),
    ({"poll_timeout_s": float("nan")}, "poll_timeout_s"),
    ({"broker_timeout_s": -1.0}, "broker_timeout_s"),
    ({"broker_timeout_s": float("inf")}, "broker_timeout_s"),
    ({"rank": -1, "world_size": 2}, "rank"),
    ({"rank": 2, "world_size": 2}, "rank 2 is not below world_size 2"),
    ({"rank": 0}, "rank and world_size together"),
    ({"world_size": 0, "rank": 0}, "world_size"),
    ({"mode": "group"}, "group="),
    ({"mode": "sharded"}, "mode"),
    ({"start": -5}, "start"),
    ({"start": True}, "start"),
    ({"start": "123"}, "start"),
    ({"start": 1.5}, "start"),
    ({"start": "earlist"}, "start"),
    ({"start": {0: -1}}, "start"),
    ({"end": {"other:0": 10}}, "end key 'other:0'"),
    ({"end": {"t:x": 10}}, "end key 't:x'"),
    ({"end": -1}, "end"),
    ({"dlq_topic": "no spaces"}, "not a Kafka topic name"),
    ({"group": ""}, "group"),
    ({"tokenizer": ""}, "tokenizer"),
    ({"archive": "notable"}, "archive table 'notable' is not NAMESPACE.TABLE"),
    ({"archive": {"other": "a.b"}}, "archive= names topic 'other'"),
    ({"archive": "a.b", "mode": "group", "group": "g"}, 'archive= reads with mode="static"'),
])
def test_token_dataset_refuses_out_of_range(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError, match="Invalid loader settings") as err:
        kafeed.KafkaTokenDataset("t", **{**VALID, **kwargs})
    assert field in str(err.value)


@pytest.mark.parametrize(("topics", "why"), [
    ([], "at least one topic"),
    (["t", "t"], "names a topic twice"),
    (["bad/name"], "not a Kafka topic name"),
    ([""], "not a Kafka topic name"),
])
def test_topic_names_are_checked(topics: list[str], why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        kafeed.KafkaSampleDataset(topics)


def test_valid_specs_are_accepted() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    for start, end in [("earliest", "latest"), (when, None), (0, when), ({0: 3, "t:1": 4, "2": 5}, {0: 9})]:
        ds = kafeed.KafkaTokenDataset("t", seq_len=8, eos_id=0, start=start, end=end)
        assert ds.settings.start == start and ds.settings.end == end


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": True}, "batch_size"),
    ({"batch_size": 2.5}, "batch_size"),
    ({"num_workers": -1}, "num_workers"),
    ({"prefetch_factor": 0, "num_workers": 1}, "prefetch_factor"),
    ({"prefetch_factor": 4}, "prefetch_factor needs num_workers"),
    ({"timeout": -1.0}, "timeout"),
    ({"multiprocessing_context": "threads"}, "multiprocessing_context"),
    ({"pin_memory": "yes"}, "pin_memory"),
])
def test_stream_loader_refuses_out_of_range(kwargs: dict[str, Any], field: str) -> None:
    ds = kafeed.KafkaTokenDataset("t", seq_len=8, eos_id=0)
    args = {"batch_size": 2, **kwargs}
    with pytest.raises(ConfigError, match="Invalid StreamLoader arguments") as err:
        kafeed.StreamLoader(ds, **args)
    assert field in str(err.value)


def test_stream_loader_needs_a_kafka_dataset() -> None:
    with pytest.raises(ConfigError, match="KafkaTokenDataset or KafkaSampleDataset"):
        kafeed.StreamLoader([1, 2, 3], batch_size=2)  # type: ignore[arg-type]


def test_eos_id_is_required_for_tokens_only() -> None:
    with pytest.raises(ConfigError, match="eos_id is required"):
        kafeed.KafkaTokenDataset("t", seq_len=8)
    assert kafeed.KafkaSampleDataset("t").settings.eos_id is None


def test_a_settings_object_or_its_fields_as_keywords() -> None:
    from kafeed.loader import LoaderSettings

    settings = LoaderSettings(topics=("t",), seq_len=8, eos_id=2, shuffle_buffer=5)
    ds = kafeed.KafkaTokenDataset(settings=settings)
    assert ds.settings == settings
    assert ds.settings == kafeed.KafkaTokenDataset("t", seq_len=8, eos_id=2, shuffle_buffer=5).settings
    other = kafeed.KafkaTokenDataset(["u", "v"], settings=settings, bootstrap="h:1", seed=3)
    assert other.settings.topics == ("u", "v") and other.settings.seed == 3
    assert other.settings.connection.bootstrap == "h:1" and other.settings.shuffle_buffer == 5
    with pytest.raises(ConfigError, match="seq_len"):
        kafeed.KafkaTokenDataset(settings=settings, seq_len=0)  # keywords are validated too


@pytest.mark.parametrize(("call", "why"), [
    (lambda: kafeed.KafkaTokenDataset(seq_len=8, eos_id=0), "Name the topics"),
    (lambda: kafeed.KafkaTokenDataset("t", seq_len=8, eos_id=0, shufle_buffer=3), "shufle_buffer"),
    (lambda: kafeed.KafkaSampleDataset(settings=kafeed.KafkaTokenDataset("t", seq_len=8, eos_id=0).settings),
     "kind='tokens'"),
    (lambda: kafeed.KafkaSampleDataset("t", kind="tokens"), "kind= is not an argument"),
    (lambda: kafeed.KafkaSampleDataset("t", bootstrap="h:1", connection=kafeed.ConnectionSettings()),
     "not both"),
])
def test_dataset_arguments_are_refused_by_name(call: Any, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        call()


def test_archive_names_one_table_per_topic() -> None:
    with pytest.raises(ConfigError, match="names one table, but the loader reads several topics"):
        kafeed.KafkaTokenDataset(["t", "u"], **VALID, archive="a.b")
    ds = kafeed.KafkaTokenDataset(["t", "u"], **VALID, archive={"u": "corpus.u"})
    assert ds.settings.archive_tables() == {"u": "corpus.u"}
    assert kafeed.KafkaTokenDataset("t", **VALID, archive="a.b").settings.archive_tables() == {"t": "a.b"}


def test_archive_without_pyiceberg_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    from kafeed.loader.sources.archive_table import ArchiveTable

    monkeypatch.setitem(sys.modules, "pyiceberg", None)  # as if not installed
    source = ArchiveTable(kafeed.KafkaTokenDataset("t", **VALID, archive="a.b").settings, "t", "a.b")
    with pytest.raises(ConfigError, match="needs pyiceberg") as err:
        source.open("cluster")
    assert err.value.hint == "Install the archive extra: pip install 'kafeed[archive]'."
