"""A stream opened ahead (before torch, as `kafeed train` does) is adopted only when the
dataset resumes from exactly the state it was opened from; the data is the same either way."""

from __future__ import annotations

import numpy as np

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.loader.opening import MAIN_PROCESS, open_stream
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.state.checkpoint import check_state
from tests.integration.loader_data import EOS, counts, produce_docs
from tests.kafka_fixtures import TopicFactory


def _settings(kafka: ConnectionSettings, topic: str) -> LoaderSettings:
    return LoaderSettings(kind="tokens", topics=(topic,), connection=kafka, seq_len=15, eos_id=EOS,
                          end="latest", shuffle_buffer=50, seed=4)


def test_adopted_stream_reads_what_a_fresh_one_reads(kafka: ConnectionSettings,
                                                     make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=3)
    expected = produce_docs(kafka.bootstrap, topic, 300, seed=2)
    settings = _settings(kafka, topic)
    fresh = kafeed.StreamLoader(kafeed.KafkaTokenDataset(settings=settings), batch_size=4)
    reference = [b["tokens"].clone() for b in fresh]

    dataset = kafeed.KafkaTokenDataset(settings=settings)
    stream = open_stream(settings, MAIN_PROCESS, None, client_stats=False)
    dataset.adopt(stream, None)
    got = [b["tokens"].clone() for b in kafeed.StreamLoader(dataset, batch_size=4)]
    assert dataset._stream is stream  # adopted, not reopened
    assert len(got) == len(reference) and all(a.equal(b) for a, b in zip(got, reference, strict=True))
    assert np.array_equal(counts(got, len(expected)), expected)


def test_stream_opened_from_another_state_is_replaced(kafka: ConnectionSettings,
                                                      make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=2)
    expected = produce_docs(kafka.bootstrap, topic, 200, seed=3)
    settings = _settings(kafka, topic)
    first = kafeed.StreamLoader(kafeed.KafkaTokenDataset(settings=settings), batch_size=4)
    head = []
    for batch in first:
        head.append(batch["tokens"].clone())
        if len(head) == 5:
            break
    saved = check_state(first.state_dict(), settings)

    # Opened ahead from the start, but the run resumes from `saved`: the dataset must not use it.
    dataset = kafeed.KafkaTokenDataset(settings=settings)
    stale = open_stream(settings, MAIN_PROCESS, None, client_stats=False)
    dataset.adopt(stale, None)
    loader = kafeed.StreamLoader(dataset, batch_size=4)
    loader.load_state_dict(saved)
    rest = [b["tokens"].clone() for b in loader]
    assert dataset._stream is not stale
    assert np.array_equal(counts(head + rest, len(expected)), expected)  # each document once

    # Opened ahead from exactly `saved`: adopted, and the same batches come out.
    again = kafeed.KafkaTokenDataset(settings=settings)
    ahead = open_stream(settings, MAIN_PROCESS, saved, client_stats=False)
    again.adopt(ahead, saved)
    resumed = kafeed.StreamLoader(again, batch_size=4)
    resumed.load_state_dict(saved)
    same = [b["tokens"].clone() for b in resumed]
    assert again._stream is ahead
    assert len(same) == len(rest) and all(a.equal(b) for a, b in zip(same, rest, strict=True))
