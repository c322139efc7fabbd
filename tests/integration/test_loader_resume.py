"""Save/resume: the shared harness against every Kafka-backed stateful piece."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import kafeed
from kafeed.config import ConnectionSettings
from kafeed.loader.nodes.reader import ShardReader
from kafeed.loader.nodes.readers import kafka_reader
from kafeed.loader.nodes.stream import SampleStream, TokenStream
from kafeed.loader.settings import LoaderSettings
from kafeed.train.lineage import lineage_of
from tests.integration.loader_data import EOS, counts, produce_docs, produce_samples
from tests.kafka_fixtures import TopicFactory
from tests.stateful_harness import Stateful, check_save_resume, piece_case


@pytest.fixture
def doc_topic(kafka: ConnectionSettings, make_topic: TopicFactory) -> tuple[str, np.ndarray]:
    topic = make_topic(partitions=3)
    return topic, produce_docs(kafka.bootstrap, topic, 600, seed=3)


def _settings(kafka: ConnectionSettings, topic: str, **kw: Any) -> LoaderSettings:
    return LoaderSettings(**{"topics": (topic,), "seq_len": 15, "eos_id": EOS, "connection": kafka, **kw})


def _reader_step(reader: ShardReader) -> Any:
    item = reader.next()
    if item is None:
        return None
    reader.delivered(item[0])
    return [item[0], item[1]]


def _reader_case(settings: LoaderSettings) -> Stateful[Any]:
    return piece_case(lambda: kafka_reader(settings, index=0, count=1), _reader_step)


def _stream_case(settings: LoaderSettings) -> Stateful[Any]:
    return piece_case(lambda: TokenStream(settings, kafka_reader(settings, index=0, count=1)),
                      lambda stream: stream.next(3))


def _sample_stream_case(settings: LoaderSettings) -> Stateful[Any]:
    return piece_case(lambda: SampleStream(settings, kafka_reader(settings, index=0, count=1)),
                      lambda stream: stream.next(3))


def _iter_case(make_obj: Any, *, same_state: bool = True) -> Stateful[Any]:
    """Any object with __iter__ + state_dict/load_state_dict (dataset, StreamLoader)."""

    class Node:
        def __init__(self) -> None:
            self.obj = make_obj()
            self.it: Any = None

    def step(node: Node) -> Any:
        if node.it is None:
            node.it = iter(node.obj)
        return next(node.it, None)

    def close(node: Node) -> None:
        if node.it is not None and hasattr(node.it, "close"):
            node.it.close()

    return Stateful(make=Node, step=step, state=lambda node: node.obj.state_dict(),
                    load=lambda node, state: node.obj.load_state_dict(state), close=close,
                    same_state=same_state)


@pytest.mark.parametrize("shuffle", [0, 40])
def test_reader_and_stream_save_resume(kafka: ConnectionSettings, doc_topic: tuple[str, np.ndarray],
                                       shuffle: int) -> None:
    topic, _ = doc_topic
    settings = _settings(kafka, topic, shuffle_buffer=shuffle)
    check_save_resume(_reader_case(settings), 37, 60)
    check_save_resume(_stream_case(settings), 11, 20)
    check_save_resume(_stream_case(settings), 0, 5)


def test_dataset_save_resume(kafka: ConnectionSettings, doc_topic: tuple[str, np.ndarray]) -> None:
    topic, _ = doc_topic
    make = lambda: kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka, shuffle_buffer=30)  # noqa: E731
    check_save_resume(_iter_case(make), 41, 40)


@pytest.mark.parametrize(("workers", "late"), [(0, False), (2, False), (2, True)])
def test_stream_loader_save_resume_to_the_end(kafka: ConnectionSettings, doc_topic: tuple[str, np.ndarray],
                                              workers: int, late: bool) -> None:
    topic, expected = doc_topic

    def make() -> Any:
        ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka, shuffle_buffer=25,
                                      seed=7, return_boundaries=True)
        return kafeed.StreamLoader(ds, batch_size=4, num_workers=workers)

    total = int(expected.sum()) + int((expected > 0).sum())  # tokens + one EOS per document
    steps = total // (16 * 4) + 3  # past the end: the tail, then None
    # late: the state is taken after the worker with one partition ran dry (the other has two)
    cut = steps - 12 if late else 9
    first, rest = check_save_resume(_iter_case(make), cut, steps - cut)
    got = counts([np.array(b["tokens"]) for b in first + rest if b is not None], len(expected))
    assert np.array_equal(got, expected)
    assert rest[-1] is None and rest[-3] is not None


def test_loaded_state_with_other_fingerprint_is_refused(kafka: ConnectionSettings,
                                                        doc_topic: tuple[str, np.ndarray]) -> None:
    topic, _ = doc_topic
    ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka)
    loader = kafeed.StreamLoader(ds, batch_size=2)
    next(iter(loader))
    state = loader.state_dict()
    other = kafeed.StreamLoader(kafeed.KafkaTokenDataset(topic, seq_len=31, eos_id=0, connection=kafka),
                                batch_size=2)
    with pytest.raises(kafeed.ResumeMismatch):
        other.load_state_dict(state)
    with pytest.raises(kafeed.ResumeMismatch):
        kafeed.KafkaTokenDataset(topic, seq_len=15, connection=kafka, eos_id=3).load_state_dict(state)


# torchdata 0.11 still calls torch.set_vital, deprecated in recent torch: not ours to fix.
@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")
def test_torchdata_stateful_dataloader_checkpoints_the_dataset(
    kafka: ConnectionSettings, doc_topic: tuple[str, np.ndarray]
) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    topic, expected = doc_topic

    def make() -> Any:
        ds = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=0, connection=kafka, shuffle_buffer=10)
        # forkserver, as StreamLoader starts its workers: a worker forked from this process
        # copied it mid-call in other threads' clients and once died of a segfault.
        return StatefulDataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context="forkserver")

    first, rest = check_save_resume(_iter_case(make, same_state=False), 13, 400)
    got = counts([b for b in first + rest if b is not None], len(expected))
    assert np.array_equal(got, expected)


@pytest.mark.parametrize("shuffle", [0, 7])
def test_sample_pieces_save_resume(kafka: ConnectionSettings, make_topic: TopicFactory, shuffle: int) -> None:
    topic = make_topic(partitions=2)
    produce_samples(kafka.bootstrap, topic, 60)
    settings = LoaderSettings(topics=(topic,), kind="samples", connection=kafka, shuffle_buffer=shuffle)
    check_save_resume(_sample_stream_case(settings), 5, 8)
    make_ds = lambda: kafeed.KafkaSampleDataset(settings=settings)  # noqa: E731
    check_save_resume(_iter_case(make_ds), 13, 20)
    first, rest = check_save_resume(_iter_case(lambda: kafeed.StreamLoader(make_ds(), batch_size=4)), 6, 12)
    ids = sorted(i for b in first + rest if b is not None for i in b["id"])
    assert ids == sorted(f"s-{i}" for i in range(60))


def test_two_elastic_resumes_in_a_row_deliver_each_partly_packed_document_once(
        kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    # Saved at 4 ranks with documents partly packed, resumed at 2 and saved again before those
    # documents came round, then resumed at 1: what the first save knew of them (tokens already
    # emitted) must survive the second one, or they are delivered whole again.
    topic = make_topic(partitions=4)
    expected = produce_docs(kafka.bootstrap, topic, 400)

    def ranks(world: int, state: Any, batches: int | None) -> tuple[np.ndarray, Any]:
        got, states = np.zeros(len(expected), dtype=np.int64), []
        for rank in range(world):
            dataset = kafeed.KafkaTokenDataset(topic, seq_len=15, eos_id=EOS, connection=kafka,
                                               shuffle_buffer=16, seed=3, rank=rank, world_size=world)
            loader = kafeed.StreamLoader(dataset, batch_size=4)
            if state is not None:
                loader.load_state_dict(state)
            it = iter(loader)
            taken = [next(it)["tokens"] for _ in range(batches)] if batches else [b["tokens"] for b in it]
            got += counts(taken, len(expected))
            states.append(loader.state_dict())
            loader.close()
        return got, kafeed.merge_states(states)

    total = np.zeros(len(expected), dtype=np.int64)
    state = None
    for world, batches in ((4, 8), (2, 8), (1, None)):
        got, state = ranks(world, state, batches)
        total += got
        assert not np.flatnonzero(total > expected).size, f"trained twice after world {world}"
    assert np.array_equal(total, expected)
    assert lineage_of(state, {})["documents"] == 400  # the counts carried through both resumes
