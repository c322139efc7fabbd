"""The router as a pure batch function: records in, outputs / drops / dead letters and counts out.

Every record is counted exactly once: under the rule that matched it, under
``default`` (sent to the default topic), or as a dead letter (``decode`` /
``encoding`` when it is no readable sample, ``unrouted`` when nothing matched and
there is no default). A routed record goes out unchanged: same key, value and headers.

The batch is decoded once into columns (:class:`~kafeed.route.columns.Columns`) and
the rules run over it a rule at a time (:meth:`~kafeed.route.RuleSet.assign`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError

from kafeed.errors import SchemaError
from kafeed.route.columns import Columns
from kafeed.route.rules import DROP, RuleSet
from kafeed.schema.avro import decode_raw
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream import BatchResult, DeadLetter, Output, Record

DEFAULT_RULE = "default"
UNROUTED = "no rule matched and there is no default topic"


@dataclass
class RouteBatch(BatchResult):
    """One batch's outputs plus how many records each rule (or the default) took."""

    by_rule: Counter[str] = field(default_factory=Counter)
    dropped: int = 0


def _decode_checked(record: Record) -> DeadLetter | TrainingSample:
    """The slow path: the sample by its format header, or why it is no sample."""
    try:
        return decode_raw(record.value, list(record.headers), topic=record.topic,
                          partition=record.partition, offset=record.offset)
    except SchemaError as exc:
        return DeadLetter(record, "decode", exc.message)


def decode_texts(records: Sequence[Record]) -> tuple[list[Record], Columns, list[DeadLetter]]:
    """The readable records, their samples and texts as columns, and dead letters for the rest."""
    parse = TrainingSample.FromString
    kept: list[Record] = []
    samples: list[TrainingSample] = []
    texts: list[str] = []
    rejected: list[DeadLetter] = []
    for record in records:
        value = record.value
        sample: TrainingSample | DeadLetter
        if record.headers or value is None:  # a format header, or a tombstone: the full check
            sample = _decode_checked(record)
        else:  # no headers: Protobuf, the common case
            try:
                sample = parse(value)
            except DecodeError:
                sample = _decode_checked(record)
        if isinstance(sample, DeadLetter):
            rejected.append(sample)
            continue
        try:
            text = sample.input_data.decode("utf-8")
        except UnicodeDecodeError as exc:
            rejected.append(DeadLetter(record, "encoding",
                                       f"input_data is not UTF-8 ({exc.reason} at byte {exc.start})"))
            continue
        kept.append(record)
        samples.append(sample)
        texts.append(text)
    return kept, Columns(samples, texts, [r.headers for r in kept]), rejected


class Router:
    """Applies a :class:`RuleSet` to batches; holds no state between them."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._names = [r.name for r in rules.rules]
        self._targets = [r.to for r in rules.rules]

    def run(self, records: Sequence[Record]) -> RouteBatch:
        kept, columns, rejected = decode_texts(records)
        out = RouteBatch(dead_letters=rejected)
        choice = self.rules.assign(columns)
        default = self.rules.default
        names = [*self._names, DEFAULT_RULE]
        targets = [*self._targets, default if default is not None else DROP]
        taken = [0] * len(names)
        unmatched = len(names) - 1
        outputs = out.outputs
        for record, k in zip(kept, choice, strict=True):
            if k < 0:
                if default is None:
                    out.dead_letters.append(DeadLetter(record, "unrouted", UNROUTED))
                    continue
                k = unmatched
            taken[k] += 1
            target = targets[k]
            if target == DROP:
                out.dropped += 1
            else:
                outputs.append(Output(target, record.key, record.value, record.headers))
        out.by_rule.update({name: n for name, n in zip(names, taken, strict=True) if n})
        return out
