"""The core's loop against in-memory fakes of the consumer, producer and admin: finish() and the purge."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from kafeed.config import ConnectionSettings
from kafeed.stream import BatchResult, Output, Record, Stage, StreamProcessor, StreamSettings, StreamStats

TOPIC = "in"


class FakeMessage:
    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"%d:%d" % (self._partition, self._offset)

    def headers(self) -> None:
        return None

    def timestamp(self) -> tuple[int, int]:
        return (0, 0)


class FakeConsumer:
    """Partitions of ``size`` records, ``per_call`` records per consume; seek rewinds; stops when read out."""

    def __init__(self, partitions: int, size: int, per_call: int, stop: threading.Event) -> None:
        self.ends = dict.fromkeys(range(partitions), size)
        self.pos = dict.fromkeys(range(partitions), 0)
        self.per_call = per_call
        self.stop = stop
        self.calls = 0
        self.empty_calls: set[int] = set()  # these calls return nothing, as when the input is idle

    def consume(self, num_messages: int, timeout: float) -> list[FakeMessage]:
        self.calls += 1
        if self.calls in self.empty_calls:
            return []
        for p, end in self.ends.items():
            if self.pos[p] < end:
                start, self.pos[p] = self.pos[p], min(end, self.pos[p] + min(num_messages, self.per_call))
                return [FakeMessage(p, o) for o in range(start, self.pos[p])]
        self.stop.set()
        return []

    def seek(self, tp: Any) -> None:
        self.pos[tp.partition] = tp.offset

    def consumer_group_metadata(self) -> str:
        return "group-metadata"


class FakeProducer:
    """Records calls per thread; the transactions listed in ``fail`` raise an abortable error on commit."""

    def __init__(self, fail: Sequence[int] = ()) -> None:
        self.fail = set(fail)
        self.transactions = 0
        self.committed: list[dict[tuple[str, int], int]] = []
        self.begun_on: list[str] = []
        self._offsets: dict[tuple[str, int], int] = {}

    def begin(self) -> None:
        self.begun_on.append(threading.current_thread().name)

    def produce_many(self, outputs: Sequence[Output]) -> None:
        pass

    def send_offsets(self, positions: Mapping[tuple[str, int], int], metadata: Any) -> None:
        self._offsets = dict(positions)

    def commit(self) -> None:
        self.transactions += 1
        if self.transactions in self.fail:
            raise KafkaException(KafkaError(KafkaError._STATE, "injected", txn_requires_abort=True))
        self.committed.append(self._offsets)

    def recover(self, exc: BaseException) -> bool:
        return False


class FakeAdmin:
    def __init__(self, producer: FakeProducer) -> None:
        self.producer = producer
        self.calls: list[tuple[str, dict[int, int], bool, int]] = []

    def delete_records(self, name: str, before: Mapping[int, int], *, wait: bool = True) -> None:
        # With the number of transactions committed so far, to check nothing ran ahead of them.
        self.calls.append((name, dict(before), wait, len(self.producer.committed)))


class Recording(Stage[None]):
    """Echoes each record; finish() of the first batch waits until the second batch was processed."""

    name = "test"

    def __init__(self) -> None:
        self.processed = 0
        self.second_processed = threading.Event()
        self.overlapped: bool | None = None
        self.finished_on: list[str] = []
        self.committed_outputs: list[int] = []

    def process(self, records: Sequence[Record]) -> BatchResult:
        self.processed += 1
        if self.processed == 2:
            self.second_processed.set()
        return BatchResult()  # outputs are added by finish(), as a tokenizing stage does

    def finish(self, result: BatchResult) -> None:
        self.finished_on.append(threading.current_thread().name)
        if self.overlapped is None:
            self.overlapped = self.second_processed.wait(timeout=30)
        result.outputs.append(Output("out", b"k", b"v"))

    def committed(self, result: BatchResult) -> None:
        self.committed_outputs.append(len(result.outputs))

    def report(self, stats: StreamStats) -> None:
        return None


def _processor(stage: Stage[None], *, fail: Sequence[int] = (), overlap: bool = True,
               purge_s: float | None = None, partitions: int = 1, size: int = 30,
               per_call: int = 10) -> tuple[StreamProcessor[None], FakeProducer, FakeAdmin, FakeConsumer]:
    settings = StreamSettings(input=TOPIC, outputs=("out",), group="g", dlq_topic="in.dlq",
                              purge_input_every_s=purge_s,
                              kafka={"batch_size": per_call, "poll_records": per_call,  # type: ignore[arg-type]
                                     "overlap_commit": overlap})
    proc: StreamProcessor[None] = StreamProcessor(stage, settings, ConnectionSettings())
    producer = FakeProducer(fail)
    admin = FakeAdmin(producer)
    consumer = FakeConsumer(partitions, size, per_call, proc.stop_event)
    proc.producer, proc._admin, proc._consumer = producer, admin, consumer  # type: ignore[assignment]
    proc._assigned = set(range(partitions))
    return proc, producer, admin, consumer


def test_finish_runs_on_the_commit_thread_while_the_next_batch_is_processed() -> None:
    stage = Recording()
    proc, producer, _, _ = _processor(stage)
    proc._loop(False, None)
    assert stage.overlapped is True
    assert stage.finished_on and all(name.startswith("kafeed-commit") for name in stage.finished_on)
    assert producer.begun_on == stage.finished_on  # finish() came before the transaction began
    assert stage.committed_outputs == [1, 1, 1]  # what finish() added was committed, for each batch
    assert producer.committed == [{(TOPIC, 0): 10}, {(TOPIC, 0): 20}, {(TOPIC, 0): 30}]


def test_an_idle_consume_does_not_wait_for_the_commit_in_flight() -> None:
    stage = Recording()
    proc, producer, _, consumer = _processor(stage)
    consumer.empty_calls = {2, 3}  # after the first batch the input is idle for a while
    proc._loop(False, None)
    assert stage.overlapped is True  # the second batch was processed while the first committed
    assert stage.committed_outputs == [1, 1, 1]
    assert producer.committed == [{(TOPIC, 0): 10}, {(TOPIC, 0): 20}, {(TOPIC, 0): 30}]


def test_finish_runs_inline_without_overlap() -> None:
    stage = Recording()
    stage.overlapped = False  # nothing to wait for: the main thread runs the batches one by one
    proc, producer, _, _ = _processor(stage, overlap=False)
    proc._loop(False, None)
    assert set(stage.finished_on) == {threading.current_thread().name}
    assert producer.begun_on == stage.finished_on
    assert stage.committed_outputs == [1, 1, 1]


def test_purge_deletes_only_committed_positions() -> None:
    stage = Recording()
    # The second transaction fails: its batch (and the third, processed meanwhile) is read again.
    proc, producer, admin, _ = _processor(stage, fail=[2], purge_s=0.001, partitions=2, size=20)
    proc._loop(False, None)
    assert proc.counters.aborted_batches == 1
    assert producer.committed[-1] == {(TOPIC, 1): 20}
    assert admin.calls, "nothing was purged"
    for name, before, _, commits in admin.calls:
        assert name == TOPIC
        done = producer.committed[:commits]
        for partition, offset in before.items():
            # Never beyond what had committed when the request was sent.
            assert offset <= max(c.get((TOPIC, partition), 0) for c in done)
    purged: dict[int, int] = {}
    for _, before, _, _ in admin.calls:
        for partition, offset in before.items():
            purged[partition] = max(purged.get(partition, 0), offset)
    assert purged == {0: 20, 1: 20}  # everything committed was purged in the end


def test_a_long_purge_interval_purges_once_at_the_end() -> None:
    proc, producer, admin, _ = _processor(Recording(), purge_s=3600, partitions=2, size=20)
    proc._loop(False, None)
    assert len(producer.committed) == 4
    assert admin.calls == [(TOPIC, {0: 20, 1: 20}, True, 4)]  # and it waits for the broker's answer


def test_no_purge_unless_asked() -> None:
    proc, _, admin, _ = _processor(Recording())
    proc._loop(False, None)
    assert admin.calls == []
