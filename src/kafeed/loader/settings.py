"""Loader settings: one frozen, validated model behind both datasets' keyword arguments.

``start`` and ``end`` accept:

- ``"earliest"`` / ``"latest"``: the partition's low / high watermark, resolved once when a
  reader opens (``end="latest"`` therefore means "what exists now": one epoch);
- a ``datetime`` or an ``int`` (milliseconds since the epoch): the first offset at or after
  that time (Kafka's ``offsets_for_times``);
- a mapping of explicit offsets: ``{partition: offset}`` (applies to that partition of every
  topic) or ``{"topic:partition": offset}``; partitions not named use ``"earliest"`` (start)
  or stay unbounded (end).

``end=None`` streams forever (continual training). Resolved offsets are saved in the state,
so a resumed run keeps the first run's end even if the topic grew.

``archive`` names the Iceberg table that ``kafeed archive`` keeps of a topic (a table name
when the loader reads one topic, else ``{topic: table}``), in the catalog that
``archive_catalog`` names (the local SQLite one under ``~/.cache/kafeed/warehouse`` by
default, as for ``kafeed archive``). Offsets below a partition's log start offset are then
read from the table (kafeed.loader.sources.archive_table): ``"earliest"`` is the first archived
offset, and an explicit start offset below the log start is kept.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from kafeed.archive.settings import CatalogSettings
from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, invalid_settings
from kafeed.formats import FormatSettings
from kafeed.loader.nodes.record_kinds import KINDS, MAX_TOKEN_ID
from kafeed.loader.sources.read_ahead import MIB, MIN_READ_AHEAD

Mode = Literal["static", "group", "replicated"]
Kind = Literal["tokens", "samples"]
# Strict: True is not offset 1, "123" and 1.5 are not timestamps. Negative offsets and
# timestamps mean "end"/"beginning" to librdkafka, so they are refused here.
Offset = Annotated[int, Strict(), Field(ge=0)]
Moment = Annotated[datetime, Strict()]
OffsetSpec = Literal["earliest", "latest"] | Moment | Offset | Mapping[Offset | str, Offset]
EndSpec = Literal["latest"] | Moment | Offset | Mapping[Offset | str, Offset] | None

# Kafka's legal topic names.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_PARTITION = re.compile(r"[0-9]+")
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
MAX_CONSUME_BATCH = 1_000_000  # librdkafka's limit for consume(num_messages=...)


class LoaderSettings(BaseModel):
    """Everything a reader needs: the one list of loader settings. The datasets take one
    (``settings=``) or build it from their keyword arguments, so a new setting is added
    here only."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    topics: tuple[str, ...]
    kind: Kind = "tokens"
    connection: ConnectionSettings = ConnectionSettings()
    seq_len: int = Field(default=0, ge=0, le=2**24)
    # Required for tokens: the id the tokenizer that produced the topic ends documents with.
    # Records name their tokenizer but not its end-of-document id, so it cannot be read off
    # the topic; a silent default would pack documents with a token they never had.
    eos_id: int | None = Field(default=None, ge=0, le=MAX_TOKEN_ID)
    tokenizer: str | None = Field(default=None, min_length=1)
    start: OffsetSpec = "earliest"
    end: EndSpec = "latest"
    shuffle_buffer: int = Field(default=0, ge=0, le=10_000_000)
    seed: int = Field(default=0, ge=0)
    return_boundaries: bool = False
    drop_last: bool = False
    mode: Mode = "static"
    group: str | None = Field(default=None, min_length=1)
    rank: int | None = Field(default=None, ge=0)
    world_size: int | None = Field(default=None, ge=1)
    consume_batch: int = Field(default=2000, ge=1, le=MAX_CONSUME_BATCH)
    queue_records: int = Field(default=8000, ge=1)
    # Per reader: librdkafka's queue plus the partition queues (kafeed.loader.sources.read_ahead).
    read_ahead_bytes: int = Field(default=256 * MIB, ge=MIN_READ_AHEAD, le=64 * 1024 * MIB)
    # Unbounded runs: hand out a batch of the whole windows there are this long after its
    # first token was ready, full or not (freshness over batch fill).
    max_wait_s: float | None = Field(default=None, gt=0, le=3600, allow_inf_nan=False)
    poll_timeout_s: float = Field(default=0.5, gt=0, le=3600, allow_inf_nan=False)
    # StreamLoader with num_workers=0: batches built ahead on a thread while the trainer
    # steps (kafeed.loader.workers.prefetch); 0 builds each one in the trainer's thread when asked,
    # as a caller that comes straight back for each batch gets anyway (a loop that only reads).
    prefetch_batches: Annotated[int, Strict()] = Field(default=2, ge=0, le=64)
    broker_timeout_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    dlq_topic: str | None = None
    consumer_config: Mapping[str, str | int | float | bool] = Field(default_factory=dict)
    archive: str | Mapping[str, str] | None = None
    archive_catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    # Read only the archive tables (archive=), never the cluster: the topics as archived
    # (kafeed.loader.sources.table_source).
    archive_only: bool = False
    # kind "samples": each topic's value format (kafeed.formats; docs/formats.md), kafeed's own
    # TrainingSample records unless the [formats] table or the flags say otherwise.
    formats: FormatSettings = FormatSettings()
    # Local Parquet/Arrow files read instead of Kafka (kafeed.loader.sources.file_source): files,
    # directories or glob patterns; ``topics`` then names the one source they make.
    files: tuple[str, ...] = ()
    column: str | None = Field(default=None, min_length=1)  # of a token file: its token ids

    @model_validator(mode="after")
    def _check(self) -> LoaderSettings:
        if not self.topics:
            raise ValueError("topics must name at least one topic")
        for name in (*self.topics, *([self.dlq_topic] if self.dlq_topic is not None else [])):
            if not _TOPIC.fullmatch(name):
                raise ValueError(f"{name!r} is not a Kafka topic name (1-249 of A-Z a-z 0-9 . _ -)")
        if len(set(self.topics)) != len(self.topics):
            raise ValueError("topics names a topic twice")
        for what, spec in (("start", self.start), ("end", self.end)):
            if isinstance(spec, Mapping):
                self._check_offsets(what, spec)
        packs = KINDS[self.kind].packs  # token arrays packed into windows
        if packs and self.seq_len < 1:
            raise ValueError("seq_len must be at least 1")
        if packs and self.eos_id is None:
            raise ValueError("eos_id is required: pass the end-of-document id of the tokenizer that "
                             "produced the topic (kafeed train uses its --tokenizer's)")
        if (self.rank is None) != (self.world_size is None):
            raise ValueError("pass rank and world_size together, or neither")
        if self.rank is not None and self.world_size is not None and self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is not below world_size {self.world_size}")
        if self.mode == "group" and not self.group:
            raise ValueError('mode="group" needs group=<consumer group id>')
        if self.archive is not None:
            self._check_archive(self.archive)
        if self.files:
            self._check_files()
        if self.archive_only:
            self._check_archive_only()
        return self

    def _check_files(self) -> None:
        if len(self.topics) != 1:
            raise ValueError("files= make one source: name it with one topic")
        for name, value, allowed in (("start", self.start, "earliest"), ("end", self.end, "latest"),
                                     ("mode", self.mode, "static"), ("archive", self.archive, None),
                                     ("dlq_topic", self.dlq_topic, None)):
            if value != allowed and not (name == "mode" and value == "replicated"):
                raise ValueError(f"files= read every row of every file: {name}={value!r} does not apply")

    def _check_archive_only(self) -> None:
        if self.archive is None:
            raise ValueError("archive_only=True reads the archive tables: name them with archive=")
        if set(self.archive_tables()) != set(self.topics):
            raise ValueError("archive_only=True reads every topic from its table: archive= must name "
                             "one for each")
        for name, value, allowed in (("start", self.start, "earliest"), ("end", self.end, "latest"),
                                     ("dlq_topic", self.dlq_topic, None)):
            if value != allowed:
                raise ValueError(f"archive_only=True reads every archived record: {name}={value!r} "
                                 "does not apply")

    def _check_archive(self, archive: str | Mapping[str, str]) -> None:
        if self.mode == "group":
            raise ValueError('archive= reads with mode="static" or "replicated", not "group"')
        if isinstance(archive, str):
            if len(self.topics) != 1:
                raise ValueError("archive= names one table, but the loader reads several topics: "
                                 "pass {topic: table}")
            archive = {self.topics[0]: archive}
        for topic, table in archive.items():
            if topic not in self.topics:
                raise ValueError(f"archive= names topic {topic!r}, which this loader does not read")
            if not _TABLE.fullmatch(table):
                raise ValueError(f"archive table {table!r} is not NAMESPACE.TABLE "
                                 "(letters, digits, underscores)")

    def archive_tables(self) -> dict[str, str]:
        """``{topic: archive table}`` for the topics read with their cold tier."""
        if self.archive is None:
            return {}
        if isinstance(self.archive, str):
            return {self.topics[0]: self.archive}
        return dict(self.archive)

    def _check_offsets(self, what: str, spec: Mapping[int | str, int]) -> None:
        """Keys of an explicit offset mapping: a partition number or "topic:partition"
        of one of ``topics`` (a typo would otherwise be silently ignored)."""
        for key in spec:
            if isinstance(key, int):
                continue
            topic, sep, partition = key.rpartition(":")
            if not _PARTITION.fullmatch(partition) or (sep and topic not in self.topics):
                raise ValueError(f"{what} key {key!r} is not a partition number or "
                                 f"'topic:partition' of {list(self.topics)}")

    @property
    def bounded(self) -> bool:
        return self.end is not None

    @property
    def eos(self) -> int:
        """``eos_id`` of a token loader (the validator makes sure it is set)."""
        if self.eos_id is None:
            raise ValueError("a token loader needs eos_id")
        return self.eos_id

    @property
    def window(self) -> int:
        """Tokens per yielded window: ``seq_len + 1`` (inputs and shifted labels)."""
        return self.seq_len + 1


