"""The loader's Prometheus figures, updated in the main process as each batch is yielded.

DataLoader workers are separate processes whose registries nobody scrapes, so the
workers only describe each batch (:class:`kafeed.loader.nodes.stream.Delivered`) and
:class:`LoaderMetrics` counts it here: batches, tokens, records handed out per topic,
the next offset per partition, and record timestamp -> handed out as a histogram.

Handing out a batch only sets it aside with the time it left (O(1), whatever the batch
holds); the figures are folded into the Prometheus objects at least every ``FOLD_S``
and before every collection of the registry (a scrape, ``get_sample_value``), so a reader
of the metrics never sees them stale. A latency is still the time a record was handed
out minus its Kafka timestamp.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from kafeed.loader.nodes.delivered import Delivered
from kafeed.loader.sources.assignment import parse_key
from kafeed.telemetry import metrics as m

STAGE = "loader"
FOLD_S = 0.5  # the longest batches wait to be counted when nobody collects the registry

# (seconds since the epoch it was handed out, or None: positions only; what; tokens)
_Pending = tuple[float | None, Delivered, int]


class LoaderMetrics:
    """One per :class:`kafeed.StreamLoader`; label children are looked up once, then cached."""

    def __init__(self) -> None:
        self._batches = m.BATCHES.labels(stage=STAGE)
        self._tokens = m.TOKENS.labels(stage=STAGE)
        self._latency = m.END_TO_END_LATENCY.labels(stage=STAGE)
        self._records: dict[str, Any] = {}
        self._positions: dict[str, Any] = {}
        self._sources: dict[str, Any] = {}
        # Taken by the thread handing batches out and by a scrape's fold.
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._folded_at = time.monotonic()
        m.fold_before_collect(self)

    def positions(self, delivered: Delivered) -> None:
        """Set ``kafeed_loader_position`` for every partition the batch's reader owns."""
        with self._lock:
            self._pending.append((None, delivered, 0))

    def batch(self, delivered: Delivered, tokens: int) -> None:
        """Count one batch handed to the caller (``tokens``: 0 for sample batches)."""
        at = time.time()
        with self._lock:
            self._pending.append((at, delivered, tokens))
        if time.monotonic() - self._folded_at >= FOLD_S:
            self.fold()

    def fold(self) -> None:
        """Everything set aside since the last fold, into the Prometheus objects."""
        with self._lock:  # held throughout: two folds must not set a position out of order
            pending, self._pending = self._pending, []
            self._folded_at = time.monotonic()
            if pending:
                self._fold(pending)

    def _fold(self, pending: list[_Pending]) -> None:
        batches = tokens = 0
        per_topic: dict[str, int] = {}
        sources: dict[str, int] = {}
        positions: dict[str, int] = {}
        stamps: list[np.ndarray] = []
        times: list[float] = []
        for at, delivered, count in pending:
            positions.update(delivered.positions)
            if at is None:
                continue
            batches += 1
            tokens += count
            for topic, n in delivered.per_topic.items():
                per_topic[topic] = per_topic.get(topic, 0) + n
            for source, n in delivered.sources.items():
                sources[source] = sources.get(source, 0) + n
            if delivered.timestamps.size:
                stamps.append(delivered.timestamps)
                times.append(at)
        if batches:
            self._batches.inc(batches)
        if tokens:
            self._tokens.inc(tokens)
        for topic, n in per_topic.items():
            counter = self._records.get(topic)
            if counter is None:
                counter = self._records[topic] = m.RECORDS_IN.labels(stage=STAGE, topic=topic)
            counter.inc(n)
        for source, n in sources.items():
            counter = self._sources.get(source)
            if counter is None:
                counter = self._sources[source] = m.SOURCE_TOKENS.labels(source=source)
            counter.inc(n)
        for key, offset in positions.items():
            gauge = self._positions.get(key)
            if gauge is None:
                topic, partition = parse_key(key)
                gauge = self._positions[key] = m.LOADER_POSITION.labels(topic=topic, partition=str(partition))
            gauge.set(offset)
        if stamps:
            ts = np.concatenate(stamps)
            handed_out = np.repeat(np.array(times), [len(s) for s in stamps])
            known = ts > 0  # records without a broker timestamp (-1) have no latency to report
            m.observe_seconds(self._latency, np.maximum(0.0, handed_out[known] - ts[known] / 1000.0))


def batch_tokens(batch: Any) -> int:
    """Token ids in a token batch (its ``tokens`` tensor); 0 for anything else."""
    tokens = batch.get("tokens") if isinstance(batch, dict) else None
    return int(tokens.numel()) if tokens is not None and hasattr(tokens, "numel") else 0
