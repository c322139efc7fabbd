"""Moving batches to the accelerator one batch ahead, from a small pool of pinned buffers.

:class:`DeviceFeed` sits between the loader's host batches and the training step. For each
batch it copies the tensors into a host buffer taken from a pool (pinned memory on CUDA,
reused, never allocated per batch), starts the copy to the device with
``non_blocking=True`` on a side stream, and records an event; the batch is handed to the
caller only after the *next* batch's copy has been started, and the caller's stream waits
on the event first. So the copy of batch k+1 runs while the step on batch k computes.
A host buffer is reused once the event of the copy that read it has completed.

Without CUDA (``device="cpu"``) the same path runs with pageable buffers and synchronous
copies: the pool, the order, the one-batch look-ahead and the hand-off are the same, which
is what the tests check on machines without an accelerator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from kafeed.errors import ConfigError

Batch = dict[str, Any]
Key = tuple[str, tuple[int, ...], torch.dtype]


def resolve_device(device: str | torch.device) -> torch.device:
    """``device`` checked against this machine: ``cuda`` needs CUDA (one sentence otherwise)."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError(f"device={device!r} is not a torch device; pass 'cuda', 'cuda:N' or "
                          "'cpu'.") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r} needs CUDA, which this PyTorch build or machine does not have; "
                          "pass device='cpu' or leave device unset.")
    if dev.type not in ("cuda", "cpu"):
        raise ConfigError(f"device={device!r} is not supported; pass 'cuda', 'cuda:N' or 'cpu'.")
    return dev


@dataclass
class _Slot:
    """One pooled host buffer and the event of the last copy that read it."""

    buffer: torch.Tensor
    event: Any = None


@dataclass
class _InFlight:
    """A batch whose device copy has been started."""

    batch: Batch
    event: Any
    mark: Callable[[], None]
    slots: list[_Slot] = field(default_factory=list)


class DeviceFeed:
    """Host batches in, device batches out, one copy in flight ahead of the consumer.

    ``pool`` host buffers are kept per tensor shape (2 are enough for one batch ahead: one
    being read by the copy in flight, one being filled); :attr:`allocations` counts the
    buffers ever made, so a test can see they are reused.
    """

    def __init__(self, device: torch.device, *, pin: bool, pool: int = 3) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.pin = pin and self.cuda  # pinned memory needs an accelerator
        self.pool = pool
        self._slots: dict[Key, list[_Slot]] = {}
        self._turn: dict[Key, int] = {}
        self.allocations = 0
        self._stream: Any = torch.cuda.Stream(device) if self.cuda else None  # type: ignore[no-untyped-call]

    # -- the pool ----------------------------------------------------------------------------
    def _slot(self, name: str, tensor: torch.Tensor) -> _Slot:
        key: Key = (name, tuple(tensor.shape), tensor.dtype)
        slots = self._slots.setdefault(key, [])
        if len(slots) < self.pool:
            slots.append(_Slot(torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=self.pin)))
            self.allocations += 1
            return slots[-1]
        turn = self._turn.get(key, 0)
        self._turn[key] = (turn + 1) % self.pool
        slot = slots[turn]
        if slot.event is not None:
            slot.event.synchronize()  # the copy that last read this buffer is done
        return slot

    # -- one batch ---------------------------------------------------------------------------
    def _start(self, batch: Batch, mark: Callable[[], None]) -> _InFlight:
        """Stage ``batch``'s tensors in pooled buffers and start their copies to the device."""
        out: Batch = {}
        slots: list[_Slot] = []
        for name, value in batch.items():
            if not isinstance(value, torch.Tensor):
                out[name] = value
                continue
            slot = self._slot(name, value)
            slot.buffer.copy_(value)
            slots.append(slot)
            if self.cuda:
                with torch.cuda.stream(self._stream):
                    out[name] = slot.buffer.to(self.device, non_blocking=True)
            else:  # a copy of its own: the pooled buffer is filled again two batches later
                out[name] = slot.buffer.clone()
        event = None
        if self.cuda:
            event = torch.cuda.Event()  # type: ignore[no-untyped-call]
            event.record(self._stream)
            for slot in slots:
                slot.event = event
        return _InFlight(out, event, mark, slots)

    def _finish(self, flight: _InFlight) -> Batch:
        """The consumer's side: wait for the copy, then the batch is the caller's."""
        if self.cuda:
            current = torch.cuda.current_stream(self.device)
            current.wait_event(flight.event)
            for value in flight.batch.values():
                if isinstance(value, torch.Tensor):
                    # Made on the side stream, used on the consumer's: keep the allocator honest.
                    value.record_stream(current)
        return flight.batch

    def ahead(self, batches: Iterable[tuple[Batch, Callable[[], None]]]) -> Iterator[Batch]:
        """Each ``(batch, mark)`` as a device batch, ``mark()`` called just before it is
        handed out (not when it was fetched), with the next batch's copy already started."""
        source = iter(batches)
        first = next(source, None)
        pending = None if first is None else self._start(*first)
        while pending is not None:
            following = next(source, None)
            current, pending = pending, (None if following is None else self._start(*following))
            batch = self._finish(current)
            current.mark()
            yield batch
