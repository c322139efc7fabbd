"""Shared batch slots: what a worker puts is what the main process hands out, and a slot is
reused only once nothing holds its batch."""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection

import torch

from kafeed.loader.workers.shared_slots import SPARE, SharedSlots, SlotRef


def _pool(boundaries: bool = False) -> SharedSlots:
    return SharedSlots(workers=2, depth=1, batch_size=3, window=5, boundaries=boundaries)


def _batch(seed: int, rows: int = 3) -> dict[str, torch.Tensor]:
    tokens = torch.arange(rows * 5, dtype=torch.int64).reshape(rows, 5) + seed
    return {"tokens": tokens, "doc_start": tokens % 2 == 0}


def _put_in_child(slots: SharedSlots, out: Connection) -> None:
    out.send([slots.put(1, _batch(100)), slots.put(1, _batch(200, rows=2))])


def test_a_batch_put_in_another_process_arrives_through_its_slot() -> None:
    slots = _pool(boundaries=True)
    recv, send = multiprocessing.get_context("fork").Pipe(duplex=False)
    child = multiprocessing.get_context("fork").Process(target=_put_in_child, args=(slots, send))
    child.start()
    refs = recv.recv()
    child.join(30)
    assert child.exitcode == 0
    assert refs == [SlotRef(0, 3), SlotRef(1, 2)]
    full, short = (slots.take(1, ref) for ref in refs)
    assert torch.equal(full["tokens"], _batch(100)["tokens"])
    assert torch.equal(full["doc_start"], _batch(100)["doc_start"])
    assert torch.equal(short["tokens"], _batch(200, rows=2)["tokens"])
    assert short["doc_start"].shape == (2, 5)


def test_a_slot_is_reused_only_after_the_batch_and_its_views_are_dropped() -> None:
    slots = _pool()
    ref = slots.put(0, _batch(1))
    assert ref is not None
    batch = slots.take(0, ref)
    labels = batch["tokens"][:, 1:]
    del batch
    slots.release_dropped()
    assert slots.held() == 1  # the view still holds the slot
    # Every other slot of the worker can be taken, never the held one.
    others = [slots.put(0, _batch(n)) for n in range(SPARE)]
    assert None not in others and ref.slot not in {r.slot for r in others if r is not None}
    assert slots.put(0, _batch(9)) is None  # none free: the caller sends the batch itself
    assert torch.equal(labels, _batch(1)["tokens"][:, 1:])
    del labels
    slots.release_dropped()
    assert slots.held() == 0
    again = slots.put(0, _batch(7))
    assert again is not None and again.slot == ref.slot


def test_a_batch_that_does_not_fit_a_slot_is_sent_itself() -> None:
    slots = _pool()
    assert slots.put(0, {"tokens": torch.zeros((4, 5), dtype=torch.int64)}) is None
    assert slots.put(0, {"tokens": torch.zeros((3, 6), dtype=torch.int64)}) is None
