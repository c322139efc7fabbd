"""Every node of the loader (kafeed.loader.nodes.node) continues from a state of its own
version and refuses one of another: the node, the version it got, the one it reads and what
to do are in the message. Real nodes throughout, the reader over FakeKafka."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import kafeed
from kafeed.errors import ResumeMismatch
from kafeed.kafka import FakeKafka
from kafeed.loader.nodes.mixing import MixSchedule, check_entry
from kafeed.loader.nodes.node import NODE_VERSIONS
from kafeed.loader.nodes.packing import TokenPacker
from kafeed.loader.nodes.readers import kafka_reader
from kafeed.loader.nodes.shuffle import ShuffleBuffer
from kafeed.loader.nodes.stream import SampleStream, TokenStream
from kafeed.loader.settings import LoaderSettings
from kafeed.schema import make_document
from tests.stream_entries import stream_entry

TOPIC = "tokens"


def _settings(**options: Any) -> LoaderSettings:
    return LoaderSettings(topics=(TOPIC,), seq_len=8, eos_id=0, end="latest", **options)


def _fake() -> FakeKafka:
    fake = FakeKafka()
    fake.create_topic(TOPIC, 2)
    producer = fake.producer()
    for p in range(2):
        for o in range(12):
            value = make_document(np.arange(1, 4 + o % 3), id=f"{p}-{o}", vocab_size=65536)
            producer.produce(TOPIC, value.SerializeToString(), None, partition=p)
    return fake


def _stream(kind: str) -> TokenStream | SampleStream:
    settings = _settings(shuffle_buffer=4) if kind == "tokens" else LoaderSettings(
        topics=(TOPIC,), kind="samples", end="latest", shuffle_buffer=4)
    kind_of = TokenStream if kind == "tokens" else SampleStream
    return kind_of(settings, kafka_reader(settings, index=0, count=1, clients=_fake()))


def _read_stream(kind: str) -> TokenStream | SampleStream:
    """A stream that read what it could (a token stream two batches, so that its reader,
    shuffle buffer and packer hold something; a sample stream, over token records, nothing),
    closed."""
    stream = _stream(kind)
    stream.reader.open()
    if kind == "tokens":
        stream.next(2)
        stream.next(2)
    stream.close()
    return stream


def _reader_case() -> tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]:
    fake = _fake()
    reader = kafka_reader(_settings(), index=0, count=1, clients=fake)
    reader.open()
    while (item := reader.next()) is not None:
        reader.delivered(item[0])
    state = reader.state()
    reader.close()
    return state, kafka_reader(_settings(), index=0, count=1, clients=fake).reset, "reader"


def _shuffle_case() -> tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]:
    buffer: ShuffleBuffer[int] = ShuffleBuffer(4, [0, 0])
    for item in range(6):
        buffer.add(item)
    buffer.next()
    return buffer.state(), ShuffleBuffer[int](4, [0, 0]).reset, "shuffle"


def _packer_case() -> tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]:
    docs = {("t:0", 0): np.arange(1, 13)}
    packer = TokenPacker(9, 0)
    packer.push(("t:0", 0), docs[("t:0", 0)])
    packer.pop(1)
    fresh = TokenPacker(9, 0)
    return packer.state(), lambda state: fresh.reset(state, fetch=docs.__getitem__), "packer"


def _stream_case(kind: str) -> Callable[[], tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]]:
    def case() -> tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]:
        state = json.loads(json.dumps(_read_stream(kind).state()))
        return state, _stream(kind).reset, "stream"
    return case


def _schedule_case() -> tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]:
    schedule = MixSchedule({"a": 2.0, "b": 1.0}, seed=0, index=0)
    schedule.pick(5)
    return schedule.state(), MixSchedule({"a": 2.0, "b": 1.0}, seed=0, index=0).reset, "schedule"


def _mixture_case() -> tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]:
    sources = {n: LoaderSettings(topics=(n,), seq_len=7, eos_id=0) for n in ("a", "b")}
    entry = {"version": 1, "index": 0, "sources": {"a": stream_entry(0, {}), "b": stream_entry(0, {})},
             "schedule": MixSchedule({"a": 1.0, "b": 1.0}, seed=0, index=0).state(),
             "tokens": {"a": 0, "b": 0}, "dry": []}
    return entry, lambda state: check_entry(state, "readers['0']", sources), "mixture"


def _loader_case() -> tuple[dict[str, Any], Callable[[dict[str, Any]], None], str]:
    dataset = kafeed.KafkaTokenDataset(TOPIC, seq_len=8, eos_id=0, shuffle_buffer=4)
    loader = kafeed.StreamLoader(dataset, batch_size=2)
    state = dataset.empty_state()
    state.update(num_readers=1, readers={"0": json.loads(json.dumps(_read_stream("tokens").state()))},
                 next_worker={"0": 0})
    return state, loader.load_state_dict, "loader"


CASES = {"reader": _reader_case, "shuffle": _shuffle_case, "packer": _packer_case,
         "token stream": _stream_case("tokens"), "sample stream": _stream_case("samples"),
         "schedule": _schedule_case, "mixture": _mixture_case, "loader": _loader_case}


def test_every_node_type_is_covered() -> None:
    assert {make()[2] for make in CASES.values()} == set(NODE_VERSIONS)


@pytest.mark.parametrize("node", sorted(CASES))
def test_a_node_resets_from_its_own_state_and_refuses_another_version(node: str) -> None:
    state, reset, kind = CASES[node]()
    assert state["version"] == NODE_VERSIONS[kind]
    reset(copy.deepcopy(state))  # its own version loads
    for wrong in (NODE_VERSIONS[kind] + 1, 0, "1", True, None):
        with pytest.raises(ResumeMismatch) as err:
            reset({**copy.deepcopy(state), "version": wrong})
        text = str(err.value)
        assert f"({kind} node) version {wrong!r} is not supported" in text, text
        assert f"this kafeed reads version {NODE_VERSIONS[kind]}" in text
        assert err.value.hint is not None and "kafeed version that saved it" in err.value.hint


def test_a_child_of_the_wrong_version_is_refused_by_the_loader() -> None:
    state, reset, _ = _loader_case()
    for child in ("reader", "shuffle", "packer"):
        bad = copy.deepcopy(state)
        bad["readers"]["0"][child]["version"] = 5
        with pytest.raises(ResumeMismatch, match=rf"readers\['0'\]\.{child} \({child} node\) version 5"):
            reset(bad)
