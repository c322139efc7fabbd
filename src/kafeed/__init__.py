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
from kafeed.ingest import IngestOptions, IngestSummary, ingest

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
    "ResumeMismatch",
    "SchemaError",
    "ToolMissing",
    "TopicError",
    "__version__",
    "ingest",
    "load_connection",
]
