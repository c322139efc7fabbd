"""Topic planning: partitions from throughput, replication, retention, compression.

Partitions: ``ceil(throughput / per_partition)``, at least 1. The default
per-partition rate, 10 MB/s, is a conservative figure for one partition's
leader on commodity disks with acks=all and one consumer per partition; the
benchmark in ``benchmarks/`` measures this cluster's own figure, which may be
passed as ``per_partition_mbps``.

Replication defaults to ``min(3, brokers)`` and ``min.insync.replicas`` to
``replication - 1`` (at least 1), so one broker may fail without refusing
acks=all writes.
"""

from __future__ import annotations

import math
import re

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafeed.choices import DEFAULT_PER_PARTITION_MBPS, Compression
from kafeed.errors import ConfigError, invalid_settings

_TIME_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_SIZE_UNITS = {"b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4,
               "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}


class TopicPlan(BaseModel):
    """A fully decided topic: what ``create`` will ask the cluster for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9._-]{1,249}$")
    partitions: int = Field(ge=1)
    replication: int = Field(ge=1)
    min_insync_replicas: int = Field(ge=1)
    compression: Compression = "zstd"
    retention_ms: int | None = None
    retention_bytes: int | None = None
    compact: bool = False

    @model_validator(mode="after")
    def _check(self) -> TopicPlan:
        if self.min_insync_replicas > self.replication:
            raise ValueError("min.insync.replicas cannot exceed the replication factor")
        return self

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


def partitions_for(throughput_mbps: float, per_partition_mbps: float) -> int:
    """Partitions needed to carry ``throughput_mbps`` at ``per_partition_mbps`` each."""
    if throughput_mbps <= 0 or per_partition_mbps <= 0:
        raise ConfigError("Throughput and per-partition throughput must be positive.")
    return max(1, math.ceil(throughput_mbps / per_partition_mbps - 1e-9))


def parse_retention(text: str) -> tuple[int | None, int | None]:
    """``"7d"`` → (ms, None); ``"10GiB"`` → (None, bytes); ``"-1"`` / ``"infinite"`` → (-1, None)."""
    value = text.strip().lower()
    if value in ("-1", "infinite", "forever"):
        return -1, None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]+)", value)
    if match:
        number, unit = float(match.group(1)), match.group(2)
        if unit in _TIME_UNITS:
            return int(number * _TIME_UNITS[unit]), None
        if unit in _SIZE_UNITS:
            return None, int(number * _SIZE_UNITS[unit])
    raise ConfigError(
        f"Retention {text!r} is neither a time nor a size.",
        hint="Use e.g. 12h, 7d, 500ms, 10GiB, 200MB or infinite.",
    )


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
    if (partitions is None) == (throughput_mbps is None):
        raise ConfigError("Give exactly one of --partitions or --throughput-mbps.")
    if partitions is None:
        assert throughput_mbps is not None
        partitions = partitions_for(throughput_mbps, per_partition_mbps)
    if brokers < 1:
        raise ConfigError("The cluster reports no brokers.")
    replication = replication if replication is not None else min(3, brokers)
    if replication > brokers:
        raise ConfigError(
            f"Replication {replication} needs {replication} brokers; the cluster has {brokers}.",
            hint="Lower --replication or add brokers.",
        )
    min_isr = min_insync_replicas if min_insync_replicas is not None else max(1, replication - 1)
    retention_ms, retention_bytes = parse_retention(retention) if retention else (None, None)
    try:
        return TopicPlan(
            name=name, partitions=partitions, replication=replication,
            min_insync_replicas=min_isr, compression=compression,
            retention_ms=retention_ms, retention_bytes=retention_bytes, compact=compact,
        )
    except ValueError as exc:
        raise invalid_settings(exc, what=f"topic plan for {name!r}") from None