def loader_settings(kind: Kind, topics: str | Sequence[str] | None, settings: LoaderSettings | None,
                    bootstrap: str | None, connection: ConnectionSettings | None,
                    options: Mapping[str, Any]) -> LoaderSettings:
    """One validated :class:`LoaderSettings` from a dataset's arguments: ``settings`` (if
    given) with ``topics``, ``bootstrap``/``connection`` and any other field in ``options``
    replacing its values."""
    if bootstrap is not None and connection is not None:
        raise ConfigError("Pass bootstrap= or connection=, not both.")
    if "kind" in options:
        raise ConfigError(f"kind= is not an argument: this dataset reads {kind}.")
    if settings is not None:
        if settings.kind != kind:
            raise ConfigError(f"These loader settings are for kind={settings.kind!r}, not {kind!r}.",
                              hint="Use KafkaTokenDataset for tokens, KafkaSampleDataset for samples.")
        fields: dict[str, Any] = {name: getattr(settings, name) for name in LoaderSettings.model_fields}
    elif topics is None:
        raise ConfigError("Name the topics to read (or pass settings=LoaderSettings(...)).")
    else:
        fields = {"kind": kind}
    if topics is not None:
        fields["topics"] = (topics,) if isinstance(topics, str) else tuple(topics)
    if connection is not None:
        fields["connection"] = connection
    elif bootstrap is not None:
        fields["connection"] = ConnectionSettings(bootstrap=bootstrap)
    if options.get("consumer_config", {}) is None:
        options = {**options, "consumer_config": {}}
    try:
        return LoaderSettings.model_validate({**fields, **options})
    except ValueError as exc:
        raise invalid_settings(exc, what="loader settings") from None
