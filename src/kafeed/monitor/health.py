"""Broker and partition health read from cluster metadata through the admin API.

Under-replicated: ISR smaller than the replica set. Offline: no leader
(leader -1). Under min ISR: ISR smaller than the topic's ``min.insync.replicas``
(acks=all producers get NOT_ENOUGH_REPLICAS there). The controller is the one
DescribeCluster names, read every poll at no cost; under KRaft brokers answer
with some live broker rather than the quorum leader, which `kafeed broker status`
asks MetadataQuorumCommand for.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from typing import Any

log = logging.getLogger("kafeed")


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class PartitionProblem:
    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    problems: list[str]  # under_replicated, offline, under_min_isr


@dataclass(frozen=True)
class ClusterHealth:
    brokers: list[BrokerInfo]
    controller_id: int | None
    partitions_total: int
    under_replicated: int
    offline: int
    under_min_isr: int
    problems: list[PartitionProblem] = field(default_factory=list)
    #: (topic, partition) -> high watermark, for topics whose offsets could be read
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("high_watermarks")
        out["broker_ids"] = sorted(b.node_id for b in self.brokers)
        return out


def partition_problems(leader: int, replicas: list[int], isr: list[int], min_isr: int) -> list[str]:
    """What is wrong with one partition, from its metadata and its topic's min ISR."""
    problems = []
    if leader < 0:
        problems.append("offline")
    if len(isr) < len(replicas):
        problems.append("under_replicated")
    if len(isr) < min_isr:
        problems.append("under_min_isr")
    return problems


def _min_isr(admin: Any, topics: list[str], timeout: float) -> dict[str, int]:
    from kafeed.kafka.types import ConfigResource

    if not topics:
        return {}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, t) for t in topics]
    out: dict[str, int] = {}
    for res, future in admin.describe_configs(resources, request_timeout=timeout).items():
        try:
            entries = future.result(timeout=timeout)
            entry = entries.get("min.insync.replicas")
            out[res.name] = int(entry.value) if entry is not None and entry.value else 1
        except Exception as exc:  # a topic deleted between calls: skip it
            log.debug("no configs for topic %s: %s", res.name, exc)
    return out


def _high_watermarks(admin: Any, parts: list[tuple[str, int]], timeout: float) -> dict[tuple[str, int], int]:
    from kafeed.kafka.types import OffsetSpec, TopicPartition

    if not parts:
        return {}
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in parts}
    out: dict[tuple[str, int], int] = {}
    for tp, future in admin.list_offsets(request, request_timeout=timeout).items():
        try:
            out[(tp.topic, tp.partition)] = int(future.result(timeout=timeout).offset)
        except Exception as exc:  # offline partition: no leader to answer
            log.debug("no high watermark for %s-%d: %s", tp.topic, tp.partition, exc)
    return out


def read_cluster_health(admin: Any, *, timeout: float = 10.0) -> ClusterHealth:
    """One look at the cluster: brokers, controller, partition health, high watermarks."""
    meta = admin.list_topics(timeout=timeout)
    desc = admin.describe_cluster(request_timeout=timeout).result(timeout=timeout)
    brokers = sorted((BrokerInfo(b.id, b.host, b.port) for b in meta.brokers.values()),
                     key=lambda b: b.node_id)
    controller = desc.controller.id if desc.controller is not None else None
    topics = sorted(name for name, t in meta.topics.items() if t.error is None)
    min_isr = _min_isr(admin, topics, timeout)
    problems: list[PartitionProblem] = []
    counts = {"under_replicated": 0, "offline": 0, "under_min_isr": 0}
    total = 0
    parts: list[tuple[str, int]] = []
    for name in topics:
        for p in sorted(meta.topics[name].partitions.values(), key=lambda p: p.id):
            total += 1
            found = partition_problems(p.leader, list(p.replicas), list(p.isrs), min_isr.get(name, 1))
            for kind in found:
                counts[kind] += 1
            if found:
                problems.append(PartitionProblem(name, p.id, p.leader, list(p.replicas), list(p.isrs), found))
            if p.leader >= 0:
                parts.append((name, p.id))
    return ClusterHealth(
        brokers=brokers, controller_id=controller, partitions_total=total,
        under_replicated=counts["under_replicated"], offline=counts["offline"],
        under_min_isr=counts["under_min_isr"], problems=problems,
        high_watermarks=_high_watermarks(admin, parts, timeout),
    )
