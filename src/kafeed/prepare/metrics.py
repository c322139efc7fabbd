"""prepare's Prometheus figures (``stage="prepare"`` in :mod:`kafeed.telemetry.metrics`).

A batch is counted when its transaction commits, like :class:`~kafeed.prepare.stats.PrepareStats`,
so the metrics balance the same way (in = out + filtered + duplicates + dead-lettered)
and match what read_committed consumers see; a batch that aborts and is read again
counts once. Aborts and retries count as they happen.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kafeed.prepare.decode import RawRecord
from kafeed.prepare.pipeline import BatchResult
from kafeed.telemetry import metrics as m

STAGE = "prepare"


def count_committed(records: Sequence[RawRecord], result: BatchResult, *, input_topic: str,
                    output_topic: str) -> None:
    """One committed batch: records and bytes in and out, drops by cause, tokens, the commit."""
    counts = result.counts
    m.RECORDS_IN.labels(stage=STAGE, topic=input_topic).inc(counts.records_in)
    m.BYTES_IN.labels(stage=STAGE, topic=input_topic).inc(sum(len(r.value) for r in records if r.value))
    m.RECORDS_OUT.labels(stage=STAGE, topic=output_topic).inc(counts.documents_out)
    m.BYTES_OUT.labels(stage=STAGE, topic=output_topic).inc(sum(len(d.value) for d in result.documents))
    m.TOKENS.labels(stage=STAGE).inc(counts.tokens_out)
    for name, n in counts.filtered.items():
        m.FILTERED.labels(stage=STAGE, filter=name).inc(n)
    if counts.duplicates:
        m.DUPLICATES.labels(stage=STAGE).inc(counts.duplicates)
    for kind, n in counts.dead_letter_kinds.items():
        m.DEAD_LETTERED.labels(stage=STAGE, reason=kind).inc(n)
    m.TRANSACTIONS.labels(stage=STAGE, result="commit").inc()


def count_abort() -> None:
    m.TRANSACTIONS.labels(stage=STAGE, result="abort").inc()


def count_retry() -> None:
    m.PRODUCE_RETRIES.labels(stage=STAGE).inc()


def on_delivery(err: Any, msg: Any) -> None:
    """Producer delivery callback (requested for errors only): counts failed deliveries."""
    if err is not None:
        m.PRODUCE_ERRORS.labels(stage=STAGE).inc()
