"""Operating kafeed: pipeline metrics, cluster health, Burrow lag, disk, alerts, reports.

Pipeline stages import :mod:`kafeed.monitor.metrics` (the ``kafeed_*`` metrics),
:func:`serve_metrics`, :func:`librdkafka_stats_callback` and :class:`MetricsRecorder`;
``kafeed monitor`` builds on :class:`ClusterMonitor`. See docs/monitor.md.
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
from kafeed.monitor.metrics import REGISTRY, serve_metrics, stop_metrics_servers
from kafeed.monitor.recorder import METRICS_FILE, MetricsRecorder
from kafeed.monitor.stats import client_stats_config, librdkafka_stats_callback
from kafeed.monitor.watch import ClusterMonitor, MonitorOptions, Snapshot

__all__ = [
    "METRICS_FILE",
    "REGISTRY",
    "AlertEngine",
    "AlertEvent",
    "AlertSettings",
    "ClusterMonitor",
    "Condition",
    "GroupLag",
    "LagTracker",
    "MetricsRecorder",
    "MonitorOptions",
    "Observation",
    "PartitionLag",
    "Snapshot",
    "client_stats_config",
    "evaluate_partition",
    "group_state",
    "librdkafka_stats_callback",
    "load_alert_settings",
    "serve_metrics",
    "stop_metrics_servers",
]
