"""The cluster-side monitor: one :meth:`ClusterMonitor.poll` gives one :class:`Snapshot`.

A poll reads metadata (brokers, controller, partition health), high watermarks,
every consumer group's committed offsets, and (less often) disk usage; it keeps
the previous poll to turn offset deltas into rates, and a :class:`LagTracker`
for Burrow's lag rules. Nothing in the pipeline has to change for this.
"""

from __future__ import annotations

import logging
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from kafeed.config import ConnectionSettings
from kafeed.connect import PROBE_TIMEOUT_S, check_reachable
from kafeed.monitor.disk import DiskUsage, local_disk_usage, remote_disk_usage
from kafeed.monitor.groups import GroupOffsetReader
from kafeed.monitor.health import read_cluster_health
from kafeed.monitor.lag import DEFAULT_WINDOW, LagTracker
from kafeed.monitor.snapshot import GroupView, Snapshot

log = logging.getLogger("kafeed")

#: Kafka's own bookkeeping topics: no consumer group's lag is measured on them.
KAFKA_INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class MonitorOptions(BaseModel):
    """How ``kafeed monitor`` polls; ``[monitor]`` in the settings file, CLI flags override."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    interval_s: float = Field(default=5.0, gt=0, allow_inf_nan=False)
    window: int = Field(default=DEFAULT_WINDOW, ge=2)
    allowed_lag: int = Field(default=0, ge=0)
    groups: list[str] | None = None  # None: every group
    data_dir: Path | None = None  # a local cluster's data dir, measured directly
    #: LogDirsCommand starts a JVM: ask remote clusters for disk usage this often only
    disk_interval_s: float = Field(default=60.0, gt=0, allow_inf_nan=False)
    #: metrics endpoints of pipeline stages, read for the producer error rate
    scrape: list[str] = Field(default_factory=list)
    timeout_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)
    #: task queues (`kafeed tasks --prefix`) shown when their results topic exists
    task_prefixes: list[str] = Field(default_factory=lambda: ["tasks"])
    #: reading a queue means reading its topics in full: this often at most
    queues_interval_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    #: a `kafeed mirror` config: show each site's replication lag (docs/federation.md)
    mirror_config: Path | None = None
    #: how far a site is behind is read from the site and the target: this often at most
    mirror_interval_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)
    #: federated jobs (`kafeed federate`) are read from their round logs this often at most
    federate_interval_s: float = Field(default=10.0, gt=0, allow_inf_nan=False)


def scrape_total(url: str, metric: str, *, timeout: float = 3.0) -> float | None:
    """Sum of every sample named ``metric`` at a Prometheus text endpoint; None when unreachable."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            text = response.read().decode()
    except (OSError, ValueError) as exc:
        log.debug("could not scrape %s: %s", url, exc)
        return None
    return sum(s.value for fam in text_string_to_metric_families(text)
               for s in fam.samples if s.name == metric)


