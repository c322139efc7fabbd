"""What a batch handed out, for the loader metrics: it travels beside the batch, not in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class Delivered:
    """What a batch handed out, for the loader metrics (travels beside the batch, not in it):
    records finished per topic, their Kafka timestamps (ms), and the reader's next offset
    per partition key as of the batch."""

    per_topic: dict[str, int] = field(default_factory=dict)
    timestamps: npt.NDArray[np.int64] = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    positions: dict[str, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)  # a mixture's tokens per source

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # A worker sends one per batch: the timestamps as bytes, since unpickling a numpy
        # array cost the main process about 5 us a batch, a dataclass's state as much again.
        return _rebuilt, (self.per_topic, self.timestamps.tobytes(), self.positions, self.sources)

    @classmethod
    def of(cls, drained: tuple[dict[str, int], list[int]], state: dict[str, Any],
           sources: dict[str, int] | None = None) -> Delivered:
        """From a reader entry (a mixture's: the positions of all its sources)."""
        entries = [state["sources"][n] for n in sorted(state["sources"])] if "sources" in state else [state]
        positions = {key: int(p["next"]) for e in entries for key, p in e["reader"]["partitions"].items()}
        return cls.at(drained, positions, sources)

    @classmethod
    def at(cls, drained: tuple[dict[str, int], list[int]], positions: dict[str, int],
           sources: dict[str, int] | None = None) -> Delivered:
        per_topic, stamps = drained
        return cls(per_topic=per_topic, timestamps=np.array(stamps, dtype=np.int64),
                   positions=positions, sources=sources or {})


def _rebuilt(per_topic: dict[str, int], stamps: bytes, positions: dict[str, int],
             sources: dict[str, int]) -> Delivered:
    return Delivered(per_topic=per_topic, timestamps=np.frombuffer(stamps, dtype=np.int64),
                     positions=positions, sources=sources)
