"""Settings of the exactly-once core: client knobs and what one stage reads and writes."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafeed.choices import Compression, OffsetReset
from kafeed.kafka.drain import SESSION_TIMEOUT_MS

TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"  # Kafka's legal topic names


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class KafkaTuning(_Frozen):
    """Client knobs chosen by measurement (docs/prepare.md, "Tuning")."""

    # A batch (one transaction) closes at batch_size records, at batch_max_bytes of input
    # values, or consume_timeout_s after it started, whichever comes first; it is gathered
    # over consume calls of at most poll_records each (one call when batch_size <= poll_records).
    batch_size: int = Field(default=2000, ge=1, le=1_000_000)
    poll_records: int = Field(default=2000, ge=1, le=1_000_000)
    batch_max_bytes: int = Field(default=67_108_864, ge=1024)
    consume_timeout_s: float = Field(default=0.5, gt=0, le=60)
    linger_ms: int = Field(default=20, ge=0, le=900_000)  # librdkafka's range
    compression: Compression = "lz4"
    fetch_max_bytes: int = Field(default=52_428_800, ge=1024)
    max_partition_fetch_bytes: int = Field(default=4_194_304, ge=1024)
    # At most the broker's default transaction.max.timeout.ms (15 min).
    transaction_timeout_ms: int = Field(default=60_000, ge=1000, le=900_000)
    message_timeout_ms: int | None = Field(default=None, ge=1)  # default: transaction timeout - 5 s
    # The group's session timeout: how long a SIGKILLed member holds its partitions (the same
    # for every stage, kafeed.kafka.drain).
    session_timeout_ms: int = Field(default=SESSION_TIMEOUT_MS, ge=1000, le=3_600_000)
    auto_offset_reset: OffsetReset = "earliest"
    overlap_commit: bool = True  # commit batch N on a helper thread while batch N+1 runs its stages

    @model_validator(mode="after")
    def _check(self) -> KafkaTuning:
        if self.message_timeout_ms is not None and self.message_timeout_ms >= self.transaction_timeout_ms:
            raise ValueError("message_timeout_ms must be below transaction_timeout_ms")
        return self

    def effective_message_timeout_ms(self) -> int:
        if self.message_timeout_ms is not None:
            return self.message_timeout_ms
        return max(500, self.transaction_timeout_ms - 5000)
class StreamSettings(_Frozen):
    """One stage's topics and group; every stage builds this from its own settings.

    ``inputs``: the topics the stage's consumer subscribes to (one or more); drains and lag
    cover every partition of each. A stage with state (``changelog_topic``) or an input
    purge reads one: changelog partition ``p`` holds the state of input partition ``p``.
    """

    inputs: tuple[Annotated[str, Field(pattern=TOPIC_PATTERN)], ...] = Field(min_length=1)
    outputs: tuple[str, ...] = Field(min_length=1)  # created (co-partitioned) when missing
    group: str = Field(min_length=1)
    dlq_topic: str = Field(pattern=TOPIC_PATTERN)
    changelog_topic: str | None = Field(default=None, pattern=TOPIC_PATTERN)  # None: no state
    instance: str | None = None  # default: <hostname>-<free local slot>
    create_topics: bool = True
    idle_s: float = Field(default=3.0, gt=0)
    # A drain (--until-caught-up) fails when no partition of the input moved for this long
    # (None: kafeed.kafka.drain's STALL_SESSIONS session timeouts).
    drain_stall_s: float | None = Field(default=None, gt=0)
    state_rebuild_timeout_s: float = Field(default=120.0, gt=0)
    # Delete the input's committed records at most this often (None: never). Only for an
    # internal topic that this stage's group alone reads: other readers would lose them.
    purge_input_every_s: float | None = Field(default=None, gt=0)
    kafka: KafkaTuning = KafkaTuning()

    @model_validator(mode="after")
    def _check(self) -> StreamSettings:
        names = [*self.inputs, *self.outputs, self.dlq_topic]
        if self.changelog_topic is not None:
            names.append(self.changelog_topic)
        if len(set(names)) != len(names):
            raise ValueError("input, output, dlq and changelog topics must all differ")
        stateful = self.changelog_topic is not None or self.purge_input_every_s is not None
        if len(self.inputs) > 1 and stateful:
            raise ValueError("a stage with state or an input purge reads one input topic")
        return self
