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
from kafeed.prepare import (
    PrepareSettings,
    PrepareStats,
    load_prepare_settings,
    run_prepare,
)

logging.getLogger("kafeed").addHandler(logging.NullHandler())

__version__ = "0.1.0"

__all__ = [
    "BrokerError",
    "BrokerUnavailable",
    "ConfigError",
    "ConnectionSettings",
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
