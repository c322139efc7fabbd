"""Sizing a Kafka cluster for a training fleet: pure arithmetic, every assumption named.

:func:`plan_cluster` turns a fleet (GPUs, tokens each consumes per second, bytes per
token on the ``tokens`` topic) and a retention into partitions, brokers, disk per
broker, network in and out, and prepare workers. The per-broker and per-process
figures are :class:`Capacity` fields with conservative defaults; pass your own measured
ones. ``kafeed plan`` prints the result with the assumptions; docs/scaling.md walks
through a 1,024-GPU and a 16,384-GPU example.

The model, per second, at steady state (data is produced as fast as it is trained on):

- tokens topic: ``T = gpus x tokens_per_gpu_s`` tokens, ``T x bytes_per_token`` bytes;
  raw topic (what prepare reads): ``T x raw_bytes_per_token`` bytes;
- each byte written is written ``replication`` times (leader + followers) and read by
  ``replication - 1`` followers plus every consumer group (trainer, archive, ...);
- partitions of ``tokens``: at least one per reader (kafeed's static assignment gives each
  partition one reader: ``gpus x readers_per_gpu``), enough to carry the rate at
  ``partition_mb_s`` each, rounded up to a multiple of the readers so each gets the same;
- brokers: the most any one limit needs (network in, network out, disk, partition replicas
  per broker, and the replication factor itself), each limit used at ``utilisation``;
- prepare workers: ``T / prepare_tokens_per_s`` processes.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kafeed.choices import PLAN_DEFAULTS as _D
from kafeed.errors import ConfigError

MB = 1_000_000
#: More brokers, partitions or workers than this: the inputs describe no real fleet (a
#: rate typed in the wrong unit, 1e300), and the arithmetic would overflow.
MAX_COUNT = 10**12


def _count(value: float, what: str) -> int:
    """``ceil(value)``, or :class:`ConfigError` when it is beyond any fleet (or not finite)."""
    if not value <= MAX_COUNT:
        raise ConfigError(f"The plan would need more than {MAX_COUNT:,} {what}: the figures given are "
                          "beyond any real fleet.",
                          hint="Check the units of the rates and sizes given (tokens/s per GPU, bytes "
                          "per token, MB/s).")
    return math.ceil(value)


class Capacity(BaseModel):
    """Per-broker and per-process figures the plan assumes (all overridable)."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    broker_net_in_mb_s: float = Field(default=_D["broker_net_in_mb_s"], gt=0)
    broker_net_out_mb_s: float = Field(default=_D["broker_net_out_mb_s"], gt=0)
    broker_disk_tb: float = Field(default=_D["broker_disk_tb"], gt=0)
    max_partition_replicas: int = Field(default=int(_D["max_partition_replicas"]), ge=1)
    partition_mb_s: float = Field(default=_D["partition_mb_s"], gt=0)
    prepare_tokens_per_s: float = Field(default=_D["prepare_tokens_per_s"], gt=0)
    utilisation: float = Field(default=_D["utilisation"], gt=0, le=1)
    readers_per_gpu: int = Field(default=int(_D["readers_per_gpu"]), ge=1, le=256)
    consumer_groups: int = Field(default=int(_D["consumer_groups"]), ge=1, le=1000)
    raw_bytes_per_token: float = Field(default=_D["raw_bytes_per_token"], ge=0)


class FleetRequest(BaseModel):
    """What the fleet consumes."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    gpus: int = Field(ge=1, le=10_000_000)
    tokens_per_gpu_s: float = Field(gt=0)
    bytes_per_token: float = Field(gt=0)
    retention_s: float = Field(gt=0)
    replication: int = Field(default=3, ge=1, le=16)


def plan_cluster(fleet: FleetRequest, capacity: Capacity | None = None) -> dict[str, Any]:
    """The cluster a fleet needs; every figure in bytes, seconds or counts (JSON data)."""
    c = capacity or Capacity()
    tokens_s = fleet.gpus * fleet.tokens_per_gpu_s
    tokens_bytes_s = tokens_s * fleet.bytes_per_token
    raw_bytes_s = tokens_s * c.raw_bytes_per_token
    written_s = tokens_bytes_s + raw_bytes_s  # by producers (ingest into raw, prepare into tokens)
    net_in_s = written_s * fleet.replication  # leaders take the writes, followers the copies
    # Followers fetch the copies; consumers read: tokens by every group, raw by prepare.
    net_out_s = (written_s * (fleet.replication - 1) + tokens_bytes_s * c.consumer_groups
                 + raw_bytes_s)
    stored = written_s * fleet.retention_s * fleet.replication
    readers = fleet.gpus * c.readers_per_gpu
    by_rate = _count(tokens_bytes_s / (c.partition_mb_s * MB) - 1e-9, "partitions")
    partitions = readers * max(1, _count(by_rate / readers, "partitions"))
    raw_partitions = (max(1, _count(raw_bytes_s / (c.partition_mb_s * MB) - 1e-9, "raw partitions"))
                      if raw_bytes_s else 0)
    usable = c.utilisation
    need = {
        "network in": _count(net_in_s / (c.broker_net_in_mb_s * MB * usable), "brokers"),
        "network out": _count(net_out_s / (c.broker_net_out_mb_s * MB * usable), "brokers"),
        "disk": _count(stored / (c.broker_disk_tb * 1e12 * usable), "brokers"),
        "partition replicas": _count((partitions + raw_partitions) * fleet.replication
                                    / (c.max_partition_replicas * usable), "brokers"),
        "replication factor": fleet.replication,
    }
    brokers = max(need.values())
    return {
        "tokens_per_s": tokens_s,
        "tokens_bytes_per_s": tokens_bytes_s,
        "raw_bytes_per_s": raw_bytes_s,
        "readers": readers,
        "partitions": partitions,
        "partitions_per_reader": partitions // readers,
        "raw_partitions": raw_partitions,
        "brokers": brokers,
        "brokers_by_limit": need,
        "limited_by": max(need, key=lambda k: need[k]),
        "network_in_per_s": net_in_s,
        "network_out_per_s": net_out_s,
        "network_in_per_broker_per_s": net_in_s / brokers,
        "network_out_per_broker_per_s": net_out_s / brokers,
        "disk_total": stored,
        "disk_per_broker": stored / brokers,
        "partition_replicas_per_broker": (partitions + raw_partitions) * fleet.replication / brokers,
        "prepare_workers": _count(tokens_s / c.prepare_tokens_per_s - 1e-9, "prepare workers"),
        "assumptions": {**c.model_dump(), "replication": fleet.replication,
                        "retention_s": fleet.retention_s, "bytes_per_token": fleet.bytes_per_token},
    }
