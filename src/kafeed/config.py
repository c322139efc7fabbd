"""Connection settings shared by every command, validated once at the edge.

Precedence, highest first: explicit arguments (CLI flags), environment
variables (``KAFEED_BOOTSTRAP``, ``KAFEED_SECURITY_PROTOCOL``,
``KAFEED_SASL_MECHANISM``, ``KAFEED_SASL_USERNAME``, ``KAFEED_SASL_PASSWORD``,
``KAFEED_SSL_CA_LOCATION``, ``KAFEED_CLIENT_ID``), the ``[connection]`` table of
a TOML settings file (``--config`` or ``KAFEED_CONFIG``), then defaults.
"""

from __future__ import annotations

import logging
import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError, model_validator

from kafeed.choices import DEFAULT_BOOTSTRAP, SaslMechanism, SecurityProtocol
from kafeed.errors import ConfigError, invalid_settings

_ENV_KEYS = {
    "bootstrap": "KAFEED_BOOTSTRAP",
    "security_protocol": "KAFEED_SECURITY_PROTOCOL",
    "sasl_mechanism": "KAFEED_SASL_MECHANISM",
    "sasl_username": "KAFEED_SASL_USERNAME",
    "sasl_password": "KAFEED_SASL_PASSWORD",
    "ssl_ca_location": "KAFEED_SSL_CA_LOCATION",
    "client_id": "KAFEED_CLIENT_ID",
}


class ConnectionSettings(BaseModel):
    """How to reach a Kafka cluster. ``sasl_password`` is a ``SecretStr``: never printed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap: str = DEFAULT_BOOTSTRAP
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: Path | None = None
    client_id: str = "kafeed"

    @model_validator(mode="after")
    def _check(self) -> ConnectionSettings:
        servers = [s.strip() for s in self.bootstrap.split(",") if s.strip()]
        if not servers:
            raise ValueError("bootstrap must name at least one host:port")
        for server in servers:
            host, _, port = server.rpartition(":")
            if not host or not port.isdigit():
                raise ValueError(f"bootstrap server {server!r} is not host:port")
        if self.security_protocol.startswith("SASL"):
            missing = [
                name
                for name in ("sasl_mechanism", "sasl_username", "sasl_password")
                if getattr(self, name) is None
            ]
            if missing:
                raise ValueError(
                    f"security_protocol {self.security_protocol} needs {', '.join(missing)}"
                )
        return self

    def client_config(self) -> dict[str, Any]:
        """The librdkafka properties for this connection (secrets included: do not log)."""
        conf: dict[str, Any] = {
            # librdkafka's log lines go through logging, not straight to stderr.
            "logger": logging.getLogger("kafeed.librdkafka"),
            "bootstrap.servers": self.bootstrap,
            "security.protocol": self.security_protocol,
            "client.id": self.client_id,
        }
        if self.sasl_mechanism is not None:
            conf["sasl.mechanism"] = self.sasl_mechanism
        if self.sasl_username is not None:
            conf["sasl.username"] = self.sasl_username
        if self.sasl_password is not None:
            conf["sasl.password"] = self.sasl_password.get_secret_value()
        if self.ssl_ca_location is not None:
            conf["ssl.ca.location"] = str(self.ssl_ca_location)
        return conf


def read_settings_file(path: Path | None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parse the TOML settings file (``path``, else ``$KAFEED_CONFIG``); ``{}`` when none."""
    env = os.environ if env is None else env
    if path is None and env.get("KAFEED_CONFIG"):
        path = Path(env["KAFEED_CONFIG"])
    if path is None:
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(
            f"Settings file {path} does not exist.", hint="Pass an existing --config file."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"Settings file {path} is not valid TOML: {exc}.") from exc


def load_connection(
    *,
    bootstrap: str | None = None,
    config_file: Path | None = None,
    env: Mapping[str, str] | None = None,
    **overrides: Any,
) -> ConnectionSettings:
    """Build :class:`ConnectionSettings` from flags, environment and settings file."""
    env = os.environ if env is None else env
    values: dict[str, Any] = dict(read_settings_file(config_file, env).get("connection", {}))
    for field, key in _ENV_KEYS.items():
        if env.get(key):
            values[field] = env[key]
    if bootstrap:
        values["bootstrap"] = bootstrap
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return ConnectionSettings(**values)
    except ValidationError as exc:
        raise invalid_settings(
            exc, what="connection settings",
            hint="Fix --bootstrap, the KAFEED_* variables or the [connection] table.",
        ) from None
