"""Routing rules: read from TOML, checked once at start, evaluated in order on each record.

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
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError
from kafeed.route.language import LANGUAGES, detect_language
from kafeed.schema.records_pb2 import TrainingSample
from kafeed.stream.settings import TOPIC_PATTERN

DROP = "drop"
_TOPIC = re.compile(TOPIC_PATTERN)
_CONDITIONS = ("source", "label", "language", "metadata", "header", "min_length", "max_length", "regex")
_RULE_KEYS = frozenset({"name", "to", *_CONDITIONS})
_FILE_KEYS = frozenset({"default", "rule"})


class RoutedRecord:
    """What a condition looks at: the decoded sample, its text and headers; language on demand."""

    __slots__ = ("_headers", "_language", "_raw_headers", "sample", "text")

    def __init__(self, sample: TrainingSample, text: str, headers: Sequence[tuple[str, bytes]]) -> None:
        self.sample = sample
        self.text = text
        self._raw_headers = headers
        self._headers: dict[str, str] | None = None
        self._language: str | None = None

    @property
    def headers(self) -> dict[str, str]:
        if self._headers is None:
            self._headers = {k: (v or b"").decode("utf-8", "replace") for k, v in self._raw_headers}
        return self._headers

    @property
    def language(self) -> str:
        if self._language is None:
            self._language = detect_language(self.text)
        return self._language


Condition = Callable[[RoutedRecord], bool]


@dataclass(frozen=True)
class Rule:
    name: str
    to: str  # a topic, or DROP
    conditions: tuple[Condition, ...]

    def matches(self, record: RoutedRecord) -> bool:
        for condition in self.conditions:  # noqa: SIM110 - no generator per record and rule
            if not condition(record):
                return False
        return True


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

    def first_match(self, record: RoutedRecord) -> Rule | None:
        for rule in self.rules:
            if rule.matches(record):
                return rule
        return None


def _strings(where: str, key: str, value: Any) -> frozenset[str]:
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, str) for v in values):
        raise ConfigError(f"{where}: {key} must be a string or a list of strings, not {value!r}.")
    return frozenset(values)


def _table(where: str, key: str, value: Any, get: Callable[[RoutedRecord], Mapping[str, str]]) -> Condition:
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"{where}: {key} must be a table of name = value, "
                          f"e.g. {key} = {{ lang = \"en\" }}.")
    checks: list[tuple[str, frozenset[str] | None]] = []
    for name, wanted in value.items():
        checks.append((name, None if wanted is True else _strings(where, f"{key}.{name}", wanted)))

    def match(r: RoutedRecord) -> bool:
        have = get(r)
        for name, allowed in checks:
            got = have.get(name)
            if got is None or (allowed is not None and got not in allowed):
                return False
        return True

    return match


def _length(where: str, key: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ConfigError(f"{where}: {key} must be a whole number of characters >= 0, not {value!r}.")
    return value


def _condition(where: str, key: str, value: Any) -> Condition:
    if key == "source":
        sources = _strings(where, key, value)
        return lambda r: r.sample.source in sources
    if key == "label":
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise ConfigError(f"{where}: label must be a number or a list of numbers, not {value!r}.")
        labels = frozenset(float(v) for v in values)
        return lambda r: bool(r.sample.target_values) and r.sample.target_values[0] in labels
    if key == "language":
        languages = _strings(where, key, value)
        unknown = sorted(languages - LANGUAGES)
        if unknown:
            raise ConfigError(f"{where}: language {unknown[0]!r} is not one the detector knows "
                              f"({', '.join(sorted(LANGUAGES))}).")
        return lambda r: r.language in languages
    if key == "metadata":
        return _table(where, key, value, lambda r: r.sample.metadata)
    if key == "header":
        return _table(where, key, value, lambda r: r.headers)
    if key == "min_length":
        low = _length(where, key, value)
        return lambda r: len(r.text) >= low
    if key == "max_length":
        high = _length(where, key, value)
        return lambda r: len(r.text) <= high
    if key == "regex":
        if not isinstance(value, str):
            raise ConfigError(f"{where}: regex must be a string, not {value!r}.")
        try:
            pattern = re.compile(value)
        except re.error as exc:
            raise ConfigError(f"{where}: regex {value!r} does not compile: {exc}.",
                              hint="Fix the pattern (Python `re` syntax); in TOML, '...' needs no escapes.",
                              ) from None
        return lambda r: pattern.search(r.text) is not None
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
        conditions = tuple(_condition(where, k, raw[k]) for k in _CONDITIONS if k in raw)
        if "min_length" in raw and "max_length" in raw and raw["min_length"] > raw["max_length"]:
            raise ConfigError(f"{where}: min_length exceeds max_length, so it can never match.")
        rules.append(Rule(name=name, to=_target(where, raw["to"]), conditions=conditions))
    default = doc.get("default")
    if default is not None:
        default = _target(f"{origin}: default", default)
    return RuleSet(rules=tuple(rules), default=default)


def load_rules(path: Path) -> RuleSet:
    """Read and check a rules file; raises :class:`ConfigError` (exit 2) naming the first problem."""
    try:
        with path.open("rb") as fh:
            doc = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"Rules file {path} does not exist.",
                          hint="Pass an existing --rules file.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"Rules file {path} is not valid TOML: {exc}.") from None
    return parse_rules(doc, origin=f"rules file {path}")
