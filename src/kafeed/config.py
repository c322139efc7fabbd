"""Connection settings shared by every command, validated once at the edge.

Precedence, highest first: explicit arguments (CLI flags), environment
variables (``KAFEED_BOOTSTRAP``, ``KAFEED_SECURITY_PROTOCOL``,
``KAFEED_SASL_MECHANISM``, ``KAFEED_SASL_USERNAME``, ``KAFEED_SASL_PASSWORD``,
``KAFEED_SSL_CA_LOCATION``, ``KAFEED_CLIENT_ID``, ``KAFEED_OAUTH_*``), the ``[connection]`` table of
a TOML settings file (``--config`` or ``KAFEED_CONFIG``), then defaults.

A value that is given counts even when it is empty: ``--bootstrap ''`` or an
empty ``KAFEED_BOOTSTRAP`` is an error, never a silent fall back to the default.
Bootstrap servers are ``host:port`` with an explicit port (1-65535); IPv6
addresses are written ``[addr]:port``.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

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
    "oauth_token_endpoint": "KAFEED_OAUTH_TOKEN_ENDPOINT",
    "oauth_client_id": "KAFEED_OAUTH_CLIENT_ID",
    "oauth_client_secret": "KAFEED_OAUTH_CLIENT_SECRET",
    "oauth_scope": "KAFEED_OAUTH_SCOPE",
}


def parse_bootstrap(text: str) -> list[tuple[str, int]]:
    """``host:port,...`` as ``(host, port)`` pairs; ``ValueError`` names the first bad entry.

    A missing port is an error rather than librdkafka's silent 9092: a bootstrap
    without one is more often a typo than a wish for the default.
    """
    servers = [s.strip() for s in text.split(",") if s.strip()]
    if not servers:
        raise ValueError("should name at least one host:port")
    pairs = []
    for server in servers:
        address = server.split("://", 1)[1] if "://" in server else server
        if address.startswith("["):  # [IPv6]:port
            host, _, port = address[1:].partition("]")
            port = port.removeprefix(":") if port.startswith(":") else ""
        else:
            host, _, port = address.rpartition(":")
        which = f"{server!r} " if len(servers) > 1 else ""
        if not host or (":" in host and not address.startswith("[")):
            raise ValueError(f"{which}should be host:port (the port is required; IPv6 as [addr]:port)")
        if not port.isascii() or not port.isdigit():
            raise ValueError(f"{which}should end in :port, a number")
        if not 1 <= int(port) <= 65535:
            raise ValueError(f"{which}should have a port between 1 and 65535")
        pairs.append((host, int(port)))
    return pairs


class ConnectionSettings(BaseModel):
    """How to reach a Kafka cluster. Passwords and secrets are ``SecretStr``: never printed.

    SASL with ``PLAIN``/``SCRAM-*`` takes a username and password; ``OAUTHBEARER`` fetches
    tokens from an OIDC ``oauth_token_endpoint`` with a client id and secret instead.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    bootstrap: str = DEFAULT_BOOTSTRAP
    security_protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: Path | None = None
    client_id: str = "kafeed"
    oauth_token_endpoint: str | None = None
    oauth_client_id: str | None = None
    oauth_client_secret: SecretStr | None = None
    oauth_scope: str | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _not_blank(cls, value: Any) -> Any:
        # An empty flag or variable is a mistake to report, not a value to pass to librdkafka.
        if isinstance(value, str) and not value.strip():
            raise ValueError("should not be empty")
        return value

    @field_validator("bootstrap")
    @classmethod
    def _check_bootstrap(cls, value: str) -> str:
        parse_bootstrap(value)
        return ",".join(s.strip() for s in value.split(",") if s.strip())

    @field_validator("ssl_ca_location")
    @classmethod
    def _ca_readable(cls, value: Path | None) -> Path | None:
        # librdkafka reads it only when a client is created, and then says "BIO lib".
        if value is None or value.is_dir():  # a directory of hashed certificates is allowed
            return value
        try:
            with value.open("rb") as fh:
                head = fh.read(1 << 20)
        except FileNotFoundError:
            raise ValueError("the CA file does not exist") from None
        except OSError as exc:
            raise ValueError(f"the CA file cannot be read ({exc.strerror or exc})") from None
        if b"-----BEGIN CERTIFICATE-----" not in head:
            raise ValueError("the CA file holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        return value

    @model_validator(mode="after")
    def _check(self) -> ConnectionSettings:
        if self.security_protocol.startswith("SASL"):
            needed = (("sasl_mechanism", "oauth_token_endpoint", "oauth_client_id", "oauth_client_secret")
                      if self.sasl_mechanism == "OAUTHBEARER"
                      else ("sasl_mechanism", "sasl_username", "sasl_password"))
            missing = [name for name in needed if getattr(self, name) is None]
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
        if self.sasl_mechanism == "OAUTHBEARER" and self.oauth_token_endpoint is not None:
            conf["sasl.oauthbearer.method"] = "oidc"
            conf["sasl.oauthbearer.token.endpoint.url"] = self.oauth_token_endpoint
            conf["sasl.oauthbearer.client.id"] = self.oauth_client_id
            if self.oauth_client_secret is not None:
                conf["sasl.oauthbearer.client.secret"] = self.oauth_client_secret.get_secret_value()
            if self.oauth_scope is not None:
                conf["sasl.oauthbearer.scope"] = self.oauth_scope
        return conf


def directory_problem(path: Path) -> str | None:
    """Why ``path`` cannot be a directory kafeed creates or writes into, else None: it, or
    the nearest part of it that exists, is not a directory. Checked where the path enters
    (an option, a settings model), not when the first write fails minutes into a run."""
    probe = path.absolute()
    while True:
        try:
            if probe.is_dir():
                return _takes_entries(path, probe)
            if probe.exists():
                break
        except OSError as exc:
            return f"{path} cannot be used: {str(exc.strerror or exc).lower()}"
        if probe == probe.parent:
            return None
        probe = probe.parent
    if probe == path.absolute():
        return f"{path} is a file, not a directory"
    return f"{path} cannot be created: {probe} is a file"


#: The most a TOML file kafeed reads may hold.
MAX_SETTINGS_BYTES = 4 << 20


def _takes_entries(path: Path, folder: Path) -> str | None:
    """Whether ``folder`` (``path`` or its nearest existing part) takes new entries, found by
    making one and removing it: permissions alone do not tell (/proc refuses root too)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".kafeed-probe-", dir=folder))
    except OSError as exc:
        reason = str(exc.strerror or exc).lower()
        if folder == path.absolute():
            return f"{path} cannot be written into: {reason}"
        return f"{path} cannot be created in {folder}: {reason}"
    return None


def read_toml(path: Path, *, what: str, option: str) -> dict[str, Any]:
    """The TOML document at ``path``; :class:`ConfigError` (exit 2) for a path that is
    missing, a directory, not a regular file, larger than :data:`MAX_SETTINGS_BYTES`,
    unreadable, not UTF-8 text or not TOML. ``what`` names the file
    in the message ("Settings file"), ``option`` the flag that gave it."""
    try:
        # A FIFO would block the open, a device (/dev/zero) would never end: regular files only,
        # read no further than a settings file could reasonably be.
        if path.exists() and not path.is_dir() and not stat.S_ISREG(path.stat().st_mode):
            raise ConfigError(f"{what} {path} is not a regular file (a pipe, device or socket).",
                              hint=f"Pass a TOML file to {option}.")
        with path.open("rb") as fh:
            text = fh.read(MAX_SETTINGS_BYTES + 1)
        if len(text) > MAX_SETTINGS_BYTES:
            raise ConfigError(f"{what} {path} is larger than {MAX_SETTINGS_BYTES // (1 << 20)} MiB, "
                              "more than settings ever are.", hint=f"Pass a TOML file to {option}.")
        return tomllib.loads(text.decode())
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist.", hint=f"Pass an existing {option} file.") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a directory, not a file.",
                          hint=f"Pass a TOML file to {option}.") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read: {exc.strerror or exc}.",
                          hint=f"Pass a readable {option} file.") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not valid TOML: it is not UTF-8 text.",
                          hint=f"Pass a TOML file to {option}.") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML: {exc}.") from None


def read_settings_file(path: Path | None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Parse the TOML settings file (``path``, else ``$KAFEED_CONFIG``); ``{}`` when none."""
    env = os.environ if env is None else env
    option = "--config"
    if path is None and env.get("KAFEED_CONFIG"):
        path, option = Path(env["KAFEED_CONFIG"]), "KAFEED_CONFIG"
    if path is None:
        return {}
    return read_toml(path, what="Settings file", option=option)


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
    origin = {field: "the [connection] table" for field in values}
    for field, key in _ENV_KEYS.items():
        if key in env:  # set but empty counts: validation refuses it
            values[field], origin[field] = env[key], key
    if bootstrap is not None:
        values["bootstrap"], origin["bootstrap"] = bootstrap, "--bootstrap"
    for field, value in overrides.items():
        if value is not None:
            values[field], origin[field] = value, f"--{field.replace('_', '-')}"
    try:
        return ConnectionSettings(**values)
    except ValidationError as exc:
        bad = sorted({str(e["loc"][0]) for e in exc.errors() if e.get("loc")} & origin.keys())
        where = ", ".join(dict.fromkeys(origin[field] for field in bad))
        raise invalid_settings(
            exc, what="connection settings",
            hint=f"Fix {where}." if where
            else "Fix --bootstrap, the KAFEED_* variables or the [connection] table.",
        ) from None
