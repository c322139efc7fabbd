"""A saved state is checked against the topic before anything is read."""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory


def _loader(kafka: ConnectionSettings, topic: str, workers: int = 0) -> kafeed.StreamLoader:
    return kafeed.StreamLoader(kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka),
                               batch_size=4, num_workers=workers)


def _state_after(kafka: ConnectionSettings, topic: str, batches: int) -> dict[str, Any]:
    loader = _loader(kafka, topic)
    it = iter(loader)
    for _ in range(batches):
        next(it)
    it.close()
    return loader.state_dict()


@pytest.mark.parametrize("workers", [0, 2])
def test_partition_the_topic_lacks_is_refused(kafka: ConnectionSettings, make_topic: TopicFactory,
                                              workers: int) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 100)
    state = _state_after(kafka, topic, 3)
    parts = state["readers"]["0"]["reader"]["partitions"]
    parts[f"{topic}:7"] = parts.pop(f"{topic}:1")
    loader = _loader(kafka, topic, workers)
    loader.load_state_dict(state)  # structurally fine: only the topic can tell
    with pytest.raises(kafeed.ResumeMismatch) as err:
        next(iter(loader))
    assert f"partition 7 of topic {topic!r}, which now has 2 partition(s)" in err.value.message
    assert err.value.hint is not None and "recreated" in err.value.hint


def test_state_of_a_deleted_and_recreated_topic_is_refused(
    kafka: ConnectionSettings, make_topic: TopicFactory, admin: TopicAdmin
) -> None:
    topic = make_topic(partitions=1)
    produce_docs(kafka.bootstrap, topic, 300)
    state = _state_after(kafka, topic, 20)
    read = state["readers"]["0"]["reader"]["partitions"][f"{topic}:0"]["read"]
    admin.delete(topic)
    deadline = time.monotonic() + 60
    while True:  # deletion completes in the background
        try:
            admin.create(plan_topic(topic, brokers=1, partitions=1))
            break
        except TopicError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    produce_docs(kafka.bootstrap, topic, 10)
    loader = _loader(kafka, topic)
    loader.load_state_dict(state)
    with pytest.raises(kafeed.ResumeMismatch, match=f"read offset {read} of partition {topic}:0 is beyond "
                                                   "its high watermark 10"):
        next(iter(loader))


def test_state_below_the_log_start_is_refused(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    produce_docs(kafka.bootstrap, topic, 300)
    state = _state_after(kafka, topic, 5)
    nxt = state["readers"]["0"]["reader"]["partitions"][f"{topic}:0"]["next"]
    client = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in client.delete_records([TopicPartition(topic, 0, 200)]).values():
        future.result(timeout=30)
    loader = _loader(kafka, topic)
    loader.load_state_dict(state)
    with pytest.raises(kafeed.ResumeMismatch, match=f"next offset {nxt} of partition {topic}:0 is below "
                                                   "its log start offset 200"):
        next(iter(loader))
    # Nothing was taken: the state is still the one loaded.
    assert loader.state_dict() == state


@pytest.mark.parametrize("workers", [0, 2])
def test_state_missing_a_partition_it_knew_is_refused(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                      workers: int) -> None:
    topic = make_topic(partitions=3)
    produce_docs(kafka.bootstrap, topic, 150)
    state = _state_after(kafka, topic, 3)
    reader = state["readers"]["0"]
    gone = f"{topic}:1"  # partition 2 is still named
    del reader["reader"]["partitions"][gone]
    reader["packer"]["carry"] = [ref for ref in reader["packer"]["carry"] if ref[0] != gone]
    if reader["shuffle"] is not None:
        reader["shuffle"]["items"] = [ref for ref in reader["shuffle"]["items"] if ref[0] != gone]
    loader = _loader(kafka, topic, workers)
    loader.load_state_dict(state)
    with pytest.raises(kafeed.ResumeMismatch) as err:
        next(iter(loader))
    assert f"no position for partition 1 of topic {topic!r}" in err.value.message


def test_a_partition_added_since_the_state_is_read_from_its_start(
    kafka: ConnectionSettings, make_topic: TopicFactory
) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 100)
    state = _state_after(kafka, topic, 3)
    client = AdminClient({"bootstrap.servers": kafka.bootstrap})
    for future in client.create_partitions([NewPartitions(topic, 3)]).values():
        future.result(timeout=30)
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka)
    loader = kafeed.StreamLoader(ds, batch_size=4)
    loader.load_state_dict(state)
    next(iter(loader))
    parts = loader.state_dict()["readers"]["0"]["reader"]["partitions"]
    assert sorted(parts) == [f"{topic}:{p}" for p in range(3)]
