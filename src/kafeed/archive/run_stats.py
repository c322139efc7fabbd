"""What one run of the archive sink counted (:class:`ArchiveStats`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ArchiveStats:
    """Counts over one run of the sink."""

    records_in: int = 0
    rows_written: int = 0
    already_archived: int = 0
    commits: int = 0
    lost_races: int = 0
    value_bytes: int = 0
    started: float = field(default_factory=time.monotonic)
    positions: dict[int, int] = field(default_factory=dict)

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def as_dict(self) -> dict[str, Any]:
        return {"records_in": self.records_in, "rows_written": self.rows_written,
                "already_archived": self.already_archived, "commits": self.commits,
                "lost_races": self.lost_races, "value_bytes": self.value_bytes,
                "elapsed_s": round(self.elapsed_s, 3),
                "positions": {str(p): o for p, o in sorted(self.positions.items())}}
