"""A partition's queue never passes queue_records, though one consume() call brings more of it
(a consumer that stands in for librdkafka, so the over-delivery is certain)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kafeed.loader.reader import KafkaReader
from kafeed.loader.settings import LoaderSettings
from kafeed.schema import make_document

CAP = 10
RECORDS = 100  # per partition


class Record:
    """What the reader reads of a confluent_kafka Message."""

    def __init__(self, topic: str, partition: int, offset: int, value: bytes) -> None:
        self._where = (topic, partition, offset)
        self._value = value

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._where[0]

    def partition(self) -> int:
        return self._where[1]

    def offset(self) -> int:
        return self._where[2]

    def value(self) -> bytes:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_000 + self._where[2]

    def __len__(self) -> int:
        return len(self._value)


class Consumer:
    """librdkafka as far as the cap is concerned: ``consume()`` hands out whole runs of each
    partition not paused, from its position on; a pause applies to later calls only and
    leaves the position after what was handed out (as librdkafka's does); seek moves it."""

    def __init__(self, logs: dict[tuple[str, int], list[bytes]]) -> None:
        self.logs = logs
        self.position = dict.fromkeys(logs, 0)
        self.paused: set[tuple[str, int]] = set()
        self.seeks: list[tuple[tuple[str, int], int]] = []

    def assign(self, tps: list[Any]) -> None:
        for tp in tps:
            self.position[(tp.topic, tp.partition)] = tp.offset

    def consume(self, num_messages: int, timeout: float) -> list[Record]:
        out: list[Record] = []
        for tp, values in self.logs.items():
            if tp in self.paused:
                continue
            while len(out) < num_messages and self.position[tp] < len(values):
                offset = self.position[tp]
                out.append(Record(*tp, offset, values[offset]))
                self.position[tp] = offset + 1
        return out

    def pause(self, tps: list[Any]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def resume(self, tps: list[Any]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}

    def seek(self, tp: Any) -> None:
        self.seeks.append(((tp.topic, tp.partition), tp.offset))
        self.position[(tp.topic, tp.partition)] = tp.offset


def _reader(consumer: Consumer) -> KafkaReader:
    settings = LoaderSettings(topics=("t",), seq_len=8, eos_id=0, queue_records=CAP, consume_batch=1000)
    reader = KafkaReader(settings, index=0, count=1)
    reader.load_plan({f"t:{p}": {"next": 0, "end": RECORDS, "delivered": [], "partial": {}} for p in (0, 1)})
    reader._consumer = consumer
    for p in (0, 1):
        reader._add_partition("t", p)
    reader._assign_all()
    return reader


def test_a_partition_never_holds_more_than_its_cap_and_nothing_is_lost_or_read_twice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    logs = {("t", p): [make_document(np.full(3, 100 * p + o + 1), id=f"{p}-{o}", vocab_size=65536)
                       .SerializeToString() for o in range(RECORDS)] for p in (0, 1)}
    consumer = Consumer(logs)
    reader = _reader(consumer)
    held: list[int] = []
    pull = reader._pull

    def pull_and_look(timeout: float) -> tuple[int, bool]:  # records enter the queues only here
        out = pull(timeout)
        held.append(max(len(p.queue) for p in reader.parts))
        return out

    monkeypatch.setattr(reader, "_pull", pull_and_look)
    taken: list[tuple[str, int]] = []
    while (item := reader.take()) is not None:
        ref, payload, _ = item
        assert int(payload[0]) == 100 * int(ref[0][-1]) + ref[1] + 1
        taken.append(ref)
        reader.delivered(ref)
    # Pulls brought up to a whole partition's rest at once; the reader kept CAP of it and
    # read the rest again from the first record it dropped.
    assert max(held) == CAP and consumer.seeks
    # Round-robin over the partitions, every record once; the state as if nothing was dropped.
    assert taken == [(f"t:{p}", o) for o in range(RECORDS) for p in (0, 1)]
    assert reader.state_dict()["partitions"] == {
        f"t:{p}": {"next": RECORDS, "read": RECORDS, "end": RECORDS, "delivered": []} for p in (0, 1)}
