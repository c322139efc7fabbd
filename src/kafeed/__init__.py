"""kafeed: feed a training job from Apache Kafka."""

from __future__ import annotations

import logging

from kafeed.config import ConnectionSettings, load_connection
from kafeed.errors import (
    BrokerError,
    BrokerUnavailable,
    ConfigError,
    KafeedError,
    KafkaOperationError,
    ResumeMismatch,
    SchemaError,
    ToolMissing,
    TopicError,
)
from kafeed.monitor import ClusterMonitor, MetricsRecorder, librdkafka_stats_callback, serve_metrics

logging.getLogger("kafeed").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "BrokerError",
    "BrokerUnavailable",
    "ClusterMonitor",
    "ConfigError",
    "ConnectionSettings",
    "KafeedError",
    "KafkaOperationError",
    "MetricsRecorder",
    "ResumeMismatch",
    "SchemaError",
    "ToolMissing",
    "TopicError",
    "__version__",
    "librdkafka_stats_callback",
    "load_connection",
    "serve_metrics",
]
