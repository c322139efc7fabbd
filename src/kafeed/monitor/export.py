"""A :class:`Snapshot` into the cluster-side ``kafeed_*`` gauges (``--prometheus-port``).

Label sets that disappear (a deleted group, a topic gone) are removed, so a
scrape never shows a stale lag forever.
"""

from __future__ import annotations

from prometheus_client import Gauge

from kafeed.monitor.alerts import Condition
from kafeed.monitor.lag import GROUP_CODES, STATUS_CODES
from kafeed.monitor.snapshot import Snapshot
from kafeed.telemetry import metrics as m

_seen: dict[str, set[tuple[str, ...]]] = {}
QUEUE_STATES = ("queued", "in_flight", "done", "failed", "parked", "cancelled")


def _set_all(gauge: Gauge, name: str, values: dict[tuple[str, ...], float]) -> None:
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    for stale in _seen.get(name, set()) - values.keys():
        try:
            gauge.remove(*stale)
        except KeyError:
            pass
    _seen[name] = set(values)


def export_unreachable(firing: list[Condition]) -> None:
    """No broker answered: say so (0 brokers up) and keep the rest as last seen."""
    m.BROKERS_UP.set(0)
    _set_all(m.ALERTS_FIRING, "alerts", {(c.rule, c.subject): 1.0 for c in firing})


def export_snapshot(snapshot: Snapshot, firing: list[Condition] | None = None) -> None:
    """Set every cluster-side gauge from ``snapshot`` (and the firing alerts)."""
    health = snapshot.health
    m.BROKERS_UP.set(snapshot.brokers_up)
    m.BROKERS_EXPECTED.set(snapshot.brokers_expected)
    m.ACTIVE_CONTROLLER.set(-1 if health.controller_id is None else health.controller_id)
    for state, count in (("total", health.partitions_total), ("under_replicated", health.under_replicated),
                         ("offline", health.offline), ("under_min_isr", health.under_min_isr)):
        m.PARTITIONS.labels(state=state).set(count)
    _set_all(m.HIGH_WATERMARK, "hw", {
        (t, str(p)): hw for (t, p), hw in health.high_watermarks.items() if not t.startswith("__")})
    _set_all(m.TOPIC_IN_RATE, "in", {
        (t, ): v["in_rate"] for t, v in snapshot.topics.items() if v["in_rate"] is not None})
    out_rates: dict[tuple[str, ...], float] = {}
    lag: dict[tuple[str, ...], float] = {}
    status: dict[tuple[str, ...], float] = {}
    group_status: dict[tuple[str, ...], float] = {}
    for view in snapshot.groups:
        group = view.lag.group
        group_status[(group,)] = GROUP_CODES[view.lag.status]
        for topic, rate in view.out_rates.items():
            out_rates[(topic, group)] = rate
        for p in view.lag.partitions:
            lag[(group, p.topic, str(p.partition))] = p.lag
            status[(group, p.topic, str(p.partition))] = STATUS_CODES[p.status]
    _set_all(m.TOPIC_OUT_RATE, "out", out_rates)
    _set_all(m.CONSUMER_LAG, "lag", lag)
    _set_all(m.PARTITION_STATUS, "pstatus", status)
    _set_all(m.GROUP_STATUS, "gstatus", group_status)
    used: dict[tuple[str, ...], float] = {}
    free: dict[tuple[str, ...], float] = {}
    ratio: dict[tuple[str, ...], float] = {}
    for d in snapshot.disk:
        key = (str(d.broker), d.log_dir)
        used[key] = d.used_bytes
        if d.free_bytes is not None:
            free[key] = d.free_bytes
        if d.used_ratio is not None:
            ratio[key] = d.used_ratio
    _set_all(m.DISK_USED, "used", used)
    _set_all(m.DISK_FREE, "free", free)
    _set_all(m.DISK_USED_RATIO, "ratio", ratio)
    queue: dict[tuple[str, ...], float] = {}
    oldest: dict[tuple[str, ...], float] = {}
    for q in snapshot.queues:
        for state in QUEUE_STATES:
            queue[(q["prefix"], q["kind"], state)] = q[state]
        oldest[(q["prefix"], q["kind"])] = q["oldest_waiting_s"] or 0.0
    _set_all(m.TASK_QUEUE, "queue", queue)
    _set_all(m.TASK_OLDEST_WAIT, "oldest", oldest)
    _set_all(m.MIRROR_BEHIND, "mirror", {(s["site"],): s["behind_records"] for s in snapshot.sites
                                         if s["reachable"]})
    if firing is not None:
        _set_all(m.ALERTS_FIRING, "alerts", {(c.rule, c.subject): 1.0 for c in firing})
