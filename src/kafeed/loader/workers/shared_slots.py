"""Token batches from DataLoader workers through reused shared-memory slots.

DataLoader sends a worker's tensor to the main process by moving it into a fresh
shared-memory segment and passing its file descriptor: per batch a segment created and
mapped twice, and a new authenticated socket connection to the worker's resource sharer.
Profiled with two workers that was most of the main process's time (72 ns of CPU per
token, against 10 for the whole in-process loader), and most of the workers' too.

Here the main process makes, before the workers start, one shared block of token slots
(:class:`SharedSlots`: ``(workers, slots, batch_size, window)``, sent to each worker once with
the batch view, a file descriptor whatever the number of workers) and one byte per slot
saying who has it. A worker copies its batch into a free slot, marks it taken and sends
only ``(slot, rows)`` (:class:`SlotRef`); the main process hands out a tensor over that slot.
A slot is free again once nothing holds its batch: the caller dropped the batch and its
views (the numpy view the tensor was made from is gone, see :meth:`SharedSlots.take`). A
caller that keeps its batches (``list(loader)``) keeps their slots; when a worker finds none
free it sends its batch the ordinary way, so nothing waits and nothing is overwritten.

Nothing here knows about Kafka.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

FREE, TAKEN = 0, 1
SPARE = 4  # slots per worker beyond its prefetch depth: the caller's batch, views not yet dropped


@dataclass(frozen=True)
class SlotRef:
    """What a worker sends in place of a batch it put in slot ``slot`` (``rows`` windows)."""

    slot: int
    rows: int


def _shared(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    tensor = torch.zeros(shape, dtype=dtype)
    tensor.share_memory_()  # type: ignore[no-untyped-call]
    return tensor


class SharedSlots:
    """Per worker, ``depth + SPARE`` (batch_size, window) int64 token slots (and bool
    ``doc_start`` slots with ``boundaries``), in one shared block each, and who holds each.

    One block, not a tensor per slot: each shared tensor reaches a worker as a file
    descriptor, and multiprocessing sends a new process fewer than 256 of them, which eight
    workers' slots went past ("too many fds")."""

    def __init__(self, *, workers: int, depth: int, batch_size: int, window: int, boundaries: bool) -> None:
        shape = (workers, depth + SPARE, batch_size, window)
        self._setup(_shared(shape, torch.int64), _shared(shape, torch.bool) if boundaries else None,
                    _shared(shape[:2], torch.uint8))

    def _setup(self, tokens: torch.Tensor, starts: torch.Tensor | None, owner: torch.Tensor) -> None:
        self.tokens, self.starts, self.owner = tokens, starts, owner
        # The same bytes as numpy arrays: numpy indexes and copies a slot faster than torch.
        self._tokens = tokens.numpy()
        self._starts = None if starts is None else starts.numpy()
        self._owner = owner.numpy()
        self._next = 0  # the slot a worker tries first (each worker has its own copy)
        # Main process: the slots whose batches are out, each with the numpy views its
        # tensors were made from (see take).
        self._held: dict[tuple[int, int], tuple[weakref.ref[np.ndarray], ...]] = {}

    def __getstate__(self) -> dict[str, Any]:
        # The blocks travel by their shared storage; what the main process tracks does not.
        return {"tokens": self.tokens, "starts": self.starts, "owner": self.owner}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["tokens"], state["starts"], state["owner"])

    # -- in a worker ----------------------------------------------------------------------------
    def put(self, worker: int, batch: dict[str, torch.Tensor]) -> SlotRef | None:
        """Copy ``batch`` into a free slot of ``worker`` and take it; None when none is free
        (or the batch does not fit one): send the batch itself then."""
        tokens = batch["tokens"]
        mine = self._tokens[worker]
        count, height, width = mine.shape[:3]
        if tokens.dim() != 2 or tokens.shape[0] > height or tokens.shape[1] != width:
            return None
        owner = self._owner[worker]
        for step in range(count):
            slot = (self._next + step) % count
            if owner[slot] == FREE:
                break
        else:
            return None
        rows = tokens.shape[0]
        mine[slot, :rows] = tokens.numpy()
        starts = batch.get("doc_start")
        if self._starts is not None and starts is not None:
            self._starts[worker, slot, :rows] = starts.numpy()
        owner[slot] = TAKEN
        self._next = (slot + 1) % count
        return SlotRef(slot, rows)

    # -- in the main process --------------------------------------------------------------------
    def take(self, worker: int, ref: SlotRef) -> dict[str, torch.Tensor]:
        """The batch a worker put in ``ref``'s slot, as tensors over it: the slot stays taken
        until the caller drops them and every view of them (see :meth:`release_dropped`).

        Each tensor is made from a numpy view of its slot, which the tensor's storage keeps
        alive, and so does every view of the tensor (``input_ids``, ``labels``): that numpy
        view is gone only once all of them are."""
        tokens = self._tokens[worker, ref.slot, : ref.rows]
        batch = {"tokens": torch.from_numpy(tokens)}
        views = [tokens]
        if self._starts is not None:
            starts = self._starts[worker, ref.slot, : ref.rows]
            batch["doc_start"] = torch.from_numpy(starts)
            views.append(starts)
        self._held[(worker, ref.slot)] = tuple(weakref.ref(view) for view in views)
        return batch

    def release_dropped(self) -> None:
        """Give back to their workers the slots whose batches nobody holds any more."""
        held = self._held
        for key, views in list(held.items()):
            if all(view() is None for view in views):
                del held[key]
                self._owner[key] = FREE

    def held(self) -> int:
        """Slots whose batches are still out (or not yet seen dropped)."""
        return len(self._held)
