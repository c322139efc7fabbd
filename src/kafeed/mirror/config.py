"""The mirror's settings: site clusters, the training (target) cluster, read from one TOML file.

::

    [target]                      # the training cluster
    alias = "train"
    bootstrap = "127.0.0.1:9092"
    # client_file = ".../secure/clients/admin.toml"   # a `broker start --secure` role file

    [[sites]]
    alias = "site-a"              # remote topics are named <alias>.<topic>: site-a.raw
    bootstrap = "10.0.0.5:9092"
    topics = "raw"                # MirrorMaker's list of regular expressions, comma-separated
    # client_file = ".../site-a/secure/clients/admin.toml"

A connection's ``client_file`` is a kafeed settings file with a ``[connection]`` table
(what ``broker start --secure`` writes per role); ``bootstrap`` overrides the one there.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kafeed.config import ConnectionSettings, directory_problem, load_connection, read_settings_file
from kafeed.errors import ConfigError, invalid_settings
from kafeed.home import kafeed_home

# MirrorMaker joins an alias and a topic with "." and names internal topics after aliases.
_ALIAS = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"


class ClusterSettings(BaseModel):
    """One cluster the mirror connects to: an alias and how to reach it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    alias: str = Field(pattern=_ALIAS)
    bootstrap: str | None = None
    client_file: Path | None = None

    @model_validator(mode="after")
    def _reachable_somehow(self) -> ClusterSettings:
        if self.bootstrap is None and self.client_file is None:
            raise ValueError(f"cluster {self.alias!r} needs a bootstrap or a client_file")
        return self

    def connection(self) -> ConnectionSettings:
        """How to reach this cluster (a client file's password stays a ``SecretStr``)."""
        return load_connection(bootstrap=self.bootstrap, config_file=self.client_file, env={},
                               client_id=f"kafeed-mirror-{self.alias}")


class SiteSettings(ClusterSettings):
    """A site cluster and the topics of it to mirror."""

    topics: str = "raw"

    @field_validator("topics")
    @classmethod
    def _patterns_compile(cls, value: str) -> str:
        for pattern in topic_patterns(value):
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a regular expression: {exc}") from None
        if not topic_patterns(value):
            raise ValueError("should name at least one topic pattern")
        return value


class MirrorSettings(BaseModel):
    """Every site mirrored into one target; ``work_dir`` holds the rendered properties and logs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    target: ClusterSettings
    sites: tuple[SiteSettings, ...] = Field(min_length=1)
    work_dir: Path = Field(default_factory=lambda: kafeed_home() / "mirror")
    #: Where this process's Connect REST listener binds (port 0: a free one); the nodes of
    #: one mirror cluster forward task configurations to their leader through it (KIP-710).
    rest_host: str = "127.0.0.1"
    rest_port: int = Field(default=0, ge=0, le=65535)
    tasks_max: int = Field(default=1, ge=1)
    #: How long Connect holds a vanished node's tasks for it before giving them to the others
    #: (``scheduled.rebalance.max.delay.ms``; Connect's default is 5 minutes). A node that
    #: comes back sooner gets its own tasks back without a second rebalance.
    rebalance_delay_s: float = Field(default=30.0, ge=0, le=3600)
    #: The transaction timeout of the tasks' producers. A node killed mid-transaction holds
    #: back every read_committed reader of the partitions it wrote (training consumers, and
    #: the next node reading the offsets topic) until the broker aborts the transaction.
    #: Connect's default is Kafka's 60 s; MirrorMaker's transactions last one poll.
    transaction_timeout_s: float = Field(default=20.0, ge=5, le=900)
    heap_mb: int = Field(default=512, ge=128)

    @model_validator(mode="after")
    def _distinct_aliases(self) -> MirrorSettings:
        aliases = [self.target.alias, *(site.alias for site in self.sites)]
        repeated = sorted({a for a in aliases if aliases.count(a) > 1})
        if repeated:
            raise ValueError(f"alias {repeated[0]!r} names more than one cluster")
        return self

    @model_validator(mode="after")
    def _no_site_is_the_target(self) -> MirrorSettings:
        # A site that is the target cluster mirrors its own mirrored topics again and again
        # (site-a.site-a.….heartbeats). Here by address; kafeed.mirror.checks by cluster id.
        target = bootstrap_addresses(self.target.bootstrap)
        for site in self.sites:
            shared = sorted(target & bootstrap_addresses(site.bootstrap))
            if shared:
                raise ValueError(f"site {site.alias!r} has the target's bootstrap address {shared[0]}: "
                                 "a site mirrored into its own cluster mirrors its copies forever")
        return self

    @model_validator(mode="after")
    def _work_dir_is_a_directory(self) -> MirrorSettings:
        problem = directory_problem(self.work_dir)
        if problem is not None:
            raise ValueError(f"work_dir: {problem}")
        return self

    def site(self, alias: str) -> SiteSettings:
        for site in self.sites:
            if site.alias == alias:
                return site
        known = ", ".join(s.alias for s in self.sites)
        raise ConfigError(f"Site {alias!r} is not in the mirror's config (its sites: {known}).",
                          hint="Pass one of those, or add a [[sites]] table for it.")

    def only(self, aliases: list[str] | None) -> MirrorSettings:
        """These settings limited to ``aliases`` (all sites when None or empty)."""
        if not aliases:
            return self
        return self.model_copy(update={"sites": tuple(self.site(a) for a in dict.fromkeys(aliases))})


def bootstrap_addresses(bootstrap: str | None) -> set[str]:
    """``host:port`` entries of a bootstrap list, lower-cased, ``localhost`` as 127.0.0.1."""
    out = set()
    for entry in (bootstrap or "").split(","):
        address = entry.strip().lower().rpartition("://")[2]
        if address.startswith("localhost:"):
            address = "127.0.0.1:" + address.partition(":")[2]
        if address:
            out.add(address)
    return out


def topic_patterns(text: str) -> list[str]:
    """MirrorMaker's ``topics``: comma-separated regular expressions, each matching whole names."""
    return [p.strip() for p in text.split(",") if p.strip()]


def load_mirror_settings(path: Path, **overrides: Any) -> MirrorSettings:
    """Read and validate the mirror's TOML file; every mistake is one :class:`ConfigError`."""
    data = read_settings_file(path, env={})
    data |= {k: v for k, v in overrides.items() if v is not None}
    try:
        return MirrorSettings.model_validate(data)
    except ValidationError as exc:
        raise invalid_settings(exc, what=f"mirror settings in {path}",
                               hint="See docs/federation.md for the file's tables.") from None
