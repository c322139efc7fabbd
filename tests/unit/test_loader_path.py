"""One batch's path from the stream to the caller's loop: the calls between the two, as
docs/loader.md counts them ("One record's path, fetch to batch", steps 5-7), and the token
views made where the batch is pinned or taken from its shared slot."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

import kafeed
from kafeed.loader.batch_view import from_slot, pinned
from kafeed.loader.nodes.delivered import Delivered
from kafeed.loader.nodes.stream import TokenStream
from kafeed.loader.workers.shared_slots import SharedSlots

SEQ_LEN = 15
# Between the stream's next and the caller: step 5, then step 7 in the caller's loop.
BUILT_BY_THE_CALLER = ["iter_batches", "_handed_out"]
# Step 5 on the prefetch thread (the thread's loop is prefetch.run), or on the caller's
# thread once it builds its batches itself: step 6 (Prefetch.__next__ / take / _make), then 7.
BUILT_ON_THE_THREAD = ["iter_batches", "run"]
BUILT_INLINE = ["iter_batches", "_make", "take", "__next__", "_handed_out"]


def _files(root: Path) -> None:
    rows = [[doc] * (5 + doc % 30) for doc in range(1, 200)]
    table = pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32()))})
    pq.write_table(table, root / "part-0.parquet", row_group_size=50)


def _spy(monkeypatch: pytest.MonkeyPatch, until: str) -> list[tuple[bool, list[str]]]:
    """Each TokenStream.next call's callers, innermost first, up to the frame of ``until`` or a
    thread's first frame; with whether it ran on a thread of its own."""
    calls: list[tuple[bool, list[str]]] = []
    original = TokenStream.next

    def spied(self: TokenStream, batch_size: int) -> Any:
        names = []
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != until:
            names.append(frame.f_code.co_name)
            if frame.f_code.co_name == "run":
                break
            frame = frame.f_back
        calls.append((threading.current_thread() is not threading.main_thread(), names))
        return original(self, batch_size)

    monkeypatch.setattr(TokenStream, "next", spied)
    return calls


def test_a_batch_built_when_asked_crosses_the_dataset_and_the_loader_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _files(tmp_path)
    calls = _spy(monkeypatch, "test_a_batch_built_when_asked_crosses_the_dataset_and_the_loader_only")
    dataset = kafeed.FileTokenDataset(tmp_path, seq_len=SEQ_LEN, eos_id=0, prefetch_batches=0)
    batches = list(kafeed.StreamLoader(dataset, batch_size=4))
    assert len(batches) > 3 and len(calls) == len(batches) + 1  # the last call finds the end
    assert all(not threaded and names == BUILT_BY_THE_CALLER for threaded, names in calls), calls
    batch = batches[0]
    assert torch.equal(batch["input_ids"], batch["tokens"][:, :-1])
    assert batch["labels"]._base is batch["tokens"]


def test_a_prefetched_batch_crosses_the_hand_over_and_the_loader_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _files(tmp_path)
    calls = _spy(monkeypatch, "test_a_prefetched_batch_crosses_the_hand_over_and_the_loader_only")
    dataset = kafeed.FileTokenDataset(tmp_path, seq_len=SEQ_LEN, eos_id=0, prefetch_batches=2)
    loader = kafeed.StreamLoader(dataset, batch_size=2)
    batches = list(loader)
    assert len(batches) > 20
    on_thread = [names for threaded, names in calls if threaded]
    inline = [names for threaded, names in calls if not threaded]
    # A loop that only reads comes straight back: the thread builds the first batches,
    # then hands its iterator to the caller (kafeed.loader.workers.prefetch).
    assert on_thread and all(names == BUILT_ON_THE_THREAD for names in on_thread), on_thread
    assert inline and all(names == BUILT_INLINE for names in inline), inline
    assert batches[0]["labels"]._base is batches[0]["tokens"] and loader.prefetched == 0


def _item(batch: Any) -> Any:
    return (0, batch, {}, Delivered())


def test_a_pinned_batch_is_viewed_after_its_pinning(monkeypatch: pytest.MonkeyPatch) -> None:
    # No accelerator here: pinning is a copy as far as the views can tell.
    monkeypatch.setattr(torch.Tensor, "pin_memory", lambda self: self.clone())
    tokens = torch.arange(12).reshape(2, 6)
    (_, batch, _, _), = pinned(iter([_item({"tokens": tokens})]), views=True)
    assert batch["tokens"] is not tokens and torch.equal(batch["tokens"], tokens)
    assert batch["input_ids"]._base is batch["tokens"] and batch["labels"]._base is batch["tokens"]
    (_, plain, _, _), = pinned(iter([_item({"tokens": tokens})]), views=False)
    assert set(plain) == {"tokens"}


def test_a_batch_from_its_slot_is_viewed_and_its_slot_held_by_the_views() -> None:
    slots = SharedSlots(workers=1, depth=1, batch_size=2, window=6, boundaries=False)
    tokens = torch.arange(12).reshape(2, 6)
    ref = slots.put(0, {"tokens": tokens})
    assert ref is not None
    _, batch, _, _ = from_slot(slots, False, True, _item(ref))
    assert torch.equal(batch["input_ids"], tokens[:, :-1]) and torch.equal(batch["labels"], tokens[:, 1:])
    labels = batch["labels"]
    del batch
    slots.release_dropped()
    assert slots.held() == 1  # the labels view still reads the slot
    del labels
    slots.release_dropped()
    assert slots.held() == 0
