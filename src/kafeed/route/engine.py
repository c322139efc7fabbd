"""The router as a pure batch function: records in, outputs / drops / dead letters and counts out.

Every record is counted exactly once: under the rule that matched it, under
``default`` (sent to the default topic), or as a dead letter (``decode`` /
``encoding`` when it is no readable sample, ``unrouted`` when nothing matched and
there is no default). A routed record goes out unchanged: same key, value and headers.

The batch is decoded once into columns (:func:`~kafeed.route.decode.decode_batch`), the
rules run over it a rule at a time (:meth:`~kafeed.route.RuleSet.assign`), and the
outputs are built a topic at a time from the input records' own key, value and headers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from operator import itemgetter

import numpy as np

from kafeed.route.decode import decode_batch
from kafeed.route.rules import DROP, RuleSet
from kafeed.stream import BatchResult, DeadLetter, Output, Record

DEFAULT_RULE = "default"
UNROUTED = "no rule matched and there is no default topic"

_output = partial(tuple.__new__, Output)  # Output from a tuple of its fields, in C
_KEY, _VALUE, _HEADERS = (itemgetter(Record._fields.index(f)) for f in ("key", "value", "headers"))


@dataclass
class RouteBatch(BatchResult):
    """One batch's outputs plus how many records each rule (or the default) took."""

    by_rule: Counter[str] = field(default_factory=Counter)
    dropped: int = 0


class Router:
    """Applies a :class:`RuleSet` to batches; holds no state between them."""

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules
        self._names = [r.name for r in rules.rules]
        self._targets = [r.to for r in rules.rules]

    def run(self, records: Sequence[Record]) -> RouteBatch:
        kept, columns, rejected = decode_batch(records)
        out = RouteBatch(dead_letters=rejected)
        choice = self.rules.assign_array(columns)
        default = self.rules.default
        unmatched = np.flatnonzero(choice < 0)
        if default is None:
            out.dead_letters.extend(DeadLetter(kept[i], "unrouted", UNROUTED) for i in unmatched.tolist())
        else:
            choice[unmatched] = len(self._names)  # the default's slot
        taken = np.bincount(choice[choice >= 0], minlength=len(self._names) + 1).tolist()
        names = [*self._names, DEFAULT_RULE]
        targets = [*self._targets, default if default is not None else DROP]
        out.by_rule.update({name: n for name, n in zip(names, taken, strict=True) if n})
        out.dropped = sum(n for target, n in zip(targets, taken, strict=True) if target == DROP)
        # Each topic's records in input order, each as its Output built without a Python frame.
        for topic in dict.fromkeys(t for t, n in zip(targets, taken, strict=True) if n and t != DROP):
            slots = [k for k, t in enumerate(targets) if t == topic]
            picked = list(map(kept.__getitem__, np.flatnonzero(np.isin(choice, slots)).tolist()))
            out.outputs.extend(map(_output, zip(repeat(topic), map(_KEY, picked), map(_VALUE, picked),
                                                map(_HEADERS, picked), repeat(-1))))
        return out
