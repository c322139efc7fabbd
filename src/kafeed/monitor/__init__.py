"""Operating kafeed: pipeline metrics, cluster health, Burrow lag, disk, alerts, reports.

Pipeline stages import :mod:`kafeed.telemetry.metrics` (the ``kafeed_*`` metrics),
:func:`serve_metrics`, :func:`librdkafka_stats_callback` and :class:`MetricsRecorder`;
``kafeed monitor`` is :class:`Watch` (polls of a :class:`ClusterMonitor`, the alert rules,
the exported gauges) with a printer. See docs/monitor.md.
"""

from kafeed.monitor.alerts import AlertEngine, AlertEvent, AlertSettings, Condition, load_alert_settings
from kafeed.monitor.lag import (
    GroupLag,
    LagTracker,
    Observation,
    PartitionLag,
    evaluate_partition,
    group_state,
)
from kafeed.monitor.loop import Poll, Watch
from kafeed.monitor.snapshot import Snapshot
from kafeed.monitor.watch import ClusterMonitor, MonitorOptions

__all__ = [
    "AlertEngine",
    "AlertEvent",
    "AlertSettings",
    "ClusterMonitor",
    "Condition",
    "GroupLag",
    "LagTracker",
    "MonitorOptions",
    "Observation",
    "PartitionLag",
    "Poll",
    "Snapshot",
    "Watch",
    "evaluate_partition",
    "group_state",
    "load_alert_settings",
]
