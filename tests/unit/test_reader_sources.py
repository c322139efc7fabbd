"""The one reader over a source that implements kafeed.loader.sources.source.Source and nothing else:
a list in memory, its positions with gaps (as Kafka's transaction markers leave), handed out
interleaved or in turn. Every record reaches the batches once, in the source's order, and
the shared save/resume harness resumes it exactly, in the middle of a shard."""

from __future__ import annotations

import math
from operator import itemgetter
from typing import Any

import numpy as np
import pytest

from kafeed.loader.nodes.reader import ShardReader
from kafeed.loader.nodes.stream import TokenStream
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import assign, partition_key
from kafeed.loader.sources.partition import Partition
from kafeed.loader.sources.source import Shards
from kafeed.loader.state.resume import PartitionStart
from tests.stateful_harness import check_save_resume, piece_case

EOS = 0
SHARDS = 3
RECORDS = 30


def _position(shard: int, i: int) -> int:
    return 3 * i + shard % 2  # every third position, from 0 or 1: gaps between records


def _tokens(shard: int, i: int) -> np.ndarray:
    return np.full(1 + (i * 7 + shard) % 9, 1 + shard * RECORDS + i, dtype=np.int64)


class ListSource:
    """Records ``_tokens(shard, i)`` at ``_position(shard, i)``, a few at a time per fill."""

    check_s = math.inf

    def __init__(self, interleaved: bool, *, index: int = 0, count: int = 1) -> None:
        self.name = "mem"
        self.interleaved = interleaved
        self.index, self.count = index, count
        self.assigned, self.opened = True, False
        self.fills = 0
        self._records = {shard: [(_position(shard, i), _tokens(shard, i)) for i in range(RECORDS)]
                         for shard in range(SHARDS)}

    def open(self, shards: Shards) -> None:
        self.opened = True
        for name, shard in assign([(self.name, s) for s in range(SHARDS)], self.index, self.count):
            key = partition_key(name, shard)
            end = self._records[shard][-1][0] + 1
            start = shards.starts.get(key) or PartitionStart(next=0, read=0, end=end)
            part = Partition(key=key, topic=name, partition=shard, read=start.read, end=end,
                             delivered=set(start.delivered), partial=dict(start.partial),
                             restore=set(start.restore), in_flight=set(start.restore), seek=start.next,
                             decode=itemgetter(1))
            for position, tokens in self._records[shard]:
                if position in part.restore:
                    shards.restore((key, position), tokens)
            part.restore.clear()
            part.fetch_done = start.read >= end
            shards.add(part)

    def fill(self, wait: float, turn: Partition | None = None) -> int:
        if turn is None or turn.fetch_done:
            return 0
        self.fills += 1
        first = turn.queue[-1][0] + 1 if turn.queue else turn.read
        chunk = [(p, t, -1, 0, None) for p, t in self._records[turn.partition] if p >= first][:4]
        turn.queue.extend(chunk)
        if not chunk or chunk[-1][0] + 1 >= (turn.end or 0):
            turn.fetch_done = True
        return len(chunk)

    def wake(self, part: Partition) -> None:
        raise AssertionError("never paused")

    def taken(self, nbytes: int) -> None:
        raise AssertionError("no read-ahead: never called")

    def top_up(self, now: float) -> None:
        raise AssertionError("no read-ahead: never called")

    def check_decoded(self) -> None:
        pass

    def stop_on(self, stop: Any) -> None:
        pass

    def close(self) -> None:
        pass


def _settings(**kw: Any) -> LoaderSettings:
    return LoaderSettings(**{"topics": ("mem",), "seq_len": 7, "eos_id": EOS, "end": "latest", **kw})


def _stream(interleaved: bool, **kw: Any) -> TokenStream:
    settings = _settings(**kw)
    return TokenStream(settings, ShardReader(settings, ListSource(interleaved), index=0, count=1))


@pytest.mark.parametrize("interleaved", [True, False])
def test_every_record_once_in_the_sources_order(interleaved: bool) -> None:
    stream = _stream(interleaved)
    stream.open()
    batches = []
    while (batch := stream.next(2)) is not None:
        batches.append(batch["tokens"].reshape(-1))
    flat = np.concatenate(batches)
    docs = [int(v) for i, v in enumerate(flat) if v != EOS and (i == 0 or flat[i - 1] != v)]
    if interleaved:  # one record per shard in turn
        order = [1 + s * RECORDS + i for i in range(RECORDS) for s in range(SHARDS)]
    else:  # each shard to its end
        order = [1 + s * RECORDS + i for s in range(SHARDS) for i in range(RECORDS)]
    assert docs == order
    assert stream.stats()["records"] == SHARDS * RECORDS
    assert stream.stats()["tokens"] == sum(len(_tokens(s, i)) for s in range(SHARDS) for i in range(RECORDS))
    state = stream.state()["reader"]["partitions"]
    assert {key: p["read"] for key, p in state.items()} == {
        f"mem:{s}": _position(s, RECORDS - 1) + 1 for s in range(SHARDS)}


@pytest.mark.parametrize("interleaved", [True, False])
@pytest.mark.parametrize("first", [0, 5, 17])
def test_a_new_source_resumes_exactly_in_the_middle_of_a_shard(interleaved: bool, first: int) -> None:
    check_save_resume(piece_case(lambda: _stream(interleaved, shuffle_buffer=6, seed=2),
                                 lambda stream: stream.next(2)), first, 12)
