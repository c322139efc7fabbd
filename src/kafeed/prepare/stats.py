"""Accounting: every consumed record is output, filtered (by filter), duplicate or dead-lettered."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from kafeed.stream import StreamStats
from kafeed.telemetry import metrics as m


@dataclass(frozen=True)
class PrepareStats(StreamStats):
    """The core's counts over committed batches, plus prepare's own, so they match the topics."""

    documents_out: int = 0
    tokens_out: int = 0
    filtered: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    near_duplicates: int = 0
    # Global dedup (two steps): records the route step committed to the repartition topic,
    # records the dedup step read from it, and dead letters of the route step.
    global_dedup: bool = False
    routed_out: int = 0
    routed_in: int = 0
    route_dead_lettered: int = 0
    # With routing rules: documents per rule (``default``: unmatched, sent to the default
    # topic) and those a rule dropped; records_out says how many went to each topic.
    by_rule: dict[str, int] = field(default_factory=dict)
    dropped: int = 0

    @classmethod
    def of_steps(cls, route: tuple[BatchCounts, StreamStats],
                 dedup: tuple[BatchCounts, StreamStats], *, busy_s: float | None = None) -> PrepareStats:
        """The two steps of global dedup as one summary: input counts from the route, output from dedup.

        ``busy_s``: the span from the route's first record to the dedup step's last commit.
        The steps overlap only in part (the dedup step starts when the route's first batch
        commits), so the longer of their own busy times (the fallback) undercounts it.
        """
        (rc, rs), (dc, ds) = route, dedup
        kinds = Counter(rs.dead_letter_kinds)
        kinds.update(ds.dead_letter_kinds)
        outs = Counter(rs.records_out)
        outs.update(ds.records_out)
        return cls(
            records_in=rs.records_in, records_out=dict(outs), dead_letter_kinds=dict(kinds),
            batches=rs.batches + ds.batches, aborted_batches=rs.aborted_batches + ds.aborted_batches,
            rebalances=rs.rebalances + ds.rebalances,
            producer_rebuilds=rs.producer_rebuilds + ds.producer_rebuilds,
            state_records_read=ds.state_records_read, elapsed_s=max(rs.elapsed_s, ds.elapsed_s),
            busy_s=max(rs.busy_s, ds.busy_s) if busy_s is None else busy_s, documents_out=dc.documents_out,
            tokens_out=dc.tokens_out, filtered=dict(rc.filtered), duplicates=dc.duplicates,
            near_duplicates=dc.near_duplicates,
            global_dedup=True, routed_out=sum(rs.records_out.values()), routed_in=ds.records_in,
            route_dead_lettered=rs.dead_lettered, by_rule=dict(dc.routed), dropped=dc.dropped)

    @classmethod
    def of(cls, totals: BatchCounts, stream: StreamStats) -> PrepareStats:
        """The core's ``stream`` counts with prepare's ``totals`` of the same batches."""
        return cls(
            **{f.name: getattr(stream, f.name) for f in fields(StreamStats)},
            documents_out=totals.documents_out, tokens_out=totals.tokens_out,
            filtered=dict(totals.filtered), duplicates=totals.duplicates,
            by_rule=dict(totals.routed), dropped=totals.dropped,
        )

    @property
    def filtered_total(self) -> int:
        return sum(self.filtered.values())

    @property
    def balanced(self) -> bool:
        """in = out + filtered + duplicates + dropped + dead-lettered (per step with global dedup)."""
        if self.global_dedup:
            return (self.records_in == self.routed_out + self.filtered_total + self.route_dead_lettered
                    and self.routed_in == self.documents_out + self.duplicates + self.near_duplicates
                    + self.dropped + self.dead_lettered - self.route_dead_lettered)
        return self.records_in == (
            self.documents_out + self.filtered_total + self.duplicates + self.dropped + self.dead_lettered)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_out / self.busy_s if self.busy_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        out = super().as_dict()
        if not self.by_rule:
            del out["records_out"]  # one output topic: documents_out says it
        else:
            out |= {"by_rule": dict(self.by_rule), "dropped": self.dropped}
        return out | {
            "documents_out": self.documents_out, "tokens_out": self.tokens_out,
            "filtered": dict(self.filtered), "filtered_total": self.filtered_total,
            "duplicates": self.duplicates, "near_duplicates": self.near_duplicates,
            "tokens_per_s": round(self.tokens_per_s, 1),
            "balanced": self.balanced, "global_dedup": self.global_dedup,
            "routed_out": self.routed_out, "routed_in": self.routed_in,
        }


@dataclass
class BatchCounts:
    """One batch's counts, added to the totals only when its transaction commits."""

    records_in: int = 0
    documents_out: int = 0
    tokens_out: int = 0
    filtered: Counter[str] = field(default_factory=Counter)
    duplicates: int = 0
    near_duplicates: int = 0
    dead_letter_kinds: Counter[str] = field(default_factory=Counter)
    routed: Counter[str] = field(default_factory=Counter)  # with rules: per rule (and "default")
    dropped: int = 0  # documents a rule dropped

    @property
    def dead_lettered(self) -> int:
        return sum(self.dead_letter_kinds.values())

    def add(self, counts: BatchCounts) -> None:
        self.records_in += counts.records_in
        self.documents_out += counts.documents_out
        self.tokens_out += counts.tokens_out
        self.filtered.update(counts.filtered)
        self.duplicates += counts.duplicates
        self.near_duplicates += counts.near_duplicates
        self.dead_letter_kinds.update(counts.dead_letter_kinds)
        self.routed.update(counts.routed)
        self.dropped += counts.dropped

    def add_committed(self, counts: BatchCounts, stage: str) -> None:
        """Add a committed batch's ``counts``, and count them on ``stage``'s Prometheus metrics."""
        self.add(counts)
        m.TOKENS.labels(stage=stage).inc(counts.tokens_out)
        for name, n in counts.filtered.items():
            m.FILTERED.labels(stage=stage, filter=name).inc(n)
        if counts.duplicates:
            m.DUPLICATES.labels(stage=stage).inc(counts.duplicates)
        for rule, n in counts.routed.items():
            m.ROUTED.labels(stage=stage, rule=rule).inc(n)
