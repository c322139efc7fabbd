"""The exactly-once core every stage runs on (docs/architecture.md).

A stage is a :class:`Stage`: a pure batch function from input :class:`Record` s (a
:class:`RecordBatch`, which also gives them as columns) to a :class:`BatchResult`
(outputs, dead letters, state changes), plus hooks for the
per-partition state it keeps. :class:`StreamProcessor` owns everything Kafka: the
read_committed consumer, the transactional producer, one transaction per batch with
the input offsets in it, abort-and-rewind, producer rebuilds, rebalances, the state
changelog, dead letters, the caught-up test, stats and metrics.
"""

from kafeed.stream.batch import RecordBatch
from kafeed.stream.processor import StreamProcessor
from kafeed.stream.records import (
    BatchResult,
    DeadLetter,
    Output,
    Record,
    StateChange,
    TopicOutputs,
    positions,
)
from kafeed.stream.settings import KafkaTuning, StreamSettings
from kafeed.stream.stage import Stage
from kafeed.stream.stats import StreamStats

__all__ = [
    "BatchResult",
    "DeadLetter",
    "KafkaTuning",
    "Output",
    "Record",
    "RecordBatch",
    "Stage",
    "StateChange",
    "StreamProcessor",
    "StreamSettings",
    "StreamStats",
    "TopicOutputs",
    "positions",
]
