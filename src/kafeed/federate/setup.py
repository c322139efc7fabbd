"""The job's topics on the training cluster and the ACLs that confine each site's role.

Topics (one partition each: a blob's chunks must stay in order, and a round is one step):
``<job>.global`` (the global model, version after version), ``<job>.rounds`` (the round log)
and ``<job>.updates.<site>`` per site. A site's principal may write its own update topic
(under its own transactional id) and read the global model, nothing else: it cannot read
another site's update, the round log, or write the global model. The coordinator's role is the
cluster's admin (or any principal granted the job's topics, group and transactional id).
"""

from __future__ import annotations

from dataclasses import dataclass

from kafeed.acl.admin import AclAdmin
from kafeed.acl.roles import Binding, principal_for
from kafeed.federate.config import FederationSettings
from kafeed.topics.admin import TopicAdmin
from kafeed.topics.plan import TopicPlan

#: Global versions and updates are kept a week: a site that was away that long can still
#: read the current model, and a replay of the round log finds every blob it names.
RETENTION_MS = 7 * 24 * 3600 * 1000


def job_topics(settings: FederationSettings) -> list[str]:
    return [settings.global_topic, settings.rounds_topic,
            *(settings.update_topic(site.name) for site in settings.sites)]


def site_transactional_id(settings: FederationSettings, site: str) -> str:
    return f"{settings.job}.site.{site}"


def site_group_prefix(settings: FederationSettings, site: str) -> str:
    """The consumer groups a site's reader of the global model is named under."""
    return f"{settings.job}.site.{site}."


def coordinator_transactional_id(settings: FederationSettings) -> str:
    return f"{settings.job}.coordinator"


def site_bindings(settings: FederationSettings, site: str, user: str) -> list[Binding]:
    """What ``site``'s principal ``user`` may do on the training cluster, and nothing more."""
    settings.site(site)
    who = principal_for(user)
    return [
        Binding(who, "TOPIC", settings.update_topic(site), "LITERAL", "WRITE"),
        Binding(who, "TOPIC", settings.update_topic(site), "LITERAL", "DESCRIBE"),
        Binding(who, "TOPIC", settings.global_topic, "LITERAL", "READ"),
        Binding(who, "TOPIC", settings.global_topic, "LITERAL", "DESCRIBE"),
        Binding(who, "GROUP", site_group_prefix(settings, site), "PREFIXED", "READ"),
        Binding(who, "TRANSACTIONAL_ID", site_transactional_id(settings, site), "LITERAL", "WRITE"),
        Binding(who, "TRANSACTIONAL_ID", site_transactional_id(settings, site), "LITERAL", "DESCRIBE"),
    ]


@dataclass(frozen=True)
class SetupReport:
    created: tuple[str, ...]
    existing: tuple[str, ...]
    granted: tuple[str, ...]


def create_topics(settings: FederationSettings) -> SetupReport:
    """Create the job's topics on the training cluster (those that exist are kept)."""
    admin = TopicAdmin(settings.training_connection())
    replication = min(3, admin.broker_count())
    created: list[str] = []
    existing: list[str] = []
    for name in job_topics(settings):
        plan = TopicPlan(name=name, partitions=1, replication=replication,
                         min_insync_replicas=max(1, replication - 1), compression="none",
                         retention_ms=RETENTION_MS)
        (created if admin.create(plan, exist_ok=True) else existing).append(name)
    return SetupReport(tuple(created), tuple(existing), ())


def grant_sites(settings: FederationSettings, users: dict[str, str]) -> list[Binding]:
    """Grant each site in ``users`` (site name → SCRAM user) its bindings; returns them."""
    bindings = [b for site, user in sorted(users.items()) for b in site_bindings(settings, site, user)]
    AclAdmin(settings.training_connection()).grant(bindings)
    return bindings
