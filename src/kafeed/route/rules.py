"""Routing rules: read from TOML, checked once at start, evaluated in order a batch at a time.

A rules file::

    default = "raw.other"        # unmatched records; without it they are dead letters

    [[rule]]
    name = "english"             # optional; counts and metrics use it (default: rule-<n>)
    language = "en"              # every condition given must hold
    min_length = 200
    to = "tokens.en"             # an output topic, or "drop"

Conditions: ``source``, ``label`` (``target_values[0]``), ``language`` (a value or a
list of values, any of which matches), ``metadata`` and ``header`` (tables of key →
value, list of values, or ``true`` for "present"), ``min_length`` / ``max_length``
(characters of text) and ``regex`` (searched in the text). A rule without conditions
matches everything. The first rule that matches names the record's topic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kafeed.config import read_toml
from kafeed.errors import ConfigError
from kafeed.route.columns import Columns, Ints
from kafeed.route.language import LANGUAGES
from kafeed.stream.settings import TOPIC_PATTERN

DROP = "drop"
_TOPIC = re.compile(TOPIC_PATTERN)
_FILE_KEYS = frozenset({"default", "rule"})


#: A condition compiled once: of the batch indices given, those whose record passes (in order).
Condition = Callable[[Columns, Ints], Ints]

#: Conditions of a rule run cheapest first (a rule is their conjunction, so order changes
#: nothing but the cost): lengths and fields before regexes, the language detector last.
_COST = {"min_length": 0, "max_length": 0, "source": 1, "label": 1, "metadata": 2, "header": 2,
         "regex": 3, "language": 4}
_RULE_KEYS = frozenset({"name", "to", *_COST})


@dataclass(frozen=True)
class Rule:
    name: str
    to: str  # a topic, or DROP
    conditions: tuple[Condition, ...]

    def select(self, columns: Columns, candidates: Ints) -> Ints:
        """The candidates (indices into ``columns``) this rule matches, in order."""
        for condition in self.conditions:
            if not candidates.size:
                break
            candidates = condition(columns, candidates)
        return candidates


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    default: str | None  # topic for unmatched records; None: dead letter

    @property
    def topics(self) -> tuple[str, ...]:
        """Every output topic the rules and the default name, in first-named order."""
        named = [r.to for r in self.rules if r.to != DROP]
        if self.default is not None and self.default != DROP:
            named.append(self.default)
        return tuple(dict.fromkeys(named))

    def assign(self, columns: Columns) -> list[int]:
        """Per record of the batch, the index of the first rule it matches, or -1 for none.

        Each rule sees only the records no earlier rule took.
        """
        return self.assign_array(columns).tolist()  # type: ignore[no-any-return]

    def assign_array(self, columns: Columns) -> Ints:
        """:meth:`assign` as a numpy array."""
        choice = np.full(len(columns), -1, dtype=np.int64)
        pending = np.arange(len(columns))
        for k, rule in enumerate(self.rules):
            if not pending.size:
                break
            hit = rule.select(columns, pending)
            if not hit.size:
                continue
            choice[hit] = k
            pending = pending[choice[pending] < 0]
        return choice


def _keep(idx: Ints, passed: list[bool]) -> Ints:
    """The indices whose entry of ``passed`` is True."""
    return idx[np.array(passed, dtype=bool)] if passed else idx


def _strings(where: str, key: str, value: Any) -> frozenset[str]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{where}: {key} must be a string or a list of strings, not {value!r}.")
    return frozenset(values)


def _table(where: str, key: str, value: Any, get: Callable[[Columns, int], Mapping[str, str]]) -> Condition:
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"{where}: {key} must be a table of name = value, "
                          f"e.g. {key} = {{ lang = \"en\" }}.")
    checks: list[tuple[str, frozenset[str] | None]] = []
    for name, wanted in value.items():
        checks.append((name, None if wanted is True else _strings(where, f"{key}.{name}", wanted)))

    def passes(have: Mapping[str, str]) -> bool:
        for name, allowed in checks:
            got = have.get(name)
            if got is None or (allowed is not None and got not in allowed):
                return False
        return True

    return lambda c, idx: _keep(idx, [passes(get(c, i)) for i in idx.tolist()])


def _length(where: str, key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{where}: {key} must be a whole number of characters >= 0, not {value!r}.")
    return value


def _condition(where: str, key: str, value: Any) -> Condition:
    # Each condition reads its column once per call, then filters with numpy where the column
    # is one, else in one comprehension.
    if key == "source":
        sources = _strings(where, key, value)

        def source(c: Columns, idx: Ints) -> Ints:
            return idx[c.source_in(sources)[idx]]
        return source
    if key == "label":
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise ConfigError(f"{where}: label must be a number or a list of numbers, not {value!r}.")
        labels = frozenset(float(v) for v in values)

        def label(c: Columns, idx: Ints) -> Ints:
            col = c.labels
            return _keep(idx, [col[i] in labels for i in idx.tolist()])
        return label
    if key == "language":
        languages = _strings(where, key, value)
        unknown = sorted(languages - LANGUAGES)
        if unknown:
            raise ConfigError(f"{where}: language {unknown[0]!r} is not one the detector knows "
                              f"({', '.join(sorted(LANGUAGES))}).")

        def language(c: Columns, idx: Ints) -> Ints:
            return _keep(idx, [code in languages for code in c.languages(idx.tolist())])
        return language
    if key == "metadata":
        return _table(where, key, value, Columns.metadata)
    if key == "header":
        return _table(where, key, value, Columns.header_map)
    if key == "min_length":
        low = _length(where, key, value)

        def min_length(c: Columns, idx: Ints) -> Ints:
            return idx[c.lengths[idx] >= low]
        return min_length
    if key == "max_length":
        high = _length(where, key, value)

        def max_length(c: Columns, idx: Ints) -> Ints:
            return idx[c.lengths[idx] <= high]
        return max_length
    if key == "regex":
        if not isinstance(value, str):
            raise ConfigError(f"{where}: regex must be a string, not {value!r}.")
        try:
            search = re.compile(value).search
        except re.error as exc:
            raise ConfigError(f"{where}: regex {value!r} does not compile: {exc}.",
                              hint="Fix the pattern (Python `re` syntax); in TOML, '...' needs no escapes.",
                              ) from None

        def regex(c: Columns, idx: Ints) -> Ints:
            texts = c.texts
            return np.array([i for i in idx.tolist() if search(texts[i])], dtype=np.int64)
        return regex
    raise AssertionError(key)  # keys were checked against _RULE_KEYS


def _target(where: str, value: Any) -> str:
    if not isinstance(value, str) or (value != DROP and not _TOPIC.fullmatch(value)):
        raise ConfigError(f"{where}: {value!r} is not a topic name or \"drop\".")
    return value


def parse_rules(doc: Mapping[str, Any], *, origin: str = "rules") -> RuleSet:
    """The rules of a parsed TOML document; raises :class:`ConfigError` naming the first problem."""
    unknown = sorted(set(doc) - _FILE_KEYS)
    if unknown:
        raise ConfigError(f"{origin}: unknown key {unknown[0]!r}; "
                          "a rules file has `default` and [[rule]] tables.")
    raw_rules = doc.get("rule", [])
    if not isinstance(raw_rules, list) or not raw_rules:
        raise ConfigError(f"{origin} has no [[rule]] table.",
                          hint="Add at least one [[rule]] with a `to` topic.")
    rules: list[Rule] = []
    for n, raw in enumerate(raw_rules, start=1):
        name = raw.get("name", f"rule-{n}") if isinstance(raw, dict) else f"rule-{n}"
        where = f"{origin}: rule {n} ({name!r})"
        if not isinstance(raw, dict):
            raise ConfigError(f"{where} is not a table.")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: name must be a non-empty string.")
        bad = sorted(set(raw) - _RULE_KEYS)
        if bad:
            raise ConfigError(f"{where} has unknown key {bad[0]!r}; known: {', '.join(sorted(_RULE_KEYS))}.")
        if "to" not in raw:
            raise ConfigError(f"{where} has no `to` (an output topic or \"drop\").")
        if name in (r.name for r in rules):
            raise ConfigError(f"{where}: another rule has the same name; names must differ.")
        keys = sorted(raw.keys() & _COST.keys(), key=lambda k: (_COST[k], k))
        conditions = tuple(_condition(where, k, raw[k]) for k in keys)
        if "min_length" in raw and "max_length" in raw and raw["min_length"] > raw["max_length"]:
            raise ConfigError(f"{where}: min_length exceeds max_length, so it can never match.")
        rules.append(Rule(name=name, to=_target(where, raw["to"]), conditions=conditions))
    default = doc.get("default")
    if default is not None:
        default = _target(f"{origin}: default", default)
    return RuleSet(rules=tuple(rules), default=default)


def load_rules(path: Path) -> RuleSet:
    """Read and check a rules file; raises :class:`ConfigError` (exit 2) naming the first problem."""
    doc = read_toml(path, what="Rules file", option="--rules")
    return parse_rules(doc, origin=f"rules file {path}")
