"""A seeded shuffle buffer whose state is its RNG and the references of what it holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from kafeed.loader.nodes.node import NODE_VERSIONS, check_node

T = TypeVar("T")
STATE_KEYS = ("rng", "items")  # besides "version" (kafeed.loader.nodes.node)


class ShuffleBuffer(Generic[T]):
    """Hold up to ``capacity`` items; :meth:`next` takes a uniformly random one (a node fed
    by its stream: kafeed.loader.nodes.node).

    The same seed and the same input order give the same output order, and a buffer
    restored from :meth:`state` continues exactly as the original would have.
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

    def next(self) -> T:
        items = self._items
        idx = int(self._rng.integers(len(items)))
        items[idx], items[-1] = items[-1], items[idx]
        return items.pop()

    def state(self, encode: Callable[[T], Any] = lambda item: item) -> dict[str, Any]:
        """``{"version", "rng", "items"}``: the RNG state and the items (through ``encode``:
        a reference is enough when the item can be fetched again)."""
        return {
            "version": NODE_VERSIONS["shuffle"],
            "rng": self._rng.bit_generator.state,
            "items": [encode(item) for item in self._items],
        }

    def reset(self, state: dict[str, Any], decode: Callable[[Any], T] = lambda item: item) -> None:
        """Continue exactly as the saved buffer would have; ``decode`` turns a saved item back."""
        check_node(state, "shuffle", STATE_KEYS)
        self._rng.bit_generator.state = state["rng"]
        self._items = [decode(item) for item in state["items"]]
