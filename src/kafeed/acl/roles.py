"""What each kafeed role may do on a Kafka cluster: a pure table of ACL bindings.

A role is a stage of the pipeline; its principal gets exactly the bindings below and
nothing else (a cluster secured with ``allow.everyone.if.no.acl.found=false`` denies
the rest). Topic and group names are the defaults of each stage; :class:`RoleNames`
changes them for a deployment that renamed its topics.

Transactional ids follow ``kafeed-<stage>.<...>`` (ingest: ``kafeed-ingest.<job>``,
prepare: ``kafeed-prepare.<group>.<slot>``), so a prefix per role keeps one role from
using another's: a fenced-off id is a denied request, not a silent takeover.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

ResourceType = Literal["TOPIC", "GROUP", "TRANSACTIONAL_ID", "CLUSTER"]
PatternType = Literal["LITERAL", "PREFIXED"]
Operation = Literal["ALL", "READ", "WRITE", "CREATE", "DESCRIBE", "DESCRIBE_CONFIGS",
                    "ALTER", "ALTER_CONFIGS", "DELETE", "IDEMPOTENT_WRITE"]
Role = Literal["admin", "ingest", "prepare", "trainer", "monitor", "archive", "tasks"]

ROLES: tuple[Role, ...] = ("admin", "ingest", "prepare", "trainer", "monitor", "archive", "tasks")
INGEST_PROGRESS_TOPIC = "__kafeed_ingest_progress"
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
WILDCARD = "*"  # a LITERAL "*" matches every name of its resource type


@dataclass(frozen=True, order=True)
class Binding:
    """One ALLOW ACL: ``principal`` may ``operation`` on the resource from any host."""

    principal: str
    resource: ResourceType
    name: str
    pattern: PatternType
    operation: Operation

    def describe(self) -> str:
        how = "prefix" if self.pattern == "PREFIXED" else "name"
        return f"{self.principal} ALLOW {self.operation} on {self.resource} {how} {self.name!r}"


@dataclass(frozen=True)
class RoleNames:
    """The topic and group names the roles' bindings name."""

    raw: str = "raw"
    tokens: str = "tokens"
    prepare_group: str = "kafeed-prepare"
    loader_group: str = "kafeed-loader"
    train_group: str = "kafeed-train"
    archive_group: str = "kafeed-archive"
    tasks_topic_prefix: str = "tasks"
    tasks_group: str = "kafeed-tasks"


_READ: tuple[Operation, ...] = ("READ", "DESCRIBE", "DESCRIBE_CONFIGS")
_WRITE: tuple[Operation, ...] = ("WRITE", "DESCRIBE", "DESCRIBE_CONFIGS")
_CREATE_WRITE: tuple[Operation, ...] = ("CREATE", *_WRITE)
_READ_WRITE: tuple[Operation, ...] = ("CREATE", "READ", *_WRITE)
_TXN: tuple[Operation, ...] = ("WRITE", "DESCRIBE")

# (resource, name template, pattern, operations) per role; {raw} etc. come from RoleNames.
_TABLE: dict[Role, tuple[tuple[ResourceType, str, PatternType, tuple[Operation, ...]], ...]] = {
    "admin": (
        ("CLUSTER", CLUSTER_NAME, "LITERAL", ("ALL",)),
        ("TOPIC", WILDCARD, "LITERAL", ("ALL",)),
        ("GROUP", WILDCARD, "LITERAL", ("ALL",)),
        ("TRANSACTIONAL_ID", WILDCARD, "LITERAL", ("ALL",)),
    ),
    "ingest": (
        ("TOPIC", "{raw}", "LITERAL", _WRITE),
        ("TOPIC", "{raw}.dlq", "LITERAL", _CREATE_WRITE),
        ("TOPIC", INGEST_PROGRESS_TOPIC, "LITERAL", _READ_WRITE),
        ("GROUP", "kafeed-ingest-reader-", "PREFIXED", ("READ",)),
        ("TRANSACTIONAL_ID", "kafeed-ingest.", "PREFIXED", _TXN),
    ),
    "prepare": (
        ("TOPIC", "{raw}", "LITERAL", _READ),
        ("TOPIC", "{tokens}", "LITERAL", _CREATE_WRITE),
        ("TOPIC", "{raw}.dlq", "LITERAL", _CREATE_WRITE),
        ("TOPIC", "__kafeed_dedup_{prepare_group}", "LITERAL", _READ_WRITE),
        # global dedup: the route step writes the re-keyed records, the dedup step reads them
        # and deletes those it committed
        ("TOPIC", "__kafeed_repartition_{prepare_group}", "LITERAL", (*_READ_WRITE, "DELETE")),
        ("GROUP", "{prepare_group}", "LITERAL", ("READ", "DESCRIBE")),
        ("GROUP", "{prepare_group}.dedup", "LITERAL", ("READ", "DESCRIBE")),
        ("GROUP", "kafeed-state-rebuild-", "PREFIXED", ("READ",)),
        ("TRANSACTIONAL_ID", "kafeed-prepare.{prepare_group}.", "PREFIXED", _TXN),
    ),
    "trainer": (
        ("TOPIC", "{tokens}", "LITERAL", _READ),
        ("GROUP", "{loader_group}", "PREFIXED", ("READ", "DESCRIBE")),
        ("GROUP", "{train_group}", "PREFIXED", ("READ", "DESCRIBE")),
    ),
    "monitor": (
        ("CLUSTER", CLUSTER_NAME, "LITERAL", ("DESCRIBE", "DESCRIBE_CONFIGS")),
        ("TOPIC", WILDCARD, "LITERAL", ("DESCRIBE", "DESCRIBE_CONFIGS")),
        ("GROUP", WILDCARD, "LITERAL", ("DESCRIBE",)),
    ),
    "archive": (
        ("TOPIC", "{raw}", "LITERAL", _READ),
        ("TOPIC", "{tokens}", "LITERAL", _READ),
        ("GROUP", "{archive_group}", "PREFIXED", ("READ", "DESCRIBE")),
    ),
    "tasks": (
        ("TOPIC", "{tasks_topic_prefix}", "PREFIXED", _READ_WRITE),
        # A worker sets its share group's start, lock and delivery limit (kafeed.tasks.queue).
        ("GROUP", "{tasks_group}", "PREFIXED", ("READ", "DESCRIBE", "ALTER_CONFIGS", "DESCRIBE_CONFIGS")),
        ("TRANSACTIONAL_ID", "kafeed-tasks.", "PREFIXED", _TXN),
    ),
}


def principal_for(user: str) -> str:
    """``User:<name>``, Kafka's form of a SASL user's principal; a full principal is kept."""
    return user if ":" in user else f"User:{user}"


def role_bindings(role: Role, principal: str, names: RoleNames | None = None) -> list[Binding]:
    """Every binding ``role`` needs, for ``principal`` (``User:name`` or a bare user name)."""
    names = names or RoleNames()
    fields = {k: getattr(names, k) for k in RoleNames.__dataclass_fields__}
    who = principal_for(principal)
    return sorted(
        Binding(principal=who, resource=resource, name=template.format(**fields), pattern=pattern,
                operation=op)
        for resource, template, pattern, ops in _TABLE[role]
        for op in ops
    )
