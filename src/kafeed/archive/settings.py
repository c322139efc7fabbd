"""Archive settings: where the table lives and how the sink batches; validated once."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafeed.archive.schema import Kind
from kafeed.formats import FormatSettings

_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def default_warehouse() -> Path:
    """``~/.cache/kafeed/warehouse``: the local catalog and data files when nothing is configured."""
    return Path.home() / ".cache" / "kafeed" / "warehouse"


class CatalogSettings(BaseModel):
    """Which Iceberg catalog: a named pyiceberg catalog (``.pyiceberg.yaml`` or
    ``PYICEBERG_CATALOG__<NAME>__*`` variables: REST, Glue, Hive, SQL on PostgreSQL, object
    stores), or by default a SQLite catalog and ``file://`` data files under ``warehouse``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str | None = Field(default=None, min_length=1)
    warehouse: Path = Field(default_factory=default_warehouse)
    properties: Mapping[str, str] = Field(default_factory=dict)

    @property
    def local(self) -> bool:
        """The default local catalog (SQLite file and data files in ``warehouse``)."""
        return self.name is None


class ArchiveSettings(BaseModel):
    """One sink: ``topic`` into ``table`` (``namespace.name``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    topic: str
    table: str
    kind: Kind = "tokens"
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    group: str | None = Field(default=None, min_length=1)
    # Static group membership (group.instance.id): a restarted sink with the same instance
    # takes its partitions back at once instead of after the dead one's session times out.
    instance: str | None = Field(default=None, min_length=1, max_length=200)
    # A commit when the buffered values reach this size or the oldest buffered record is this old.
    target_file_bytes: int = Field(default=128 * 1024 * 1024, ge=1024)
    flush_interval_s: float = Field(default=60.0, gt=0, le=86_400, allow_inf_nan=False)
    consume_batch: int = Field(default=5000, ge=1, le=1_000_000)
    # A drain (--until-caught-up) fails when no partition moved for this long (None:
    # kafeed.kafka.drain's STALL_SESSIONS session timeouts).
    drain_stall_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    # kind "samples": the topic's value format (docs/formats.md); a record it rejects is kept raw.
    formats: FormatSettings = FormatSettings()

    @model_validator(mode="after")
    def _check(self) -> ArchiveSettings:
        if not _TOPIC.fullmatch(self.topic):
            raise ValueError(f"{self.topic!r} is not a Kafka topic name (1-249 of A-Z a-z 0-9 . _ -)")
        parts = self.table.split(".")
        if len(parts) < 2 or not all(_IDENT.fullmatch(p) for p in parts):
            raise ValueError(f"{self.table!r} is not NAMESPACE.TABLE (letters, digits, underscores)")
        return self

    @property
    def group_id(self) -> str:
        """The consumer group that divides partitions between sinks (offsets there mirror the table)."""
        return self.group or f"kafeed-archive.{self.table}"
