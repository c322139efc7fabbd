"""The one place librdkafka client configs are built.

Connection and security come from :meth:`kafeed.config.ConnectionSettings.client_config`
(which also routes librdkafka's log lines to the ``kafeed.librdkafka`` logger);
a ``stage`` adds the statistics callback that feeds that stage's client metrics
(:mod:`kafeed.telemetry.stats`); ``extra`` is the caller's role-specific part.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.telemetry.stats import client_stats_config


def client_config(connection: ConnectionSettings, extra: Mapping[str, Any] | None = None, *,
                  stage: str | None = None) -> dict[str, Any]:
    """Connection, logger, statistics (when ``stage`` is given) and ``extra``, in that order."""
    conf = connection.client_config()
    if stage is not None:
        conf |= client_stats_config(stage)
    if extra:
        conf |= dict(extra)
    return conf


def admin_client(connection: ConnectionSettings) -> Any:
    """An AdminClient for ``connection``."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(connection))


def read_committed_consumer(connection: ConnectionSettings, extra: Mapping[str, Any] | None = None, *,
                            stage: str | None = None) -> Any:
    """A consumer that sees only committed transactions and never commits on its own."""
    from confluent_kafka import Consumer

    return Consumer(client_config(connection, {
        "enable.auto.commit": False, "isolation.level": "read_committed", **(extra or {})}, stage=stage))
