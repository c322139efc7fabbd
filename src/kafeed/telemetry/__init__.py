"""Telemetry: the ``kafeed_*`` metric registry, librdkafka statistics, the run recorder.

A leaf package: it imports nothing else of kafeed, so every stage (and the loader
inside a DataLoader worker) can report metrics without loading the operator's
tools in :mod:`kafeed.monitor`. See docs/monitor.md for what each stage reports.
"""

from kafeed.telemetry.metrics import REGISTRY, serve_metrics, stop_metrics_servers
from kafeed.telemetry.recorder import METRICS_FILE, MetricsRecorder
from kafeed.telemetry.stats import client_stats_config, librdkafka_stats_callback

__all__ = [
    "METRICS_FILE",
    "REGISTRY",
    "MetricsRecorder",
    "client_stats_config",
    "librdkafka_stats_callback",
    "serve_metrics",
    "stop_metrics_servers",
]
