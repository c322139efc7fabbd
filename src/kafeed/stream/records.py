"""What a stage's batch function takes and gives back, without Kafka objects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

Headers = tuple[tuple[str, bytes], ...]


# Record and Output are named tuples, not frozen dataclasses: the core builds one Record per
# consumed record and a stage often one Output per record, and a frozen dataclass costs
# several times as much to build (object.__setattr__ per field) as a tuple.
class Record(NamedTuple):
    """One consumed record, detached from the client's Message object."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int = 0


class Output(NamedTuple):
    """A record to produce; ``partition`` -1 lets the partitioner choose from the key."""

    topic: str
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    partition: int = -1


class TopicOutputs(NamedTuple):
    """Records to produce to one topic, as columns (partition chosen from the key).

    A stage with many outputs per batch gives them this way: the core produces them with
    the calls made from C (:meth:`kafeed.kafka.TransactionalProducer.produce_columns`),
    and no object is built per output. ``headers`` holds each record's headers (None or
    empty for none), or is None when no record has any.
    """

    topic: str
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[Sequence[tuple[str, bytes | None]] | None] | None = None


@dataclass(frozen=True)
class DeadLetter:
    """An input record that goes to the dead-letter topic, with why (docs/dead-letters.md)."""

    record: Record
    kind: str
    reason: str


#: A state change for the changelog: (input partition, key, value); written to the same
#: partition number of the changelog topic, in the batch's transaction.
StateChange = tuple[int, bytes, bytes | None]


@dataclass
class BatchResult:
    """What one batch produces; the core adds the input positions and commits it all at once.

    Outputs are given one at a time (``outputs``), or a topic at a time as columns
    (``columns``); :meth:`all_outputs` lists both.
    """

    outputs: list[Output] = field(default_factory=list)
    columns: list[TopicOutputs] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    changelog: list[StateChange] = field(default_factory=list)

    def all_outputs(self) -> list[Output]:
        """Every output as an :class:`Output`: ``outputs``, then ``columns`` a topic at a time."""
        out = list(self.outputs)
        for topic, keys, values, headers in self.columns:
            for i, (key, value) in enumerate(zip(keys, values, strict=True)):
                have = headers[i] if headers is not None else None
                out.append(Output(topic, key, value, tuple(have) if have else ()))  # type: ignore[arg-type]
        return out


def positions(records: Sequence[Record]) -> dict[tuple[str, int], int]:
    """Per (topic, partition) the next offset to read: last processed offset + 1."""
    out: dict[tuple[str, int], int] = {}
    for r in records:
        tp = (r.topic, r.partition)
        if r.offset + 1 > out.get(tp, -1):
            out[tp] = r.offset + 1
    return out
