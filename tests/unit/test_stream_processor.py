"""The core's loop on FakeKafka (the boundary in memory, given as its clients): finish() and the purge."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import pytest

from kafeed.kafka import FakeKafka
from kafeed.kafka.types import KafkaError
from kafeed.stream import BatchResult, Output, Record, Stage, StreamProcessor, StreamSettings, StreamStats
from kafeed.topics import TopicAdmin

TOPIC = "in"


@pytest.fixture
def purge_waits(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Each ``TopicAdmin.delete_records`` call's ``wait``, in order (the call itself still runs)."""
    waits: list[bool] = []
    delete_records = TopicAdmin.delete_records

    def recording(self: TopicAdmin, name: str, before: Mapping[int, int], *, wait: bool = True) -> None:
        waits.append(wait)
        delete_records(self, name, before, wait=wait)

    monkeypatch.setattr(TopicAdmin, "delete_records", recording)
    return waits


class Recording(Stage[None]):
    """Echoes each record; finish() of the first batch waits until the second batch was processed."""

    name = "test"

    def __init__(self) -> None:
        self.done = threading.Event()  # set by _processor's check once the input is committed
        self.ends: dict[int, int] = {}
        self.fake: FakeKafka | None = None
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
        assert self.fake is not None
        group = self.fake.groups.get("g", {})
        if all(group.get((TOPIC, p), 0) >= end for p, end in self.ends.items()):
            self.done.set()

    def report(self, stats: StreamStats) -> None:
        return None


def _processor(stage: Recording, *, fail: Sequence[int] = (), overlap: bool = True,
               purge_s: float | None = None, partitions: int = 1, size: int = 30,
               per_call: int = 10) -> tuple[StreamProcessor[None], FakeKafka]:
    """A processor whose clients are FakeKafka's, its input ``partitions`` x ``size`` records,
    stopping once everything is committed; transactions numbered in ``fail`` fail to commit."""
    fake = FakeKafka()
    for name, count in ((TOPIC, partitions), ("out", 1), ("in.dlq", 1)):
        fake.create_topic(name, count)
    producer = fake.producer()
    for p in range(partitions):
        for o in range(size):
            producer.produce(TOPIC, b"%d:%d" % (p, o), b"k", partition=p)
    for n in fail:
        fake.fail("commit_transaction", KafkaError._STATE, nth=n, txn_requires_abort=True)
    settings = StreamSettings(inputs=(TOPIC,), outputs=("out",), group="g", dlq_topic="in.dlq",
                              purge_input_every_s=purge_s, instance="test",
                              kafka={"batch_size": per_call, "poll_records": per_call,  # type: ignore[arg-type]
                                     "overlap_commit": overlap, "consume_timeout_s": 0.2})
    stage.fake, stage.ends = fake, dict.fromkeys(range(partitions), size)
    proc: StreamProcessor[None] = StreamProcessor(stage, settings, fake.connection, stop_event=stage.done,
                                                  clients=fake)
    return proc, fake


def test_finish_runs_on_the_commit_thread_while_the_next_batch_is_processed() -> None:
    stage = Recording()
    proc, fake = _processor(stage)
    proc.run()
    assert stage.overlapped is True
    assert stage.finished_on and all(name.startswith("kafeed-commit") for name in stage.finished_on)
    assert stage.committed_outputs == [1, 1, 1]  # what finish() added was committed, for each batch
    assert len(fake.records("out", 0)) == 3
    assert fake.transactions == [{(TOPIC, 0): 10}, {(TOPIC, 0): 20}, {(TOPIC, 0): 30}]


def test_an_idle_consume_does_not_wait_for_the_commit_in_flight() -> None:
    stage = Recording()
    proc, fake = _processor(stage)
    fake.stall("consume", nth=(2, 3))  # after the first batch the input is idle for a while
    proc.run()
    assert stage.overlapped is True  # the second batch was processed while the first committed
    assert stage.committed_outputs == [1, 1, 1]
    assert fake.transactions == [{(TOPIC, 0): 10}, {(TOPIC, 0): 20}, {(TOPIC, 0): 30}]


def test_finish_runs_inline_without_overlap() -> None:
    stage = Recording()
    stage.overlapped = False  # nothing to wait for: the main thread runs the batches one by one
    proc, fake = _processor(stage, overlap=False)
    proc.run()
    assert set(stage.finished_on) == {threading.current_thread().name}
    assert stage.committed_outputs == [1, 1, 1]
    assert len(fake.transactions) == 3


def test_purge_deletes_only_committed_positions() -> None:
    stage = Recording()
    # The second transaction fails: its batch (and the third, processed meanwhile) is read again.
    proc, fake = _processor(stage, fail=[2], purge_s=0.001, partitions=2, size=20)
    proc.run()
    assert proc.counters.aborted_batches == 1
    assert fake.transactions[-1] == {(TOPIC, 1): 20}
    assert fake.deletions, "nothing was purged"
    for name, before, commits in fake.deletions:
        assert name == TOPIC
        done = fake.transactions[:commits]
        for partition, offset in before.items():
            # Never beyond what had committed when the request was sent.
            assert offset <= max(c.get((TOPIC, partition), 0) for c in done)
    purged: dict[int, int] = {}
    for _, before, _ in fake.deletions:
        for partition, offset in before.items():
            purged[partition] = max(purged.get(partition, 0), offset)
    assert purged == {0: 20, 1: 20}  # everything committed was purged in the end


def test_a_long_purge_interval_purges_once_at_the_end(purge_waits: list[bool]) -> None:
    proc, fake = _processor(Recording(), purge_s=3600, partitions=2, size=20)
    proc.run()
    assert len(fake.transactions) == 4
    assert fake.deletions == [(TOPIC, {0: 20, 1: 20}, 4)]
    assert purge_waits == [True]  # and it waits for the broker's answer


def test_no_purge_unless_asked() -> None:
    proc, fake = _processor(Recording())
    proc.run()
    assert fake.deletions == []
