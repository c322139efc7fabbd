"""A consumed batch read a column at a time, and outputs produced a topic at a time, without a broker."""

from __future__ import annotations

from typing import Any

from confluent_kafka import Message

from kafeed.kafka import TransactionalProducer
from kafeed.stream import Output, Record, RecordBatch, TopicOutputs, positions
from kafeed.stream.records import BatchResult


def _messages() -> list[Message]:
    # Partitions interleaved and one of them out of offset order: positions take the highest.
    layout = [(0, 5), (1, 2), (0, 6), (2, 9), (1, 3), (0, 4)]
    return [Message(topic="raw", partition=p, offset=o, key=f"k{p}.{o}".encode(), value=b"v%d" % o,
                    headers=[("h", b"x")] if o == 9 else None, timestamp=(1, 1000 + o))
            for p, o in layout]


def test_a_batch_of_messages_gives_the_records_and_columns_they_hold() -> None:
    messages = _messages()
    batch = RecordBatch(messages, topic="raw")
    records = [Record("raw", m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()),
                      m.timestamp()[1]) for m in messages]
    assert batch[3] == records[3]  # one record, before the rest are built
    assert list(batch) == records and len(batch) == 6
    assert batch.keys() == [r.key for r in records]
    assert batch.values() == [r.value for r in records]
    assert [tuple(h or ()) for h in batch.headers()] == [r.headers for r in records]
    assert batch.positions() == positions(records) == {("raw", 0): 7, ("raw", 1): 4, ("raw", 2): 10}


def test_a_batch_of_records_reads_the_same_columns() -> None:
    records = [Record("raw", 0, 1, b"a", b"x"), Record("raw", 1, 0, None, None, (("h", b"1"),))]
    batch = RecordBatch.of(records)
    assert RecordBatch.of(batch) is batch
    assert (batch.keys(), batch.values()) == ([b"a", None], [b"x", None])
    assert batch.headers() == [(), (("h", b"1"),)]
    assert batch.positions() == {("raw", 0): 2, ("raw", 1): 1}
    assert list(batch) == records


def test_all_outputs_lists_single_outputs_then_columns() -> None:
    result = BatchResult()
    result.outputs.append(Output("one", b"k", b"v"))
    result.columns.append(TopicOutputs("two", [b"a", b"b"], [b"1", b"2"], [None, [("h", b"x")]]))
    assert [(o.topic, o.key, o.value, o.headers) for o in result.all_outputs()] == [
        ("one", b"k", b"v", ()), ("two", b"a", b"1", ()), ("two", b"b", b"2", (("h", b"x"),))]


class _FullOnce:
    """A client whose local queue is full once, at the ``full_at``-th call."""

    def __init__(self, full_at: int) -> None:
        self.calls = 0
        self.full_at = full_at
        self.produced: list[tuple[Any, ...]] = []
        self.polls = 0

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int = -1,
                **kw: Any) -> None:
        self.calls += 1
        if self.calls == self.full_at:
            raise BufferError("Local: Queue full")
        self.produced.append((topic, key, value, kw.get("headers")))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


def _producer(client: _FullOnce) -> TransactionalProducer:
    producer = TransactionalProducer.__new__(TransactionalProducer)
    producer._p = client
    return producer


def test_columns_are_produced_once_each_in_order_through_a_full_queue() -> None:
    keys = [b"k%d" % i for i in range(10)]
    values = [b"v%d" % i for i in range(10)]
    for full_at in (1, 4, 10):
        client = _FullOnce(full_at)
        _producer(client).produce_columns("t", keys, values)
        assert client.produced == [("t", k, v, None) for k, v in zip(keys, values, strict=True)], full_at
        assert client.calls == len(keys) + 1  # the refused call, then each record once


def test_columns_with_headers_keep_them() -> None:
    client = _FullOnce(0)
    _producer(client).produce_columns("t", [b"a", b"b"], [b"1", b"2"], [None, (("h", b"x"),)])
    assert client.produced == [("t", b"a", b"1", None), ("t", b"b", b"2", [("h", b"x")])]
