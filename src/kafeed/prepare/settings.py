"""Settings for `kafeed prepare`: one frozen model per stage, read from ``[prepare]``.

Every threshold's default and its source are documented in docs/prepare.md.
``None`` switches a single filter off; ``enabled = false`` switches a stage off.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kafeed.config import read_settings_file
from kafeed.errors import ConfigError, invalid_settings
from kafeed.route import RuleSet
from kafeed.stream.settings import TOPIC_PATTERN as _TOPIC
from kafeed.stream.settings import KafkaTuning, StreamSettings


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
    """What `kafeed prepare` reads, writes and does in between."""

    input: str = Field(default="raw", pattern=_TOPIC)
    output: str = Field(default="tokens", pattern=_TOPIC)
    group: str = Field(default="kafeed-prepare", min_length=1)
    dlq: str | None = Field(default=None, pattern=_TOPIC)  # default: <input>.dlq
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

    @property
    def dlq_topic(self) -> str:
        return self.dlq or f"{self.input}.dlq"

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
            input=self.input, outputs=(self.repartition_topic,), group=self.group,
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
        internal = {self.input: "input", self.dlq_topic: "dead-letter", self.changelog_topic: "dedup state",
                    self.repartition_topic: "repartition"}
        for topic in topics:
            if topic in internal:
                raise ConfigError(f"A rule routes documents to {topic!r}, prepare's {internal[topic]} topic.",
                                  hint="Route documents to other topics.")
        return topics

    def dedup_settings(self, rules: RuleSet | None = None) -> StreamSettings:
        """The dedup + tokenize step of global dedup: repartition topic → outputs, group ``<group>.dedup``."""
        return StreamSettings(
            input=self.repartition_topic, outputs=self.outputs(rules), group=f"{self.group}.dedup",
            dlq_topic=self.dlq_topic, changelog_topic=self.changelog_topic, instance=self.instance,
            create_topics=self.create_topics, idle_s=self.idle_s,
            state_rebuild_timeout_s=self.dedup.rebuild_timeout_s,
            purge_input_every_s=self.dedup.repartition_purge_s or None, kafka=self.kafka)

    def stream_settings(self, rules: RuleSet | None = None) -> StreamSettings:
        """What the exactly-once core needs of these settings (and the routing ``rules``, if any)."""
        return StreamSettings(
            input=self.input, outputs=self.outputs(rules), group=self.group, dlq_topic=self.dlq_topic,
            changelog_topic=self.changelog_topic if self.dedup.enabled else None,
            instance=self.instance, create_topics=self.create_topics, idle_s=self.idle_s,
            state_rebuild_timeout_s=self.dedup.rebuild_timeout_s, kafka=self.kafka)

    @model_validator(mode="after")
    def _check(self) -> PrepareSettings:
        names = {self.input, self.output, self.dlq_topic, self.changelog_topic, self.repartition_topic}
        if len(names) != 5:
            raise ValueError("input, output, dlq, changelog and repartition topics must all differ")
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
    """``[prepare]`` from the settings file, then ``overrides`` (nested dicts merge; None is ignored)."""
    values = dict(read_settings_file(config_file, env).get("prepare", {}))
    values = _merge(values, overrides)
    try:
        return PrepareSettings(**values)
    except ValidationError as exc:
        raise invalid_settings(
            exc, what="prepare settings", hint="Fix the flags or the [prepare] table of the settings file.",
        ) from None
