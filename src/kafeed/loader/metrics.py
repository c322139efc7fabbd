"""The loader's Prometheus figures, updated in the main process as each batch is yielded.

DataLoader workers are separate processes whose registries nobody scrapes, so the
workers only describe each batch (:class:`kafeed.loader.stream.Delivered`) and
:class:`LoaderMetrics` counts it here: batches, tokens, records handed out per topic,
the next offset per partition, and record timestamp -> handed out as a histogram.
"""

from __future__ import annotations

from typing import Any

from kafeed.loader.assignment import parse_key
from kafeed.loader.delivered import Delivered
from kafeed.telemetry import metrics as m

STAGE = "loader"


class LoaderMetrics:
    """One per :class:`kafeed.StreamLoader`; label children are looked up once, then cached."""

    def __init__(self) -> None:
        self._batches = m.BATCHES.labels(stage=STAGE)
        self._tokens = m.TOKENS.labels(stage=STAGE)
        self._records: dict[str, Any] = {}
        self._positions: dict[str, Any] = {}
        self._sources: dict[str, Any] = {}

    def positions(self, delivered: Delivered) -> None:
        """Set ``kafeed_loader_position`` for every partition the batch's reader owns."""
        for key, offset in delivered.positions.items():
            gauge = self._positions.get(key)
            if gauge is None:
                topic, partition = parse_key(key)
                gauge = self._positions[key] = m.LOADER_POSITION.labels(topic=topic, partition=str(partition))
            gauge.set(offset)

    def batch(self, delivered: Delivered, tokens: int) -> None:
        """Count one batch handed to the caller (``tokens``: 0 for sample batches)."""
        self._batches.inc()
        if tokens:
            self._tokens.inc(tokens)
        for topic, count in delivered.per_topic.items():
            counter = self._records.get(topic)
            if counter is None:
                counter = self._records[topic] = m.RECORDS_IN.labels(stage=STAGE, topic=topic)
            counter.inc(count)
        for source, count in delivered.sources.items():
            counter = self._sources.get(source)
            if counter is None:
                counter = self._sources[source] = m.SOURCE_TOKENS.labels(source=source)
            counter.inc(count)
        self.positions(delivered)
        stamps = delivered.timestamps
        if stamps.size:
            # Records without a broker timestamp (-1) have no latency to report. A batch holds
            # a few records: filtered in plain Python, cheaper than numpy's per-call overhead.
            if stamps.size <= m.SMALL_BATCH:
                m.observe_latencies(STAGE, [t for t in stamps.tolist() if t > 0])
            else:
                m.observe_latencies(STAGE, stamps[stamps > 0] if (stamps <= 0).any() else stamps)


def batch_tokens(batch: Any) -> int:
    """Token ids in a token batch (its ``tokens`` tensor); 0 for anything else."""
    tokens = batch.get("tokens") if isinstance(batch, dict) else None
    return int(tokens.numel()) if tokens is not None and hasattr(tokens, "numel") else 0
