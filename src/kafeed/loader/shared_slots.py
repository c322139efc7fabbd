"""Token batches from DataLoader workers through reused shared-memory slots.

DataLoader sends a worker's tensor to the main process by moving it into a fresh
shared-memory segment and passing its file descriptor: per batch a segment created and
mapped twice, and a new authenticated socket connection to the worker's resource sharer.
Profiled with two workers that was most of the main process's time (72 ns of CPU per
token, against 10 for the whole in-process loader), and most of the workers' too.

Here the main process makes, before the workers start, a few shared tensors per worker
(:class:`SharedSlots`, sent to each worker once with the batch view) and one byte per slot
saying who has it. A worker copies its batch into a free slot, marks it taken and sends
only ``(slot, rows)`` (:class:`SlotRef`); the main process hands out a view of that slot.
A slot is free again once nothing outside the pool holds its storage: the caller dropped
the batch and its views (the storage's use count is back to the pool's own). A caller
that keeps its batches (``list(loader)``) keeps their slots; when a worker finds none
free it sends its batch the ordinary way, so nothing waits and nothing is overwritten.

Nothing here knows about Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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


def _use_count(storage: torch.UntypedStorage) -> int:
    return int(torch._C._storage_Use_Count(storage._cdata))


class SharedSlots:
    """Per worker, ``depth + SPARE`` shared (batch_size, window) int64 token slots (and
    bool ``doc_start`` slots with ``boundaries``), and who holds each."""

    def __init__(self, *, workers: int, depth: int, batch_size: int, window: int, boundaries: bool) -> None:
        count = depth + SPARE
        shape = (batch_size, window)
        tokens = [[_shared(shape, torch.int64) for _ in range(count)] for _ in range(workers)]
        starts = ([[_shared(shape, torch.bool) for _ in range(count)] for _ in range(workers)]
                  if boundaries else None)
        self._setup(tokens, starts, _shared((workers, count), torch.uint8))

    def _setup(self, tokens: list[list[torch.Tensor]], starts: list[list[torch.Tensor]] | None,
               owner: torch.Tensor) -> None:
        self.tokens, self.starts, self.owner = tokens, starts, owner
        self._owner = owner.numpy()  # the same bytes; numpy reads one faster than torch
        self._next = 0  # the slot a worker tries first (each worker has its own copy)
        # Main process: the storages of each slot (one wrapper each, made once) and their use
        # count with nothing but the pool holding them; the slots whose batches are out.
        self._storages: dict[tuple[int, int], tuple[list[torch.UntypedStorage], int]] = {}
        self._held: set[tuple[int, int]] = set()

    def __getstate__(self) -> dict[str, Any]:
        # The tensors travel by their shared storage; what the main process tracks does not.
        return {"tokens": self.tokens, "starts": self.starts, "owner": self.owner}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._setup(state["tokens"], state["starts"], state["owner"])

    # -- in a worker ----------------------------------------------------------------------------
    def put(self, worker: int, batch: dict[str, torch.Tensor]) -> SlotRef | None:
        """Copy ``batch`` into a free slot of ``worker`` and take it; None when none is free
        (or the batch does not fit one): send the batch itself then."""
        tokens = batch["tokens"]
        mine = self.tokens[worker]
        if tokens.dim() != 2 or tokens.shape[0] > mine[0].shape[0] or tokens.shape[1] != mine[0].shape[1]:
            return None
        owner = self._owner[worker]
        count = len(mine)
        for step in range(count):
            slot = (self._next + step) % count
            if owner[slot] == FREE:
                break
        else:
            return None
        rows = tokens.shape[0]
        mine[slot][:rows].copy_(tokens)
        starts = batch.get("doc_start")
        if self.starts is not None and starts is not None:
            self.starts[worker][slot][:rows].copy_(starts)
        owner[slot] = TAKEN
        self._next = (slot + 1) % count
        return SlotRef(slot, rows)

    # -- in the main process --------------------------------------------------------------------
    def take(self, worker: int, ref: SlotRef) -> dict[str, torch.Tensor]:
        """The batch a worker put in ``ref``'s slot, as views of it: the slot stays taken
        until the caller drops them (see :meth:`release_dropped`)."""
        key = (worker, ref.slot)
        tokens = self.tokens[worker][ref.slot]
        starts = None if self.starts is None else self.starts[worker][ref.slot]
        if key not in self._storages:
            storages = [t.untyped_storage() for t in (tokens, starts) if t is not None]
            self._storages[key] = storages, sum(_use_count(s) for s in storages)
        self._held.add(key)
        # Always new views, never the pool's own tensors: each one counts as a holder.
        batch = {"tokens": tokens[: ref.rows]}
        if starts is not None:
            batch["doc_start"] = starts[: ref.rows]
        return batch

    def release_dropped(self) -> None:
        """Give back to their workers the slots whose batches nobody holds any more."""
        for key in list(self._held):
            storages, alone = self._storages[key]
            if sum(_use_count(s) for s in storages) <= alone:
                self._held.discard(key)
                self._owner[key] = FREE

    def held(self) -> int:
        """Slots whose batches are still out (or not yet seen dropped)."""
        return len(self._held)
