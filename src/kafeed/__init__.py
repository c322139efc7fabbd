"""kafeed: feed a training job from Apache Kafka."""

from __future__ import annotations

import logging

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
from kafeed.prepare import (
    PrepareSettings,
    PrepareStats,
    load_prepare_settings,
    run_prepare,
)

# `ingest` the function stays at kafeed.ingest.ingest: exporting it here would shadow the
# kafeed.ingest subpackage attribute and break `kafeed.ingest.ingest(...)`.
from kafeed.ingest import IngestOptions, IngestSummary

logging.getLogger("kafeed").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "BrokerError",
    "BrokerUnavailable",
    "ConfigError",
    "ConnectionSettings",
    "IngestError",
    "IngestOptions",
    "IngestSummary",
    "KafeedError",
    "KafkaOperationError",
    "PrepareSettings",
    "PrepareStats",
    "ResumeMismatch",
    "SchemaError",
    "ToolMissing",
    "TopicError",
    "__version__",
    "load_connection",
    "load_prepare_settings",
    "run_prepare",
]
