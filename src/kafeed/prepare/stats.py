"""Accounting: every consumed record is output, filtered (by filter), duplicate or dead-lettered."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafeed.stream import StreamStats


@dataclass(frozen=True)
class PrepareStats:
    """Counts over committed batches only, so they match what the topics hold."""

    records_in: int = 0
    documents_out: int = 0
    tokens_out: int = 0
    filtered: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    dead_lettered: int = 0
    dead_letter_kinds: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    aborted_batches: int = 0
    rebalances: int = 0
    producer_rebuilds: int = 0
    elapsed_s: float = 0.0
    busy_s: float = 0.0  # from the first record consumed to the last commit

    @classmethod
    def of(cls, totals: BatchCounts, stream: StreamStats) -> PrepareStats:
        """prepare's counts with the core's (batches, aborts, rebalances, rebuilds, times)."""
        return cls(
            records_in=totals.records_in, documents_out=totals.documents_out,
            tokens_out=totals.tokens_out, filtered=dict(totals.filtered), duplicates=totals.duplicates,
            dead_lettered=totals.dead_lettered, dead_letter_kinds=dict(totals.dead_letter_kinds),
            batches=stream.batches, aborted_batches=stream.aborted_batches,
            rebalances=stream.rebalances, producer_rebuilds=stream.producer_rebuilds,
            elapsed_s=stream.elapsed_s, busy_s=stream.busy_s,
        )
    @property
    def filtered_total(self) -> int:
        return sum(self.filtered.values())

    @property
    def balanced(self) -> bool:
        """in = out + filtered + duplicates + dead-lettered."""
        return self.records_in == (
            self.documents_out + self.filtered_total + self.duplicates + self.dead_lettered)

    @property
    def records_per_s(self) -> float:
        """Throughput while busy (startup and the final idle wait excluded)."""
        return self.records_in / self.busy_s if self.busy_s > 0 else 0.0

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_out / self.busy_s if self.busy_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "records_in": self.records_in, "documents_out": self.documents_out,
            "tokens_out": self.tokens_out, "filtered": dict(self.filtered),
            "filtered_total": self.filtered_total, "duplicates": self.duplicates,
            "dead_lettered": self.dead_lettered, "dead_letter_kinds": dict(self.dead_letter_kinds),
            "batches": self.batches, "aborted_batches": self.aborted_batches,
            "rebalances": self.rebalances, "producer_rebuilds": self.producer_rebuilds,
            "elapsed_s": round(self.elapsed_s, 3), "busy_s": round(self.busy_s, 3),
            "records_per_s": round(self.records_per_s, 1),
            "tokens_per_s": round(self.tokens_per_s, 1), "balanced": self.balanced,
        }


@dataclass
class BatchCounts:
    """One batch's counts, added to the totals only when its transaction commits."""

    records_in: int = 0
    documents_out: int = 0
    tokens_out: int = 0
    filtered: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    dead_letter_kinds: Counter[str] = field(default_factory=Counter)

    @property
    def dead_lettered(self) -> int:
        return sum(self.dead_letter_kinds.values())

    def add(self, counts: BatchCounts) -> None:
        self.records_in += counts.records_in
        self.documents_out += counts.documents_out
        self.tokens_out += counts.tokens_out
        self.filtered.update(counts.filtered)
        self.duplicates += counts.duplicates
        self.dead_letter_kinds.update(counts.dead_letter_kinds)
