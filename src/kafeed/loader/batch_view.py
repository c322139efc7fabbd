"""What StreamLoader's DataLoader iterates, and the steps each batch takes to the caller.

:class:`BatchView` is the dataset's batches plus their states, as ``(worker, batch, state,
delivered)`` items; in a worker, token batches go into the shared slots when it has some
(kafeed.loader.workers.shared_slots) as they are bundled, and the items cross in bundles of
``bundle`` (kafeed.loader.workers.bundles). In the main process :func:`from_slot` turns a slot
reference back into its batch as the bundle is taken apart, and on the prefetch thread the
:func:`pinned` generator copies batches to pinned memory; each gives a token batch its views
when asked (without them, the dataset makes them as it builds the batch).
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import IterableDataset, get_worker_info

from kafeed.loader.dataset import Collate, KafkaDatasetBase, token_batch
from kafeed.loader.nodes.stream import Delivered
from kafeed.loader.workers.bundles import bundled
from kafeed.loader.workers.deferred_entry import DeferredEntry, built
from kafeed.loader.workers.shared_slots import SharedSlots, SlotRef

Item = tuple[int, Any, Any, Delivered]


class BatchView(IterableDataset[Any]):
    """The dataset's batches plus their states; ``slots``: where workers put token batches;
    ``bundle``: items a worker sends in one DataLoader item (kafeed.loader.workers.bundles)."""

    def __init__(self, dataset: KafkaDatasetBase, batch_size: int, next_worker: int,
                 collate: Collate | None, slots: SharedSlots | None = None) -> None:
        super().__init__()
        self.dataset = dataset
        self.batch_size = batch_size
        self.next_worker = next_worker
        self.collate = collate
        self.slots = slots
        self.bundle = 1
        self.origin = os.getpid()  # taken in the main process, read in the workers

    def __iter__(self) -> Iterator[Any]:
        items = self.batches()
        info = get_worker_info()
        if info is None:
            return items
        slots = self.slots
        if slots is None:
            return bundled(items, info.id, self.bundle)
        return bundled(items, info.id, self.bundle, send=functools.partial(_into_slot, slots))

    def batches(self, stop: threading.Event | None = None, pin: bool = False,
                views: bool = False) -> Iterator[Item]:
        """The items; ``stop`` ends them from another thread (the prefetch thread's reader
        watches it); ``pin``: tensors of a batch dict in pinned memory; ``views``: token
        batches with their ``input_ids`` and ``labels`` views (made after pinning)."""
        worker = self.dataset.topology().worker
        items = self.dataset.iter_batches(self.batch_size, skip_first=worker < self.next_worker,
                                          origin=self.origin, collate=self.collate, stop=stop,
                                          views=views and not pin)
        return pinned(items, views) if pin else items


def entry_data(entry: bytes | dict[str, Any] | DeferredEntry) -> Any:
    """A reader entry kept for the state (a worker's packed one, or the main process's
    entry, a mixture's deferred) as fresh JSON data."""
    return json.loads(json.dumps(built(entry)))


def _closing(source: Iterator[Any]) -> None:
    close = getattr(source, "close", None)
    if close is not None:
        close()


def _into_slot(slots: SharedSlots, item: Item) -> Item:
    """In a worker: a token batch copied into a free shared slot and sent as its
    :class:`SlotRef`, or sent itself when no slot is free."""
    worker, batch, state, delivered = item
    if not isinstance(batch, dict):
        return item
    return worker, slots.put(worker, batch) or batch, state, delivered


def from_slot(slots: SharedSlots, pin: bool, views: bool, item: Item) -> Item:
    """In the main process: a :class:`SlotRef` as the batch in its slot (copied to pinned
    memory with ``pin``, which gives the slot back at once), with its token views when
    ``views``; slots whose batches the caller dropped are given back first."""
    worker, batch, state, delivered = item
    slots.release_dropped()
    if isinstance(batch, SlotRef):
        batch = slots.take(worker, batch)
    if isinstance(batch, dict):
        if pin:
            batch = _pin(batch)
        if views:
            batch = token_views(batch)
    return worker, batch, state, delivered


def _pin(batch: dict[str, Any]) -> dict[str, Any]:
    return {k: v.pin_memory() if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def pinned(items: Iterator[Item], views: bool) -> Iterator[Item]:
    """As DataLoader's ``pin_memory`` does in the main process, on the prefetch thread: the
    tensors of each batch dict copied to pinned memory, then given their token views when
    ``views`` (a view pinned on its own would be a copy)."""
    try:
        for worker, batch, state, delivered in items:
            if isinstance(batch, dict):
                batch = _pin(batch)
                if views:
                    batch = token_views(batch)
            yield worker, batch, state, delivered
    finally:
        _closing(items)


def token_views(batch: dict[str, Any]) -> dict[str, Any]:
    return token_batch(batch["tokens"], batch.get("doc_start"))

