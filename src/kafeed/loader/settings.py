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
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafeed.config import ConnectionSettings

Mode = Literal["static", "group", "replicated"]
Kind = Literal["tokens", "samples"]
OffsetSpec = Literal["earliest", "latest"] | datetime | int | Mapping[int | str, int]
EndSpec = Literal["latest"] | datetime | int | Mapping[int | str, int] | None


class LoaderSettings(BaseModel):
    """Everything a reader needs; built by the datasets from their keyword arguments."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    topics: tuple[str, ...]
    kind: Kind = "tokens"
    connection: ConnectionSettings = ConnectionSettings()
    seq_len: int = Field(default=0, ge=0)
    eos_id: int = Field(default=0, ge=0)
    tokenizer: str | None = None
    start: OffsetSpec = "earliest"
    end: EndSpec = "latest"
    shuffle_buffer: int = Field(default=0, ge=0)
    seed: int = 0
    return_boundaries: bool = False
    drop_last: bool = False
    mode: Mode = "static"
    group: str | None = None
    rank: int | None = Field(default=None, ge=0)
    world_size: int | None = Field(default=None, ge=1)
    consume_batch: int = Field(default=2000, ge=1)
    queue_records: int = Field(default=8000, ge=1)
    poll_timeout_s: float = Field(default=0.5, gt=0)
    broker_timeout_s: float | None = None
    dlq_topic: str | None = None
    consumer_config: Mapping[str, str | int | float | bool] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> LoaderSettings:
        if not self.topics:
            raise ValueError("topics must name at least one topic")
        if self.kind == "tokens" and self.seq_len < 1:
            raise ValueError("seq_len must be at least 1")
        if (self.rank is None) != (self.world_size is None):
            raise ValueError("pass rank and world_size together, or neither")
        if self.rank is not None and self.world_size is not None and self.rank >= self.world_size:
            raise ValueError(f"rank {self.rank} is not below world_size {self.world_size}")
        if self.mode == "group" and not self.group:
            raise ValueError('mode="group" needs group=<consumer group id>')
        return self

    @property
    def bounded(self) -> bool:
        return self.end is not None

    @property
    def window(self) -> int:
        """Tokens per yielded window: ``seq_len + 1`` (inputs and shifted labels)."""
        return self.seq_len + 1
