"""kafeed: feed a training job from Apache Kafka."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kafeed.config import ConnectionSettings, load_connection
from kafeed.errors import (
    BrokerError,
    BrokerUnavailable,
    ConfigError,
    IngestError,
    KafeedError,
    KafkaOperationError,
    ResumeMismatch,
    SchemaError,
    ToolMissing,
    TopicError,
)

# `ingest` the function stays at kafeed.ingest.ingest: exporting it here would shadow the
# kafeed.ingest subpackage attribute and break `kafeed.ingest.ingest(...)`.
from kafeed.ingest import IngestOptions, IngestSummary
from kafeed.loader.state import merge_states
from kafeed.prepare import (
    PrepareSettings,
    PrepareStats,
    load_prepare_settings,
    run_prepare,
)

if TYPE_CHECKING:
    from kafeed.loader.dataset import KafkaSampleDataset, KafkaTokenDataset
    from kafeed.loader.stream_loader import StreamLoader
from kafeed.monitor import ClusterMonitor, MetricsRecorder, librdkafka_stats_callback, serve_metrics

logging.getLogger("kafeed").addHandler(logging.NullHandler())

__version__ = "0.1.0"

# The torch classes load on first use so that `import kafeed` never imports torch.
_LAZY = {"KafkaSampleDataset", "KafkaTokenDataset", "StreamLoader"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import kafeed.loader

        return getattr(kafeed.loader, name)
    raise AttributeError(f"module 'kafeed' has no attribute {name!r}")


__all__ = [
    "BrokerError",
    "BrokerUnavailable",
    "ClusterMonitor",
    "ConfigError",
    "ConnectionSettings",
    "IngestError",
    "IngestOptions",
    "IngestSummary",
    "KafeedError",
    "KafkaOperationError",
    "KafkaSampleDataset",
    "KafkaTokenDataset",
    "MetricsRecorder",
    "PrepareSettings",
    "PrepareStats",
    "ResumeMismatch",
    "SchemaError",
    "StreamLoader",
    "ToolMissing",
    "TopicError",
    "__version__",
    "librdkafka_stats_callback",
    "load_connection",
    "load_prepare_settings",
    "merge_states",
    "run_prepare",
    "serve_metrics",
]
