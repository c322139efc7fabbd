"""The drain's decision without a broker: ends, markers-only gaps, progress and the failure sentence."""

from __future__ import annotations

from collections.abc import Set

import pytest

from kafeed.config import ConnectionSettings
from kafeed.errors import DrainIncomplete
from kafeed.kafka import Drain
from kafeed.kafka.drain import Behind, stall_seconds


class Probed(Drain):
    """A drain whose ends are given and whose probe finds records only in ``with_records``."""

    def __init__(self, ends: dict[int, tuple[int, int]], with_records: Set[int]) -> None:
        super().__init__(ConnectionSettings(), "raw", what="kafeed prepare", group="g", stall_s=0.0)
        self.ends = ends
        self.with_records = with_records
        self.probed: list[list[int]] = []

    def _records_before_end(self, left: list[Behind]) -> set[int]:
        self.probed.append([b.partition for b in left])
        return {b.partition for b in left} & set(self.with_records)


def test_done_when_every_partition_reached_its_end_whoever_committed_it() -> None:
    drain = Probed({0: (0, 10), 1: (0, 0), 2: (4, 4)}, with_records={0})
    assert drain.done({0: 10}, assigned={0})
    assert drain.done({0: 12, 2: 1}, assigned=())  # an emptied partition is done with any position
    assert drain.probed == []


def test_a_gap_of_markers_only_is_done_and_probed_once() -> None:
    drain = Probed({0: (0, 10), 1: (0, 7)}, with_records=set())
    assert drain.done({0: 9, 1: 7}, assigned={0, 1})  # a commit marker at offset 9
    assert drain.done({0: 9, 1: 7}, assigned={0, 1})
    assert drain.probed == [[0]]


def test_a_partition_with_records_left_is_waited_for_then_named() -> None:
    drain = Probed({0: (0, 10), 1: (0, 20), 2: (0, 5)}, with_records={1, 2})
    assert not drain.done({0: 10, 1: 3}, assigned={0})  # first sight: the clock starts
    assert not drain.done({0: 10, 1: 8}, assigned={0})  # partition 1 moved: the clock starts again
    with pytest.raises(DrainIncomplete) as failed:
        drain.done({0: 10, 1: 8}, assigned={0, 2})
    message = str(failed.value)
    assert message.startswith("kafeed prepare: partitions 1 (at 8 of 20), 2 (at nothing of 5) of 'raw' "
                              "did not move for 0 s"), message
    assert "partition 1 (at 8 of 20) held by another member of group 'g'" in message
    assert "partition 2 (at nothing of 5) assigned here" in message
    assert "--group g" in message and "\n" not in message


def test_the_bound_is_a_few_session_timeouts_unless_set() -> None:
    assert stall_seconds(10_000) == 30.0
    assert stall_seconds(10_000, 2.5) == 2.5
