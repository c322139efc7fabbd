"""A topic of the wrong record type stops the loader with SchemaError; a few bad records do not."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.loader.nodes.decode import WRONG_TYPE_AFTER
from kafeed.schema import make_document
from tests.integration.loader_data import counts, produce_docs, produce_samples, producer
from tests.kafka_fixtures import TopicFactory


def _first_batch(loader: kafeed.StreamLoader) -> Any:
    return next(iter(loader))


@pytest.mark.parametrize("workers", [0, 2])
def test_token_loader_over_training_samples_raises_schema_error(
    kafka: ConnectionSettings, make_topic: TopicFactory, workers: int
) -> None:
    topic = make_topic(partitions=2)
    produce_samples(kafka.bootstrap, topic, 400)
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka)
    loader = kafeed.StreamLoader(ds, batch_size=2, num_workers=workers)
    with pytest.raises(kafeed.SchemaError) as err:
        _first_batch(loader)
    exc = err.value
    assert type(exc) is kafeed.SchemaError  # not DataLoader's re-wrapped copy
    assert exc.message.startswith(f"Topic {topic!r} does not hold TokenizedDocument records")
    assert "TrainingSample records" in exc.message
    assert f"none of the {WRONG_TYPE_AFTER} records" in exc.message
    assert "\n" not in exc.message
    assert exc.hint is not None and "kafeed prepare" in exc.hint
    if workers == 0:  # it stopped after the first undecodable run, not at the end of the topic
        assert ds.stats()["bad"] == WRONG_TYPE_AFTER


def test_short_json_topic_raises_at_the_end_of_a_bounded_run(
    kafka: ConnectionSettings, make_topic: TopicFactory
) -> None:
    topic = make_topic(partitions=1)
    p = producer(kafka.bootstrap)
    for i in range(10):  # fewer than WRONG_TYPE_AFTER: judged when the run ends
        p.produce(topic, value=json.dumps({"text": f"line {i}", "label": i % 2}).encode())
    assert p.flush(30) == 0
    loader = kafeed.StreamLoader(kafeed.KafkaSampleDataset(topic, connection=kafka), batch_size=4,
                                 num_workers=2)
    with pytest.raises(kafeed.SchemaError) as err:
        list(loader)
    assert "does not hold TrainingSample records: none of the 10 records" in err.value.message
    assert "JSON text" in err.value.message
    assert err.value.hint is not None and "kafeed ingest" in err.value.hint


def test_sample_loader_over_token_documents_raises_schema_error(
    kafka: ConnectionSettings, make_topic: TopicFactory
) -> None:
    topic = make_topic(partitions=1)
    produce_docs(kafka.bootstrap, topic, 100, low=5)
    with pytest.raises(kafeed.SchemaError, match="does not hold TrainingSample records") as err:
        list(kafeed.KafkaSampleDataset(topic, connection=kafka))
    assert "TokenizedDocument records" in err.value.message


@pytest.mark.parametrize("workers", [0, 2])
def test_mixed_topic_with_bad_records_first_still_delivers_the_good_ones(
    kafka: ConnectionSettings, make_topic: TopicFactory, workers: int
) -> None:
    topic = make_topic(partitions=2)
    bad = range(0, 40)  # a run of bad records first (short of WRONG_TYPE_AFTER), then good ones
    expected = produce_docs(kafka.bootstrap, topic, 300, bad=bad)
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka)
    loader = kafeed.StreamLoader(ds, batch_size=4, num_workers=workers)
    assert np.array_equal(counts(list(loader), len(expected)), expected)
    bad_seen = sum(r["reader"]["stats"]["bad"] for r in loader.state_dict()["readers"].values())
    assert bad_seen == len(bad)


def test_records_of_another_tokenizer_are_named_as_such(kafka: ConnectionSettings,
                                                        make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    p = producer(kafka.bootstrap)
    for i in range(WRONG_TYPE_AFTER):
        doc = make_document([1, 2, 3, i % 250], id=f"d{i}", vocab_size=257, tokenizer="other:v1")
        p.produce(topic, value=doc.SerializeToString())
    assert p.flush(30) == 0
    ds = kafeed.KafkaTokenDataset(topic, seq_len=3, eos_id=0, tokenizer="bytes:v1", connection=kafka)
    with pytest.raises(kafeed.SchemaError) as err:
        _first_batch(kafeed.StreamLoader(ds, batch_size=1))
    assert "of another tokenizer" in err.value.message and "'other:v1'" in err.value.message
    assert err.value.hint is not None and "--tokenizer" in err.value.hint
