"""Which value format each input topic holds, declared once: the ``[formats]`` table.

::

    [formats.training_data]          # a topic name, or a glob ("site-*.events")
    format = "json"
    label_field = "label"

    [formats."pg.public.docs"]       # a Debezium change stream
    format = "json"
    text_field = "after.body"
    id_field = "after.id"

A topic not in the table holds kafeed's own ``TrainingSample`` records (format ``kafeed``).
The flags of a one-off run (``--value-format``, ``--text-field``, ...) apply to every input
topic of that run, over what the table says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kafeed.config import read_settings_file
from kafeed.errors import invalid_settings

ValueFormatName = Literal["kafeed", "json", "text"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TopicFormat(_Frozen):
    """One topic's value format and field mapping (the mapping of ``kafeed ingest``)."""

    format: ValueFormatName = "kafeed"
    text_field: str = Field(default="text", min_length=1)
    id_field: str = Field(default="id", min_length=1)
    label_field: str | None = Field(default=None, min_length=1)
    meta_fields: tuple[str, ...] = ()


KAFEED = TopicFormat()


class FormatOverride(_Frozen):
    """What a run's flags say, for every input topic (None: as the table says)."""

    format: ValueFormatName | None = None
    text_field: str | None = Field(default=None, min_length=1)
    id_field: str | None = Field(default=None, min_length=1)
    label_field: str | None = Field(default=None, min_length=1)
    meta_fields: tuple[str, ...] | None = None


class FormatSettings(_Frozen):
    """Per topic (name or glob) its format, and the flags' override over all of them."""

    topics: dict[str, TopicFormat] = {}
    override: FormatOverride = FormatOverride()

    def of(self, topic: str) -> TopicFormat:
        """``topic``'s format: its own entry, else the first glob that matches it, else ``kafeed``;
        then the flags over it."""
        found = self.topics.get(topic)
        if found is None:
            found = next((fmt for name, fmt in self.topics.items()
                          if not topic.startswith("__") and fnmatchcase(topic, name)), KAFEED)
        given = self.override.model_dump(exclude_none=True)
        return found.model_copy(update=given) if given else found

    def all_kafeed(self, topics: Sequence[str]) -> bool:
        """Whether every one of ``topics`` holds kafeed's own records."""
        return all(self.of(t).format == "kafeed" for t in topics)


def load_formats(config_file: Path | None = None, env: Mapping[str, str] | None = None, *,
                 table: Mapping[str, Any] | None = None, **flags: Any) -> FormatSettings:
    """The ``[formats]`` table of the settings file (or ``table``), with ``flags`` (None: not given)
    over every topic; one :class:`~kafeed.errors.ConfigError` when either is wrong."""
    if table is None:
        table = read_settings_file(config_file, env).get("formats", {})
    override: dict[str, Any] = {k: (tuple(v) if k == "meta_fields" else v) for k, v in flags.items()
                if v is not None and v != [] and v != ()}
    try:
        return FormatSettings.model_validate({"topics": dict(table), "override": override})
    except ValidationError as exc:
        raise invalid_settings(exc, what="value formats",
                               hint="Fix the value format flags or the [formats] table of the settings "
                                    "file (docs/formats.md).") from None
