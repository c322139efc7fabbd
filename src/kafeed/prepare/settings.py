"""Settings for `kafeed prepare`: one frozen model per stage, read from ``[prepare]``.

Every threshold's default and its source are documented in docs/prepare.md.
``None`` switches a single filter off; ``enabled = false`` switches a stage off.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kafeed.config import read_settings_file
from kafeed.errors import ConfigError, invalid_settings
from kafeed.formats import FormatSettings
from kafeed.route import RuleSet
from kafeed.stream.settings import TOPIC_PATTERN as _TOPIC
from kafeed.stream.settings import KafkaTuning, StreamSettings

#: One input: a topic name, or a glob over topic names (``*``, ``?``, ``[...]``).
_INPUT = r"^[A-Za-z0-9._*?!\[\]-]{1,249}$"
_GLOB = frozenset("*?[")


def is_pattern(item: str) -> bool:
    """Whether an ``input`` item is a glob (resolved against the cluster's topics) rather than a name."""
    return not _GLOB.isdisjoint(item)


def matches(topic: str, item: str) -> bool:
    """Whether ``item`` (a name or a glob) selects ``topic``; a glob never selects internal ``__`` topics."""
    if not is_pattern(item):
        return topic == item
    return not topic.startswith("__") and fnmatchcase(topic, item)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NormalizeSettings(_Frozen):
    """Unicode NFC, control characters out (``\\n`` and ``\\t`` kept), whitespace runs collapsed."""

    enabled: bool = True
    form: Literal["NFC", "NFKC"] = "NFC"
    max_blank_lines: int = Field(default=1, ge=0)


class FilterSettings(_Frozen):
    """Quality thresholds (Gopher, Rae et al. 2021 / C4, Raffel et al. 2020), relaxed for short documents."""

    enabled: bool = True
    min_chars: int | None = Field(default=1, ge=0)
    max_chars: int | None = Field(default=1_000_000, ge=1)
    min_words: int | None = Field(default=3, ge=0)
    max_words: int | None = Field(default=100_000, ge=1)
    min_mean_word_length: float | None = Field(default=3.0, ge=0)
    max_mean_word_length: float | None = Field(default=10.0, ge=0)
    max_symbol_ratio: float | None = Field(default=0.1, ge=0, le=1)
    max_duplicate_line_fraction: float | None = Field(default=0.3, ge=0, le=1)

    @model_validator(mode="after")
    def _check(self) -> FilterSettings:
        for low, high in (("min_chars", "max_chars"), ("min_words", "max_words"),
                          ("min_mean_word_length", "max_mean_word_length")):
            lo, hi = getattr(self, low), getattr(self, high)
            if lo is not None and hi is not None and lo > hi:
                raise ValueError(f"{low} ({lo}) must not exceed {high} ({hi})")
        return self


#: Worst-case bytes of dedup state per remembered document (docs/prepare.md, "Dedup state").
BYTES_PER_ENTRY = 24
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


class DedupSettings(_Frozen):
    """Exact dedup of normalized text, remembered in a compacted changelog.

    ``scope = "global"`` (default) re-keys records by content hash first, so copies meet
    whatever their ids and input partitions; ``"partition"`` dedups within each input
    partition only (copies must share a key), in one step.
    """

    enabled: bool = True
    scope: Literal["global", "partition"] = "global"
    changelog_topic: str | None = None  # default: __kafeed_dedup_<group>
    # default: __kafeed_repartition_<group>
    repartition_topic: str | None = Field(default=None, pattern=_TOPIC)
    # scope "partition" only. "hash": one record per new hash, keyed by partition + hash;
    # "batch": one record per batch and partition carrying all its new hashes.
    changelog_format: Literal["hash", "batch"] = "hash"
    rebuild_timeout_s: float = Field(default=120.0, gt=0)
    # scope "global": the dedup step deletes the repartition topic's records it committed at
    # most this often (and at exit); 0 keeps them for the broker's retention.
    repartition_purge_s: float = Field(default=30.0, ge=0)
    # scope "global" only: bounds on the state of each partition of the repartition topic.
    max_entries: int | None = Field(default=None, ge=2)
    max_memory_mb: float | None = Field(default=None, gt=0)
    horizon: str | None = Field(default=None, pattern=r"^[0-9]+(\.[0-9]+)?[smhd]$")  # e.g. "90d"
    snapshot_every: int = Field(default=200, ge=1)  # batches per partition between state snapshots
    # Near-duplicates (scope "global"): MinHash over word shingles, LSH with bands x rows.
    near: bool = False
    near_shingle: int = Field(default=5, ge=1, le=64)
    near_bands: int = Field(default=14, ge=1, le=256)
    near_rows: int = Field(default=8, ge=1, le=64)

    @model_validator(mode="after")
    def _check(self) -> DedupSettings:
        if self.near and self.scope != "global":
            raise ValueError("near-duplicate removal needs dedup scope 'global'")
        return self

    def topic(self, group: str) -> str:
        return self.changelog_topic or f"__kafeed_dedup_{group}"

    @property
    def horizon_ms(self) -> int | None:
        if self.horizon is None:
            return None
        return int(float(self.horizon[:-1]) * _UNITS[self.horizon[-1]] * 1000)

    @property
    def effective_max_entries(self) -> int | None:
        """``max_entries``, lowered to what ``max_memory_mb`` holds at the worst-case bytes per entry."""
        caps = [c for c in (self.max_entries,) if c is not None]
        if self.max_memory_mb is not None:
            caps.append(max(2, int(self.max_memory_mb * 2**20 / BYTES_PER_ENTRY)))
        return min(caps) if caps else None


class TokenizerSettings(_Frozen):
    """``bytes`` (offline fallback), ``minilm`` (the packaged BERT WordPiece) or a tokenizer.json path."""

    name: str = "bytes"
    add_special_tokens: bool = False
    # The loader joins documents with the end-of-document id, so stored documents
    # carry none by default; True stores it too (for consumers that do not pack).
    append_eos: bool = False
    chunk_size: int = Field(default=500, ge=1)  # texts per encode_batch call
    overlap: bool = True  # tokenize chunks on a helper thread while Python stages run


class PrepareSettings(_Frozen):
    """What `kafeed prepare` reads, writes and does in between.

    ``input`` is one or more topics and glob patterns (a string is a comma-separated list);
    :func:`kafeed.prepare.inputs.resolve_inputs` replaces the patterns with the topics they
    match when prepare starts. Several inputs need dedup scope ``global`` (the default),
    which also dedups across them.
    """

    input: tuple[Annotated[str, Field(pattern=_INPUT)], ...] = Field(default=("raw",), min_length=1)
    output: str = Field(default="tokens", pattern=_TOPIC)
    group: str = Field(default="kafeed-prepare", min_length=1)
    dlq: str | None = Field(default=None, pattern=_TOPIC)  # default: dlq_topic
    instance: str | None = None  # default: <hostname>-<free local slot>
    create_topics: bool = True
    idle_s: float = Field(default=3.0, gt=0)
    # None: fail only a run that read records and dead-lettered all of them.
    max_dlq_ratio: float | None = Field(default=None, ge=0, le=1)
    normalize: NormalizeSettings = NormalizeSettings()
    filters: FilterSettings = FilterSettings()
    dedup: DedupSettings = DedupSettings()
    tokenizer: TokenizerSettings = TokenizerSettings()
    kafka: KafkaTuning = KafkaTuning()
    # Each input topic's value format: the settings file's [formats] table (docs/formats.md).
    formats: FormatSettings = FormatSettings()

    @field_validator("input", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        """``"a, b"`` -> ``("a", "b")``; repeated items once, in their first place."""
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(items, Iterable) and not isinstance(items, bytes):
            return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))
        return value

    @property
    def dlq_topic(self) -> str:
        """``dlq``; by default ``<input>.dlq`` for one topic named as it is, else ``<group>.dlq``
        (a list or a pattern: one dead-letter topic whatever the pattern matches today)."""
        if self.dlq:
            return self.dlq
        if len(self.input) == 1 and not is_pattern(self.input[0]):
            return f"{self.input[0]}.dlq"
        return f"{self.group}.dlq"

    @property
    def patterns(self) -> tuple[str, ...]:
        """The ``input`` items still to be resolved against the cluster's topics."""
        return tuple(i for i in self.input if is_pattern(i))

    def with_inputs(self, topics: Iterable[str]) -> PrepareSettings:
        """These settings reading ``topics`` (what the patterns matched), the dead-letter topic kept."""
        return type(self).model_validate(
            {**self.model_dump(), "input": tuple(topics), "dlq": self.dlq_topic})

    def _topics(self) -> tuple[str, ...]:
        if self.patterns:
            raise ConfigError(f"Input pattern {self.patterns[0]!r} is not resolved yet.",
                              hint="Resolve it with kafeed.prepare.resolve_inputs before running.")
        return self.input

    @property
    def changelog_topic(self) -> str:
        return self.dedup.topic(self.group)

    @property
    def global_dedup(self) -> bool:
        return self.dedup.enabled and self.dedup.scope == "global"

    @property
    def repartition_topic(self) -> str:
        return self.dedup.repartition_topic or f"__kafeed_repartition_{self.group}"

    def route_settings(self) -> StreamSettings:
        """The route step of global dedup: input → repartition topic, in the user's group."""
        return StreamSettings(
            inputs=self._topics(), outputs=(self.repartition_topic,), group=self.group,
            dlq_topic=self.dlq_topic, changelog_topic=None, instance=self.instance,
            create_topics=self.create_topics, idle_s=self.idle_s, kafka=self.kafka)

    def outputs(self, rules: RuleSet | None = None) -> tuple[str, ...]:
        """``(output,)``, or with routing ``rules`` every topic they name (checked here)."""
        if rules is None:
            return (self.output,)
        topics = rules.topics
        if not topics:
            raise ConfigError("Every rule (and the default) drops its documents: prepare writes nothing.",
                              hint="Give at least one rule or the default a `to` topic.")
        internal = {self.dlq_topic: "dead-letter", self.changelog_topic: "dedup state",
                    self.repartition_topic: "repartition"}
        for topic in topics:
            role = "input" if topic in self.input else internal.get(topic)
            if role is not None:
                raise ConfigError(f"A rule routes documents to {topic!r}, prepare's {role} topic.",
                                  hint="Route documents to other topics.")
        return topics

    def dedup_settings(self, rules: RuleSet | None = None) -> StreamSettings:
        """The dedup + tokenize step of global dedup: repartition topic → outputs, group ``<group>.dedup``."""
        return StreamSettings(
            inputs=(self.repartition_topic,), outputs=self.outputs(rules), group=f"{self.group}.dedup",
            dlq_topic=self.dlq_topic, changelog_topic=self.changelog_topic, instance=self.instance,
            create_topics=self.create_topics, idle_s=self.idle_s,
            state_rebuild_timeout_s=self.dedup.rebuild_timeout_s,
            purge_input_every_s=self.dedup.repartition_purge_s or None, kafka=self.kafka)

    def stream_settings(self, rules: RuleSet | None = None) -> StreamSettings:
        """What the exactly-once core needs of these settings (and the routing ``rules``, if any)."""
        return StreamSettings(
            inputs=self._topics(), outputs=self.outputs(rules), group=self.group, dlq_topic=self.dlq_topic,
            changelog_topic=self.changelog_topic if self.dedup.enabled else None,
            instance=self.instance, create_topics=self.create_topics, idle_s=self.idle_s,
            state_rebuild_timeout_s=self.dedup.rebuild_timeout_s, kafka=self.kafka)

    @model_validator(mode="after")
    def _check(self) -> PrepareSettings:
        named = [i for i in self.input if not is_pattern(i)]
        for item in named:
            if not re.fullmatch(_TOPIC, item):
                raise ValueError(f"input {item!r} is neither a topic name nor a pattern (* ? [...])")
        # A pattern never selects the others (kafeed.prepare.inputs); a topic named may not be one.
        names = {self.output, self.dlq_topic, self.changelog_topic, self.repartition_topic}
        if len(names) != 4 or not names.isdisjoint(self.input):
            raise ValueError("input, output, dlq, changelog and repartition topics must all differ")
        if self.dedup.enabled and self.dedup.scope == "partition" and (len(self.input) > 1 or self.patterns):
            raise ValueError("dedup scope 'partition' reads one input topic; scope 'global' (the default) "
                             "reads several and dedups across them")
        return self


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping):
            inner = _merge(dict(merged.get(key) or {}), value)
            if inner:
                merged[key] = inner
        elif value is not None:
            merged[key] = value
    return merged


def load_prepare_settings(
    config_file: Path | None = None, env: Mapping[str, str] | None = None, **overrides: Any,
) -> PrepareSettings:
    """``[prepare]`` from the settings file, with its ``[formats]`` table as ``formats``, then
    ``overrides`` (nested dicts merge; None is ignored)."""
    document = read_settings_file(config_file, env)
    values = {"formats": {"topics": document.get("formats", {})}, **document.get("prepare", {})}
    values = _merge(values, overrides)
    try:
        return PrepareSettings(**values)
    except ValidationError as exc:
        raise invalid_settings(
            exc, what="prepare settings", hint="Fix the flags or the [prepare] table of the settings file.",
        ) from None
