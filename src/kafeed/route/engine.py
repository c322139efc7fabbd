"""The router as a pure batch function: records in, outputs / drops / dead letters and counts out.

Every record is counted exactly once: under the rule that matched it, under
``default`` (sent to the default topic), or as a dead letter (``decode`` /
``encoding`` when it is no readable sample, ``unrouted`` when nothing matched and
there is no default). A routed record goes out unchanged: same key, value and headers.

The batch is decoded once into columns (:func:`~kafeed.route.decode.decode_columns`), the
rules run over it a rule at a time (:meth:`~kafeed.route.RuleSet.assign`), and the
outputs are given a topic at a time as columns (:class:`~kafeed.stream.records.TopicOutputs`)
of the input records' own keys, values and headers: no object is built per record.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kafeed.formats import Decoders
from kafeed.route.decode import decode_columns
from kafeed.route.rules import DROP, RuleSet
from kafeed.stream import BatchResult, DeadLetter, Record
from kafeed.stream.batch import RecordBatch
from kafeed.stream.records import TopicOutputs

DEFAULT_RULE = "default"
UNROUTED = "no rule matched and there is no default topic"


@dataclass
class RouteBatch(BatchResult):
    """One batch's outputs plus how many records each rule (or the default) took."""

    by_rule: Counter[str] = field(default_factory=Counter)
    dropped: int = 0


class Router:
    """Applies a :class:`RuleSet` to batches; holds no state between them."""

    def __init__(self, rules: RuleSet, decoders: Decoders | None = None) -> None:
        self.rules = rules
        self.decoders = decoders or Decoders()
        self._names = [r.name for r in rules.rules]
        self._targets = [r.to for r in rules.rules]

    def run(self, records: Sequence[Record]) -> RouteBatch:
        batch = RecordBatch.of(records)
        kept, columns, rejected = decode_columns(batch, self.decoders)
        out = RouteBatch(dead_letters=rejected)
        choice = self.rules.assign_array(columns)
        default = self.rules.default
        unmatched = np.flatnonzero(choice < 0)
        if default is None:
            out.dead_letters.extend(DeadLetter(batch[i], "unrouted", UNROUTED)
                                    for i in kept[unmatched].tolist())
        else:
            choice[unmatched] = len(self._names)  # the default's slot
        taken = np.bincount(choice[choice >= 0], minlength=len(self._names) + 1).tolist()
        names = [*self._names, DEFAULT_RULE]
        targets = [*self._targets, default if default is not None else DROP]
        out.by_rule.update({name: n for name, n in zip(names, taken, strict=True) if n})
        out.dropped = sum(n for target, n in zip(targets, taken, strict=True) if target == DROP)
        # Each topic's records in input order, as columns of the input's own keys, values and headers.
        keys, values, headers = batch.keys(), batch.values(), batch.headers()
        with_headers = any(headers)
        for topic in dict.fromkeys(t for t, n in zip(targets, taken, strict=True) if n and t != DROP):
            slots = [k for k, t in enumerate(targets) if t == topic]
            picked = kept[np.flatnonzero(np.isin(choice, slots))].tolist()
            out.columns.append(TopicOutputs(
                topic, list(map(keys.__getitem__, picked)), list(map(values.__getitem__, picked)),
                list(map(headers.__getitem__, picked)) if with_headers else None))
        return out
