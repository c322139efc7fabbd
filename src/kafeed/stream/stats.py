"""The counts every stage reports, over committed batches only, and the metrics they feed.

A batch counts when its transaction commits, so the counts match what read_committed
consumers see, and a batch that aborts and is read again counts once. Aborts,
rebalances and producer rebuilds count as they happen.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from kafeed.stream.batch import RecordBatch
from kafeed.stream.records import BatchResult, Output, Record
from kafeed.telemetry import metrics as m


@dataclass(frozen=True)
class StreamStats:
    """The core's totals; ``busy_s`` runs from the first record consumed to the last commit."""

    records_in: int = 0
    records_out: dict[str, int] = field(default_factory=dict)  # per output topic
    dead_letter_kinds: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    aborted_batches: int = 0
    rebalances: int = 0
    producer_rebuilds: int = 0
    state_records_read: int = 0  # changelog records read to rebuild state on assignment
    elapsed_s: float = 0.0
    busy_s: float = 0.0

    @property
    def dead_lettered(self) -> int:
        return sum(self.dead_letter_kinds.values())

    @property
    def records_per_s(self) -> float:
        """Throughput while busy (startup and the final idle wait excluded)."""
        return self.records_in / self.busy_s if self.busy_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "records_in": self.records_in, "records_out": dict(self.records_out),
            "dead_lettered": self.dead_lettered, "dead_letter_kinds": dict(self.dead_letter_kinds),
            "batches": self.batches, "aborted_batches": self.aborted_batches,
            "rebalances": self.rebalances, "producer_rebuilds": self.producer_rebuilds,
            "state_records_read": self.state_records_read,
            "elapsed_s": round(self.elapsed_s, 3), "busy_s": round(self.busy_s, 3),
            "records_per_s": round(self.records_per_s, 1),
        }


_OUTPUT_TOPIC = itemgetter(Output._fields.index("topic"))
_OUTPUT_VALUE = itemgetter(Output._fields.index("value"))


def _per_topic(outputs: Sequence[Output], topics: Sequence[str]) -> tuple[dict[str, int], dict[str, int]]:
    """Records and value bytes per output topic (each of ``topics`` listed, 0 when none).

    Counted with numpy, without a Python step per output (they are many); a batch with an
    output to a topic not in ``topics``, or a tombstone, is counted in Python.
    """
    index = {t: i for i, t in enumerate(topics)}
    try:
        codes = np.fromiter(map(index.__getitem__, map(_OUTPUT_TOPIC, outputs)), dtype=np.int64,
                            count=len(outputs))
        sizes = np.fromiter(map(len, map(_OUTPUT_VALUE, outputs)), dtype=np.int64, count=len(outputs))
    except (KeyError, TypeError):
        out = dict.fromkeys(topics, 0)
        nbytes = dict.fromkeys(topics, 0)
        for topic, _, value, _, _ in outputs:
            out[topic] = out.get(topic, 0) + 1
            nbytes[topic] = nbytes.get(topic, 0) + (len(value) if value else 0)
        return out, nbytes
    counts = np.bincount(codes, minlength=len(topics)).tolist()
    sums = np.bincount(codes, weights=sizes, minlength=len(topics)).tolist()
    return dict(zip(topics, counts, strict=True)), {t: int(n) for t, n in zip(topics, sums, strict=True)}


def _or_empty(value: bytes | None) -> bytes:
    return value or b""


class StreamCounters:
    """Running totals of one processor; :meth:`snapshot` freezes them."""

    def __init__(self, stage: str, input_topics: Sequence[str], output_topics: Sequence[str]) -> None:
        self.stage = stage
        self.input_topics = tuple(input_topics)
        self.output_topics = tuple(output_topics)
        self.records_in = 0
        self.records_out: Counter[str] = Counter()
        self.dead_letter_kinds: Counter[str] = Counter()
        self.batches = 0
        self.aborted_batches = 0
        self.rebalances = 0
        self.producer_rebuilds = 0
        self.state_records_read = 0
        self.first_data: float | None = None  # monotonic time the first batch arrived
        self.last_commit: float | None = None

    def committed(self, records: Sequence[Record], result: BatchResult, now: float) -> None:
        """One committed batch: records and bytes in and out, dead letters by kind."""
        stage = self.stage
        self.records_in += len(records)
        self.batches += 1
        self.last_commit = now
        batch = RecordBatch.of(records)
        values = batch.values()
        if len(self.input_topics) == 1:
            topic = self.input_topics[0]
            m.RECORDS_IN.labels(stage=stage, topic=topic).inc(len(records))
            m.BYTES_IN.labels(stage=stage, topic=topic).inc(sum(map(len, filter(None, values))))
        elif records:  # several inputs: each topic's share, counted without a Python step per record
            names, codes = np.unique(np.asarray(batch.topics()), return_inverse=True)
            sizes = np.fromiter(map(len, map(_or_empty, values)), dtype=np.int64, count=len(values))
            counts = np.bincount(codes.ravel(), minlength=len(names)).tolist()
            sums = np.bincount(codes.ravel(), weights=sizes, minlength=len(names)).tolist()
            for topic, n, nbytes_in in zip(names.tolist(), counts, sums, strict=True):
                m.RECORDS_IN.labels(stage=stage, topic=topic).inc(n)
                m.BYTES_IN.labels(stage=stage, topic=topic).inc(int(nbytes_in))
        out, nbytes = _per_topic(result.outputs, self.output_topics)
        for topic, _, values, _ in result.columns:
            out[topic] = out.get(topic, 0) + len(values)
            nbytes[topic] = nbytes.get(topic, 0) + sum(map(len, filter(None, values)))
        for topic, n in out.items():
            m.RECORDS_OUT.labels(stage=stage, topic=topic).inc(n)
            m.BYTES_OUT.labels(stage=stage, topic=topic).inc(nbytes[topic])
        self.records_out.update(out)
        kinds = Counter(d.kind for d in result.dead_letters)
        for kind, n in kinds.items():
            m.DEAD_LETTERED.labels(stage=stage, reason=kind).inc(n)
        self.dead_letter_kinds.update(kinds)

    def snapshot(self, elapsed_s: float) -> StreamStats:
        busy = 0.0
        if self.first_data is not None and self.last_commit is not None:
            busy = max(0.0, self.last_commit - self.first_data)
        return StreamStats(
            records_in=self.records_in, records_out=dict(self.records_out),
            dead_letter_kinds=dict(self.dead_letter_kinds), batches=self.batches,
            aborted_batches=self.aborted_batches, rebalances=self.rebalances,
            producer_rebuilds=self.producer_rebuilds, state_records_read=self.state_records_read,
            elapsed_s=elapsed_s, busy_s=busy)
