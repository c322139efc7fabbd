"""Topic planning: partitions from throughput, replication, retention, compression.

Partitions: ``ceil(throughput / per_partition)``, at least 1. The default
per-partition rate, 10 MB/s, is a conservative figure for one partition's
leader on commodity disks with acks=all and one consumer per partition; the
benchmark in ``benchmarks/`` measures this cluster's own figure, which may be
passed as ``per_partition_mbps``.

Replication defaults to ``min(3, brokers)`` and ``min.insync.replicas`` to
``replication - 1`` (at least 1), so one broker may fail without refusing
acks=all writes.

A :class:`TopicRequest` is what the user asked for, checked before the cluster is
asked anything; :meth:`TopicRequest.plan` turns it into a :class:`TopicPlan` once
the broker count is known.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from kafeed.choices import DEFAULT_PER_PARTITION_MBPS, Compression
from kafeed.errors import ConfigError, invalid_settings

#: The most partitions kafeed creates in one topic. Each partition is a directory of
#: open segment and index files on every replica and an entry the controller holds in
#: memory; a few thousand per broker is the usual ceiling, so a five-digit count is
#: almost always a typo (or a throughput in bytes rather than MB/s).
MAX_PARTITIONS = 10_000

#: Kafka's rule for topic names ("." and ".." are refused on top of it).
TOPIC_NAME = r"^[A-Za-z0-9._-]{1,249}$"

_TIME_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_SIZE_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}


class TopicPlan(BaseModel):
    """A fully decided topic: what ``create`` will ask the cluster for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    partitions: int = Field(ge=1)
    replication: int = Field(ge=1)
    min_insync_replicas: int = Field(ge=1)
    compression: Compression = "zstd"
    retention_ms: int | None = None
    retention_bytes: int | None = None
    compact: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _kafka_name(value)

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: int) -> int:
        return _sane_partitions(value)

    @field_validator("min_insync_replicas")
    @classmethod
    def _min_isr(cls, value: int, info: ValidationInfo) -> int:
        return _at_most_replication(value, info)

    def configs(self) -> dict[str, str]:
        """Topic-level configuration entries."""
        conf = {
            "min.insync.replicas": str(self.min_insync_replicas),
            "compression.type": "producer" if self.compression == "none" else self.compression,
            "cleanup.policy": "compact" if self.compact else "delete",
        }
        if self.retention_ms is not None:
            conf["retention.ms"] = str(self.retention_ms)
        if self.retention_bytes is not None:
            conf["retention.bytes"] = str(self.retention_bytes)
        return conf


def _kafka_name(name: str) -> str:
    if not re.fullmatch(TOPIC_NAME, name):
        raise ValueError("should be 1 to 249 of the characters A-Z a-z 0-9 . _ - (Kafka's rule)")
    if name in (".", ".."):
        raise ValueError("should not be '.' or '..' (Kafka refuses them)")
    return name


def _sane_partitions(partitions: int) -> int:
    if partitions > MAX_PARTITIONS:
        raise ValueError(f"should be at most {MAX_PARTITIONS:,}: every partition costs open files "
                         "on each replica and controller memory, so more is almost always a typo")
    return partitions


def _at_most_replication(min_isr: int, info: ValidationInfo) -> int:
    replication = info.data.get("replication")
    if replication is not None and min_isr > replication:
        raise ValueError(f"should be at most the replication factor ({replication})")
    return min_isr


def partitions_for(throughput_mbps: float, per_partition_mbps: float) -> int:
    """Partitions needed to carry ``throughput_mbps`` at ``per_partition_mbps`` each."""
    if not (math.isfinite(throughput_mbps) and math.isfinite(per_partition_mbps)) or (
        throughput_mbps <= 0 or per_partition_mbps <= 0
    ):
        raise ConfigError("Throughput and per-partition throughput must be positive and finite.")
    return max(1, math.ceil(throughput_mbps / per_partition_mbps - 1e-9))


_RETENTION_HELP = "12h, 7d, 500ms, 10GiB, 200MB or infinite"


def _retention(text: str) -> tuple[int | None, int | None]:
    value = text.strip().lower()
    if value in ("-1", "infinite", "forever"):
        return -1, None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]+)", value)
    if match:
        number, unit = float(match.group(1)), match.group(2)
        if unit in _TIME_UNITS:
            ms = int(number * _TIME_UNITS[unit])
            if ms >= 1:  # retention.ms=0 would delete every record as soon as it is written
                return ms, None
        elif unit in _SIZE_UNITS:
            size = int(number * _SIZE_UNITS[unit])
            if size >= 1:
                return None, size
    raise ValueError(f"should be a time or size above zero, e.g. {_RETENTION_HELP}")


def parse_retention(text: str) -> tuple[int | None, int | None]:
    """``"7d"`` → (ms, None); ``"10GiB"`` → (None, bytes); ``"-1"`` / ``"infinite"`` → (-1, None)."""
    try:
        return _retention(text)
    except ValueError:
        raise ConfigError(
            f"Retention {text!r} is neither a time nor a size above zero.",
            hint=f"Use e.g. {_RETENTION_HELP}.",
        ) from None