class ClusterMonitor:
    """Polls one cluster; keeps what rates, lag windows and broker expectations need."""

    def __init__(self, settings: ConnectionSettings, *, options: MonitorOptions | None = None,
                 expected_brokers: int | None = None) -> None:
        from kafeed.kafka import KafkaClients

        self.settings = settings
        self.options = options or MonitorOptions()
        self._admin = KafkaClients(settings).admin()
        self._groups = GroupOffsetReader(settings, self._admin, timeout=self.options.timeout_s)
        self.tracker = LagTracker(window=self.options.window, allowed_lag=self.options.allowed_lag,
                                  min_span=self.options.window * self.options.interval_s)
        self._expected = expected_brokers
        self._known_brokers: set[int] = set()
        self._prev_time: float | None = None
        self._prev_hw: dict[str, int] = {}
        self._prev_committed: dict[tuple[str, str], int] = {}
        self._prev_errors: float | None = None
        self._disk: list[DiskUsage] = []
        self._disk_time = float("-inf")
        self._queues: list[dict[str, Any]] = []
        self._queues_time = float("-inf")
        self._sites: list[dict[str, Any]] = []
        self._sites_time = float("-inf")
        self._rounds: list[dict[str, Any]] = []
        self._rounds_time = float("-inf")
        if self.options.data_dir is not None:
            # A local cluster knows its nodes: a node already down at the first poll is missing.
            try:
                nodes = {d.broker for d in local_disk_usage(self.options.data_dir)}
            except Exception as exc:
                log.debug("no local cluster in %s: %s", self.options.data_dir, exc)
            else:
                self._known_brokers |= nodes
                self._expected = self._expected or len(nodes)

    def _rate(self, now: float, new: int, old: int | None) -> float | None:
        if old is None or self._prev_time is None or now <= self._prev_time:
            return None
        return round(max(0, new - old) / (now - self._prev_time), 3)

    def _read_disk(self, now: float) -> list[DiskUsage]:
        if self.options.data_dir is not None:
            try:
                return local_disk_usage(self.options.data_dir)
            except Exception as exc:
                log.debug("local disk usage failed: %s", exc)
                return []
        if now - self._disk_time >= self.options.disk_interval_s:
            self._disk = remote_disk_usage(self.settings)
            self._disk_time = now
        return self._disk

    def _producer_error_rate(self, now: float) -> float | None:
        if not self.options.scrape:
            return None
        totals = [scrape_total(url, "kafeed_produce_errors_total") for url in self.options.scrape]
        known = [t for t in totals if t is not None]
        if not known:
            return None
        total = sum(known)
        rate = None
        if self._prev_errors is not None and self._prev_time is not None and now > self._prev_time:
            rate = round(max(0.0, total - self._prev_errors) / (now - self._prev_time), 4)
        self._prev_errors = total
        return rate

    def _read_queues(self, now: float, topics: set[str]) -> list[dict[str, Any]]:
        """The task queues whose results topic exists, read every ``queues_interval_s``."""
        prefixes = [p for p in self.options.task_prefixes if f"{p}.results" in topics]
        if not prefixes:
            self._queues = []
            return []
        if now - self._queues_time < self.options.queues_interval_s:
            return self._queues
        from dataclasses import asdict as as_dict

        from kafeed.errors import KafeedError
        from kafeed.tasks import queue_settings
        from kafeed.tasks.status import queue_status

        queues: list[dict[str, Any]] = []
        for prefix in prefixes:
            try:
                kinds = queue_status(self.settings, queue_settings(prefix=prefix))
            except KafeedError as exc:
                log.warning("could not read the task queues under %r: %s", prefix, exc)
                continue
            for kind in kinds:
                row = as_dict(kind)
                row.pop("running")
                queues.append({"prefix": prefix, **row})
        self._queues, self._queues_time = queues, now
        return queues

    def _read_sites(self, now: float) -> list[dict[str, Any]]:
        """Each mirrored site's replication lag, read every ``mirror_interval_s``."""
        if self.options.mirror_config is None:
            return []
        if now - self._sites_time < self.options.mirror_interval_s:
            return self._sites
        from kafeed.mirror import load_mirror_settings, site_progress

        mirror = load_mirror_settings(self.options.mirror_config)
        target = mirror.target.connection()
        self._sites = [{k: v for k, v in site_progress(s.alias, s.connection(), s.topics, target).as_dict()
                        .items() if k != "partitions"} for s in mirror.sites]
        self._sites_time = now
        return self._sites

    def _read_rounds(self, now: float, topics: set[str]) -> list[dict[str, Any]]:
        """Each federated job on the cluster (a ``<job>.rounds`` topic beside ``<job>.global``):
        its last round from the round log, read every ``federate_interval_s``."""
        jobs = sorted(t.removesuffix(".rounds") for t in topics
                      if t.endswith(".rounds") and t.removesuffix(".rounds") + ".global" in topics)
        if not jobs:
            self._rounds = []
            return []
        if now - self._rounds_time < self.options.federate_interval_s:
            return self._rounds
        from kafeed.errors import KafeedError
        from kafeed.federate.monitoring import job_rounds
        from kafeed.kafka import KafkaClients

        rows = []
        for job in jobs:
            try:
                rows.append(job_rounds(KafkaClients(self.settings), job))
            except KafeedError as exc:
                log.warning("could not read the round log of federated job %r: %s", job, exc)
        self._rounds, self._rounds_time = rows, now
        return rows

    def close(self) -> None:
        """Close the per-group offset readers."""
        self._groups.close()

    def __enter__(self) -> ClusterMonitor:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def poll(self) -> Snapshot:
        """Read the cluster once and evaluate everything against the previous polls."""
        timeout = self.options.timeout_s
        # An unreachable cluster is reported in milliseconds, not after a metadata timeout.
        check_reachable(self.settings, timeout=min(timeout, PROBE_TIMEOUT_S))
        health = read_cluster_health(self._admin, timeout=timeout)
        partitions = sorted(tp for tp in health.high_watermarks if tp[0] not in KAFKA_INTERNAL_TOPICS)
        groups = self._groups.read(partitions, groups=self.options.groups)
        now = time.time()
        ids = {b.node_id for b in health.brokers}
        self._known_brokers |= ids
        if self._expected is None:
            self._expected = len(ids)  # first observation sets the expectation
        missing = sorted(self._known_brokers - ids)

        hw_by_topic: dict[str, int] = {}
        parts_by_topic: dict[str, int] = {}
        for (topic, _part), hw in health.high_watermarks.items():
            hw_by_topic[topic] = hw_by_topic.get(topic, 0) + hw
            parts_by_topic[topic] = parts_by_topic.get(topic, 0) + 1
        topics = {
            t: {"partitions": parts_by_topic[t], "high_watermark": hw,
                "in_rate": self._rate(now, hw, self._prev_hw.get(t))}
            for t, hw in sorted(hw_by_topic.items()) if not t.startswith("__")
        }

        views: list[GroupView] = []
        committed_now: dict[tuple[str, str], int] = {}
        for g in groups:
            per_topic: dict[str, int] = {}
            for (topic, part), offset in g.offsets.items():
                end = health.high_watermarks.get((topic, part))
                if end is None:
                    continue  # partition offline: keep its window as it was
                self.tracker.observe(g.group, topic, part, offset=offset, high_watermark=end, now=now,
                                     active=g.members > 0)
                per_topic[topic] = per_topic.get(topic, 0) + offset
            rates: dict[str, float] = {}
            for topic, total in per_topic.items():
                committed_now[(g.group, topic)] = total
                rate = self._rate(now, total, self._prev_committed.get((g.group, topic)))
                if rate is not None:
                    rates[topic] = rate
            views.append(GroupView(self.tracker.evaluate(g.group, now=now), g.state, g.members, rates))
        for gone in set(self.tracker.groups()) - {g.group for g in groups}:
            self.tracker.forget(gone)

        snapshot = Snapshot(
            time=now, bootstrap=self.settings.bootstrap, health=health,
            brokers_expected=max(self._expected, len(ids)), missing_brokers=missing,
            topics=topics, groups=views, disk=self._read_disk(now),
            producer_error_rate=self._producer_error_rate(now),
            queues=self._read_queues(now, {t for t, _p in health.high_watermarks}),
            sites=self._read_sites(now),
            federated=self._read_rounds(now, {t for t, _p in health.high_watermarks}),
        )
        self._prev_time = now
        self._prev_hw = hw_by_topic
        self._prev_committed = committed_now
        return snapshot
