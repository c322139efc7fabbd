"""The router as a pure batch function: records in, outputs / drops / dead letters and counts out.

Every record is counted exactly once: under the rule that matched it, under
``default`` (sent to the default topic), or as a dead letter (``decode`` /
``encoding`` when it is no readable sample, ``unrouted`` when nothing matched and
there is no default). A routed record goes out unchanged: same key, value and headers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from kafeed.errors import SchemaError
from kafeed.route.rules import DROP, RoutedRecord, RuleSet
from kafeed.schema.avro import decode_raw
from kafeed.stream import BatchResult, DeadLetter, Output, Record

DEFAULT_RULE = "default"


@dataclass
class RouteBatch(BatchResult):
    """One batch's outputs plus how many records each rule (or the default) took."""

    by_rule: Counter[str] = field(default_factory=Counter)
    dropped: int = 0


def _readable(record: Record) -> RoutedRecord | DeadLetter:
    try:
        sample = decode_raw(record.value, list(record.headers), topic=record.topic,
                            partition=record.partition, offset=record.offset)
    except SchemaError as exc:
        return DeadLetter(record, "decode", exc.message)
    try:
        text = sample.input_data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return DeadLetter(record, "encoding", f"input_data is not UTF-8 ({exc.reason} at byte {exc.start})")
    return RoutedRecord(sample, text, record.headers)


class Router:
    """Applies a :class:`RuleSet` to batches; holds no state between them."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules

    def run(self, records: Sequence[Record]) -> RouteBatch:
        out = RouteBatch()
        for record in records:
            view = _readable(record)
            if isinstance(view, DeadLetter):
                out.dead_letters.append(view)
                continue
            rule = self.rules.first_match(view)
            if rule is not None:
                name, target = rule.name, rule.to
            elif self.rules.default is not None:
                name, target = DEFAULT_RULE, self.rules.default
            else:
                out.dead_letters.append(DeadLetter(record, "unrouted",
                                                   "no rule matched and there is no default topic"))
                continue
            out.by_rule[name] += 1
            if target == DROP:
                out.dropped += 1
            else:
                out.outputs.append(Output(target, record.key, record.value, record.headers))
        return out
