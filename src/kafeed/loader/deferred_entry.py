"""A reader entry of the loader state built only when someone asks for it.

Every batch travels with its reader's entry as of that batch (kafeed.loader.dataset), but
the entry is read only when a state is taken (``state_dict()``, a checkpoint, a worker's
JSON). A mixture records per batch the few numbers its entry derives from and hands out a
:class:`DeferredEntry`; :func:`built` turns either kind into the entry's JSON data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class DeferredEntry:
    """A reader entry as of one batch, built (fresh containers each time) on :meth:`build`."""

    __slots__ = ("_build",)

    def __init__(self, build: Callable[[], dict[str, Any]]) -> None:
        self._build = build

    def build(self) -> dict[str, Any]:
        return self._build()


def built(entry: dict[str, Any] | DeferredEntry) -> dict[str, Any]:
    """The entry's data, whether it came built or deferred."""
    return entry.build() if isinstance(entry, DeferredEntry) else entry
