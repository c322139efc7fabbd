"""kafeed: feed a training job from Apache Kafka.

The public names below load on first use (PEP 562), so ``import kafeed`` and the
command line stay fast and never import torch, the Kafka client or pyarrow until a
name that needs them is touched. The exception tree is imported eagerly: it is tiny.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from kafeed.errors import (
    BrokerError,
    BrokerUnavailable,
    CatalogUnavailable,
    ConfigError,
    IngestError,
    KafeedError,
    KafkaOperationError,
    ResumeMismatch,
    SchemaError,
    ToolMissing,
    TopicError,
)

if TYPE_CHECKING:
    from kafeed.archive import ArchiveSettings, CatalogSettings
    from kafeed.archive.sink import run_archive
    from kafeed.config import ConnectionSettings, load_connection
    from kafeed.federate.config import FederationSettings, load_federation
    from kafeed.formats import FormatSettings, TopicFormat, load_formats
    from kafeed.ingest import IngestOptions, IngestSummary
    from kafeed.loader.dataset import KafkaSampleDataset, KafkaTokenDataset
    from kafeed.loader.file_dataset import FileTokenDataset
    from kafeed.loader.mixture import Mixture
    from kafeed.loader.state.checkpoint import merge_states
    from kafeed.loader.state.rank_states import gather_states
    from kafeed.loader.stream_loader import StreamLoader
    from kafeed.monitor import ClusterMonitor
    from kafeed.prepare import PrepareSettings, PrepareStats, load_prepare_settings, run_prepare
    from kafeed.telemetry import MetricsRecorder, librdkafka_stats_callback, serve_metrics

logging.getLogger("kafeed").addHandler(logging.NullHandler())

__version__ = "0.1.0"

# `ingest` the function stays at kafeed.ingest.ingest: exporting it here would shadow the
# kafeed.ingest subpackage attribute and break `kafeed.ingest.ingest(...)`.
_LAZY = {
    "ArchiveSettings": "kafeed.archive",
    "CatalogSettings": "kafeed.archive",
    "ClusterMonitor": "kafeed.monitor",
    "ConnectionSettings": "kafeed.config",
    "FederationSettings": "kafeed.federate.config",
    "FileTokenDataset": "kafeed.loader",
    "FormatSettings": "kafeed.formats",
    "IngestOptions": "kafeed.ingest",
    "IngestSummary": "kafeed.ingest",
    "KafkaSampleDataset": "kafeed.loader",
    "KafkaTokenDataset": "kafeed.loader",
    "MetricsRecorder": "kafeed.telemetry",
    "Mixture": "kafeed.loader",
    "PrepareSettings": "kafeed.prepare",
    "PrepareStats": "kafeed.prepare",
    "StreamLoader": "kafeed.loader",
    "TopicFormat": "kafeed.formats",
    "gather_states": "kafeed.loader.state.rank_states",
    "librdkafka_stats_callback": "kafeed.telemetry",
    "load_connection": "kafeed.config",
    "load_federation": "kafeed.federate.config",
    "load_formats": "kafeed.formats",
    "load_prepare_settings": "kafeed.prepare",
    "merge_states": "kafeed.loader.state.checkpoint",
    "run_archive": "kafeed.archive.sink",
    "run_prepare": "kafeed.prepare",
    "serve_metrics": "kafeed.telemetry",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'kafeed' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "ArchiveSettings",
    "BrokerError",
    "BrokerUnavailable",
    "CatalogSettings",
    "CatalogUnavailable",
    "ClusterMonitor",
    "ConfigError",
    "ConnectionSettings",
    "FederationSettings",
    "FileTokenDataset",
    "FormatSettings",
    "IngestError",
    "IngestOptions",
    "IngestSummary",
    "KafeedError",
    "KafkaOperationError",
    "KafkaSampleDataset",
    "KafkaTokenDataset",
    "MetricsRecorder",
    "Mixture",
    "PrepareSettings",
    "PrepareStats",
    "ResumeMismatch",
    "SchemaError",
    "StreamLoader",
    "ToolMissing",
    "TopicError",
    "TopicFormat",
    "__version__",
    "gather_states",
    "librdkafka_stats_callback",
    "load_connection",
    "load_federation",
    "load_formats",
    "load_prepare_settings",
    "merge_states",
    "run_archive",
    "run_prepare",
    "serve_metrics",
]
