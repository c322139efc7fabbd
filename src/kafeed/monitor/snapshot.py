"""What one monitor poll saw: a :class:`Snapshot` of the cluster, with a :class:`GroupView`
per consumer group; ``as_dict`` is the JSON that ``kafeed monitor --json`` and the exports
write."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kafeed.monitor.disk import DiskUsage
from kafeed.monitor.health import ClusterHealth
from kafeed.monitor.lag import GroupLag


@dataclass(frozen=True)
class GroupView:
    lag: GroupLag
    state: str
    members: int
    out_rates: dict[str, float]  # topic -> committed messages per second

    def as_dict(self) -> dict[str, Any]:
        return {**self.lag.as_dict(), "state": self.state, "members": self.members,
                "out_rates": self.out_rates}


@dataclass(frozen=True)
class Snapshot:
    time: float
    bootstrap: str
    health: ClusterHealth
    brokers_expected: int
    missing_brokers: list[int]
    topics: dict[str, dict[str, Any]]  # name -> partitions, high_watermark, in_rate
    groups: list[GroupView]
    disk: list[DiskUsage] = field(default_factory=list)
    producer_error_rate: float | None = None
    #: per task kind: prefix, kind, queued, in_flight, done, failed, parked, cancelled, oldest_waiting_s
    queues: list[dict[str, Any]] = field(default_factory=list)
    #: per mirrored site (``--mirror-config``): site, reachable, state, behind_records, last_error
    sites: list[dict[str, Any]] = field(default_factory=list)
    #: per federated job (kafeed federate): its last round (kafeed.federate.monitoring.job_rounds)
    federated: list[dict[str, Any]] = field(default_factory=list)

    @property
    def brokers_up(self) -> int:
        return len(self.health.brokers)

    def as_dict(self) -> dict[str, Any]:
        return {
            "time": self.time,
            "bootstrap": self.bootstrap,
            "brokers_up": self.brokers_up,
            "brokers_expected": self.brokers_expected,
            "missing_brokers": self.missing_brokers,
            "brokers": [asdict(b) for b in self.health.brokers],
            "controller_id": self.health.controller_id,
            "partitions": {
                "total": self.health.partitions_total,
                "under_replicated": self.health.under_replicated,
                "offline": self.health.offline,
                "under_min_isr": self.health.under_min_isr,
            },
            "partition_problems": [asdict(p) for p in self.health.problems],
            "topics": self.topics,
            "groups": [g.as_dict() for g in self.groups],
            "disk": [d.as_dict() for d in self.disk],
            "producer_error_rate": self.producer_error_rate,
            "queues": self.queues,
            "sites": self.sites,
            "federated": self.federated,
        }
