"""What one task worker did, counted per outcome (``kafeed tasks worker --json``, metrics)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class WorkerStats:
    """What one worker did; ``deferred`` counts deliveries put back for a not-before time or lease."""

    succeeded: int = 0
    failed: int = 0
    retried: int = 0
    parked: int = 0
    skipped: int = 0
    deferred: int = 0
    expired: int = 0
    released: int = 0
    rejected: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)