class TopicRequest(BaseModel):
    """A topic as the user asked for it, checked before the cluster is asked anything.

    Exactly one of ``partitions`` and ``throughput_mbps`` sizes it; what depends on
    the cluster (replication against the broker count) is checked by :meth:`plan`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    partitions: int | None = Field(default=None, ge=1)
    per_partition_mbps: float = Field(default=DEFAULT_PER_PARTITION_MBPS, gt=0, allow_inf_nan=False)
    throughput_mbps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    replication: int | None = Field(default=None, ge=1)
    min_insync_replicas: int | None = Field(default=None, ge=1)
    compression: Compression = "zstd"
    retention: str | None = None
    compact: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _kafka_name(value)

    @field_validator("partitions")
    @classmethod
    def _partitions(cls, value: int | None) -> int | None:
        return None if value is None else _sane_partitions(value)

    @field_validator("min_insync_replicas")
    @classmethod
    def _min_isr(cls, value: int | None, info: ValidationInfo) -> int | None:
        return None if value is None else _at_most_replication(value, info)

    @field_validator("throughput_mbps")
    @classmethod
    def _fits(cls, value: float | None, info: ValidationInfo) -> float | None:
        per = info.data.get("per_partition_mbps")
        # Compared as a rate, not as a partition count: 1e300 MB/s has no count worth printing.
        if value is not None and per is not None and value > per * MAX_PARTITIONS:
            raise ValueError(f"more than the {per * MAX_PARTITIONS:,.0f} MB/s that {MAX_PARTITIONS:,} "
                             f"partitions (the most kafeed creates in one topic) carry at {per:g} MB/s each")
        return value

    @field_validator("retention")
    @classmethod
    def _parses(cls, value: str | None) -> str | None:
        if value is not None:
            _retention(value)
        return value

    def plan(self, *, brokers: int) -> TopicPlan:
        """The layout to create on a cluster of ``brokers`` brokers."""
        if brokers < 1:
            raise ConfigError("The cluster reports no brokers.")
        partitions = self.partitions
        if partitions is None:
            if self.throughput_mbps is None:
                raise ConfigError("Give exactly one of --partitions or --throughput-mbps.")
            partitions = partitions_for(self.throughput_mbps, self.per_partition_mbps)
        replication = self.replication if self.replication is not None else min(3, brokers)
        if replication > brokers:
            raise ConfigError(
                f"Replication {replication} needs {replication} brokers; the cluster has {brokers}.",
                hint="Lower --replication or add brokers.",
            )
        min_isr = (self.min_insync_replicas if self.min_insync_replicas is not None
                   else max(1, replication - 1))
        retention_ms, retention_bytes = _retention(self.retention) if self.retention else (None, None)
        try:
            return TopicPlan(
                name=self.name, partitions=partitions, replication=replication,
                min_insync_replicas=min_isr, compression=self.compression,
                retention_ms=retention_ms, retention_bytes=retention_bytes, compact=self.compact,
            )
        except ValueError as exc:
            raise invalid_settings(exc, what="topic settings",
                                   hint="Lower --min-isr or raise --replication.") from None


def topic_request(
    name: str,
    *,
    partitions: int | None = None,
    throughput_mbps: float | None = None,
    per_partition_mbps: float = DEFAULT_PER_PARTITION_MBPS,
    replication: int | None = None,
    min_insync_replicas: int | None = None,
    compression: Compression = "zstd",
    retention: str | None = None,
    compact: bool = False,
) -> TopicRequest:
    """A validated :class:`TopicRequest`; :class:`ConfigError` (one line) when it is not."""
    if (partitions is None) == (throughput_mbps is None):
        raise ConfigError("Give exactly one of --partitions or --throughput-mbps.")
    try:
        return TopicRequest(
            name=name, partitions=partitions, throughput_mbps=throughput_mbps,
            per_partition_mbps=per_partition_mbps, replication=replication,
            min_insync_replicas=min_insync_replicas, compression=compression,
            retention=retention, compact=compact,
        )
    except ValueError as exc:
        raise invalid_settings(exc, what="topic settings") from None


def plan_topic(
    name: str,
    *,
    brokers: int,
    partitions: int | None = None,
    throughput_mbps: float | None = None,
    per_partition_mbps: float = DEFAULT_PER_PARTITION_MBPS,
    replication: int | None = None,
    min_insync_replicas: int | None = None,
    compression: Compression = "zstd",
    retention: str | None = None,
    compact: bool = False,
) -> TopicPlan:
    """Decide a topic's layout from what the user knows (a count or a throughput)."""
    return topic_request(
        name, partitions=partitions, throughput_mbps=throughput_mbps,
        per_partition_mbps=per_partition_mbps, replication=replication,
        min_insync_replicas=min_insync_replicas, compression=compression,
        retention=retention, compact=compact,
    ).plan(brokers=brokers)
