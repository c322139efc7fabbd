"""Reader entries of a loader state, built by hand for tests that need one of a given shape
(kafeed.loader.state.checkpoint shows the layout)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any


def stream_entry(index: int, partitions: dict[str, Any], *, rr: int = 0,
                 stats: Sequence[int] = (0, 0, 0), rng: dict[str, Any] | None = None,
                 items: Sequence[Sequence[Any]] = (), carry: Sequence[Sequence[Any]] = (),
                 packs: bool = True) -> dict[str, Any]:
    """A stream node's state: its reader's ``partitions``, ``rr`` and ``stats`` (records,
    bad, tokens); a shuffle buffer's when ``rng`` is given; a packer's unless ``packs`` is off."""
    return {
        "version": 1, "index": index,
        "reader": {"version": 1, "partitions": partitions, "rr": rr,
                   "stats": dict(zip(("records", "bad", "tokens"), stats, strict=True))},
        "shuffle": None if rng is None else {"version": 1, "rng": rng, "items": [list(i) for i in items]},
        "packer": {"version": 1, "carry": [list(c) for c in carry]} if packs else None,
    }


def layout_1(state: dict[str, Any]) -> dict[str, Any]:
    """A loader state of token streams as kafeed saved it before each node's state was
    nested (layout 1: one flat entry per reader)."""
    flat = {key: {"index": e["index"], "partitions": e["reader"]["partitions"], "rr": e["reader"]["rr"],
                  "buffer": e["shuffle"]["items"] if e["shuffle"] else [],
                  "rng": e["shuffle"]["rng"] if e["shuffle"] else None,
                  "carry": e["packer"]["carry"], "stats": e["reader"]["stats"]}
            for key, e in state["readers"].items()}
    return json.loads(json.dumps({**state, "version": 1, "readers": flat}))  # type: ignore[no-any-return]
