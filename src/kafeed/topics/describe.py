"""What `kafeed topic describe` shows: partitions, their leaders, replicas and ends, and configs."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError, TopicError, UnknownTopic
from kafeed.kafka.translate import is_transient


@dataclass(frozen=True)
class PartitionInfo:
    partition: int
    leader: int | None
    replicas: list[int]
    isr: list[int]
    high_watermark: int
    size_bytes: int | None


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: list[PartitionInfo]
    configs: dict[str, str]

    @property
    def replication(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["replication"] = self.replication
        return out


def describe_topic(admin: Any, settings: ConnectionSettings, meta: Any, *, timeout: float,
                   sizes: bool) -> TopicInfo:
    """``meta`` (a topic's metadata, read by ``admin``) with high watermarks, non-default
    configs and, when ``sizes``, each partition's bytes on disk."""
    from kafeed.kafka.types import ConfigResource, OffsetSpec, TopicPartition

    name = meta.topic
    parts = sorted(meta.partitions.values(), key=lambda p: p.id)
    for attempt in range(6):
        try:
            offsets = admin.list_offsets(
                {TopicPartition(name, p.id): OffsetSpec.latest() for p in parts},
                request_timeout=timeout,
            )
            hw = {tp.partition: f.result(timeout=timeout).offset for tp, f in offsets.items()}
            res = ConfigResource(ConfigResource.Type.TOPIC, name)
            entries = admin.describe_configs([res], request_timeout=timeout)[res].result(timeout=timeout)
            break
        except KafeedError as exc:
            # Leadership moves right after creation or a broker loss: retry those.
            if attempt < 5 and is_transient(exc):
                time.sleep(0.2 * 2**attempt)
                continue
            if isinstance(exc, UnknownTopic):  # deleted since its metadata was read
                raise TopicError(f"Topic {name!r} does not exist.", hint="See `kafeed topic list`.",
                                 code=exc.code) from exc
            raise
    configs = {k: v.value for k, v in entries.items() if not v.is_default and v.value is not None}
    if sizes:
        from kafeed.jars.tools import log_dir_sizes

        size_map = log_dir_sizes(settings, name)
    else:
        size_map = {}
    return TopicInfo(
        name=name,
        partitions=[
            PartitionInfo(
                partition=p.id, leader=p.leader if p.leader >= 0 else None,
                replicas=list(p.replicas), isr=list(p.isrs),
                high_watermark=hw.get(p.id, -1), size_bytes=size_map.get(p.id),
            )
            for p in parts
        ],
        configs=configs,
    )
