"""Bundles of worker items: taken apart in the order single items come, each item's state
kept only once it is handed out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import kafeed
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.workers import bundles, worker_start
from kafeed.loader.workers.bundles import bundle_size, bundled, unbundled

EOS = 0


def _round_robin(per_worker: list[list[str]]) -> list[str]:
    """DataLoader's order of single items: one per worker in turn, ended workers skipped."""
    out, queues = [], [list(items) for items in per_worker]
    while any(queues):
        for queue in queues:
            if queue:
                out.append(queue.pop(0))
    return out


@pytest.mark.parametrize("sizes", [[3, 3], [1, 4], [4, 1], [2, 3, 5]])
@pytest.mark.parametrize("counts", [[7, 7], [2, 9], [9, 0], [5, 1, 8]])
def test_bundles_are_taken_apart_in_the_order_of_single_items(sizes: list[int], counts: list[int]) -> None:
    workers = min(len(sizes), len(counts))
    items = [[f"w{w}-{i}" for i in range(counts[w])] for w in range(workers)]
    streams = [bundled(iter(items[w]), w, sizes[w]) for w in range(workers)]
    # DataLoader hands out one bundle per worker in turn, a worker dropped once it ended.
    order: list[tuple[int, list[str], bool]] = []
    live = list(range(workers))
    while live:
        for w in list(live):
            bundle = next(streams[w], None)
            if bundle is None:
                live.remove(w)
            else:
                order.append(bundle)
    assert all(len(b[1]) <= sizes[b[0]] for b in order)
    assert list(unbundled(order, workers)) == _round_robin(items)


def test_a_bundle_is_taken_only_when_its_worker_has_no_item_left() -> None:
    seen: list[int] = []

    def source() -> Iterator[tuple[int, list[str], bool]]:
        for n, bundle in enumerate([(0, ["a", "b"], False), (1, ["c"], False), (0, [], True), (1, [], True)]):
            seen.append(n)
            yield bundle

    items = unbundled(source(), 2)
    assert next(items) == "a" and seen == [0]
    assert next(items) == "c" and seen == [0, 1]
    assert next(items) == "b" and seen == [0, 1]
    assert list(items) == []


def test_each_item_is_readied_as_it_is_bundled_and_turned_back_as_it_is_handed_on() -> None:
    sent: list[int] = []
    received: list[int] = []

    def send(item: int) -> int:
        sent.append(item)
        return item * 10

    def receive(item: int) -> int:
        received.append(item)
        return item + 1

    streams = [bundled(iter([1, 2, 3]), 0, 2, send=send), bundled(iter([4]), 1, 2, send=send)]
    order = [next(streams[0]), next(streams[1]), *streams[0], *streams[1]]
    assert sent == [1, 2, 4, 3]
    items = unbundled(order, 2, receive=receive)
    assert next(items) == 11 and received == [10]  # one at a time, as handed on
    assert list(items) == [41, 21, 31] and received == [10, 40, 20, 30]


def test_a_bundle_that_is_not_full_goes_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundles, "WAIT_S", 0.0)
    assert [b[1] for b in bundled(iter([1, 2, 3]), 0, 8)] == [[1], [2], [3], []]


def test_an_error_goes_after_the_items_built_before_it() -> None:
    def items() -> Iterator[int]:
        yield 1
        raise ValueError("broken record")

    stream = bundled(items(), 0, 4)
    assert next(stream) == (0, [1], False)
    with pytest.raises(ValueError, match="broken record"):
        next(stream)


def test_bundle_size_bounded_by_bytes_and_one_on_a_live_topic() -> None:
    bounded = LoaderSettings(topics=("t",), seq_len=2048, eos_id=EOS)
    assert bundle_size(bounded, 8, packs=True) == 16  # 131 KB batches
    assert bundle_size(bounded, 32, packs=True) == 7  # 525 KB batches: 4 MB a bundle at most
    assert bundle_size(bounded, 256, packs=True) == 1  # 4 MB batches
    assert bundle_size(bounded, 8, packs=False) == bundles.BATCHES
    live = LoaderSettings(topics=("t",), seq_len=2048, eos_id=EOS, end=None)
    assert bundle_size(live, 8, packs=True) == 1


def _write(root: Path) -> None:
    rng = np.random.default_rng(0)
    rows = [[doc] * int(rng.integers(1, 40)) for doc in range(1, 151)]
    pq.write_table(pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32()))}),
                   root / "part-0.parquet", row_group_size=13)


def _loader(root: Path) -> kafeed.StreamLoader:
    dataset = kafeed.FileTokenDataset(root, seq_len=15, eos_id=EOS)
    return kafeed.StreamLoader(dataset, batch_size=4, num_workers=1, multiprocessing_context="fork")


def _tokens(batches: list[Any]) -> list[list[int]]:
    return [b["tokens"].tolist() for b in batches]


def test_the_state_is_the_last_batch_handed_out_not_the_last_received(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write(tmp_path)
    # Bundles of 4 items (the worker's first, state-only item and three batches), never cut short.
    monkeypatch.setattr(worker_start, "bundle_size", lambda *a, **k: 4)
    monkeypatch.setattr(bundles, "WAIT_S", 3600.0)
    whole = _tokens(list(_loader(tmp_path)))
    assert len(whole) > 6
    loader = _loader(tmp_path)
    it = iter(loader)
    got = [next(it), next(it)]  # the first two batches of a bundle of three received
    state = loader.state_dict()
    del it, got
    resumed = _loader(tmp_path)
    resumed.load_state_dict(state)
    # The third batch of that bundle next, not the first of the next bundle.
    assert _tokens(list(resumed)) == whole[2:]
