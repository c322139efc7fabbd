"""A seeded shuffle buffer whose state is its RNG and the references of what it holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from kafeed.loader.state.checkpoint import check_version, require_keys

T = TypeVar("T")
STATE_VERSION = 1
STATE_KEYS = ("version", "rng", "items")


class ShuffleBuffer(Generic[T]):
    """Hold up to ``capacity`` items; :meth:`pop` takes a uniformly random one.

    The same seed and the same input order give the same output order, and a buffer
    restored from :meth:`state_dict` continues exactly as the original would have.
    """

    def __init__(self, capacity: int, seed: int | list[int]) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self._items: list[T] = []

    def __len__(self) -> int:
        return len(self._items)

    @property
    def full(self) -> bool:
        return len(self._items) >= self.capacity

    def add(self, item: T) -> None:
        self._items.append(item)

    def pop(self) -> T:
        items = self._items
        idx = int(self._rng.integers(len(items)))
        items[idx], items[-1] = items[-1], items[idx]
        return items.pop()

    def state_dict(self, encode: Callable[[T], Any] = lambda item: item) -> dict[str, Any]:
        """``{"version", "rng", "items"}``: the RNG state and the items (through ``encode``:
        a reference is enough when the item can be fetched again)."""
        return {
            "version": STATE_VERSION,
            "rng": self._rng.bit_generator.state,
            "items": [encode(item) for item in self._items],
        }

    def load_state_dict(
        self, state: dict[str, Any], decode: Callable[[Any], T] = lambda item: item
    ) -> None:
        """Continue exactly as the saved buffer would have; ``decode`` turns a saved item back."""
        require_keys(state, STATE_KEYS, "shuffle buffer state")
        check_version(state["version"], STATE_VERSION, "Shuffle buffer state")
        self._rng.bit_generator.state = state["rng"]
        self._items = [decode(item) for item in state["items"]]
