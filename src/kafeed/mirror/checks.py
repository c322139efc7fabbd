"""What is checked before a mirror node starts, so that a bad config writes nothing anywhere.

Each failure is one sentence naming the site: a topic pattern Java does not compile, a
cluster that cannot be reached, a site that is the target cluster, a topic pattern that
selects no topic, a target that cannot run transactions (exactly-once
source support needs them).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kafeed.config import ConnectionSettings
from kafeed.errors import BrokerUnavailable, ConfigError, KafeedError, KafkaOperationError
from kafeed.kafka import KafkaClients, TransactionalProducer
from kafeed.mirror.config import MirrorSettings, topic_patterns
from kafeed.mirror.java_patterns import check_site_patterns
from kafeed.mirror.progress import matching_topics
from kafeed.topics.admin import ensure_reachable

#: How long a cluster may take to answer the first request before it counts as unreachable.
REACH_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Checked:
    """What the checks learnt: each alias' connection and the target's replication factor."""

    connections: dict[str, ConnectionSettings]
    replication: int
    topics: dict[str, list[str]]


def _reach(what: str, connection: ConnectionSettings) -> int:
    try:
        return ensure_reachable(connection, timeout=REACH_TIMEOUT_S)
    except KafeedError as exc:
        raise BrokerUnavailable(f"{what} at {connection.bootstrap} cannot be reached: {exc.message}",
                                hint="Check its bootstrap and client_file in the mirror's config, "
                                "and that the cluster is up.") from exc


def cluster_id(connection: ConnectionSettings) -> str:
    """The id of the cluster ``connection`` reaches."""
    return str(KafkaClients(connection).admin().list_topics(timeout=REACH_TIMEOUT_S).cluster_id)


def check_transactions(target: ConnectionSettings, alias: str) -> None:
    """Refuse a target where a transactional producer cannot start."""
    probe = TransactionalProducer(target, transactional_id=f"__kafeed-mirror-probe-{uuid.uuid4().hex[:12]}",
                                  stage="mirror", timeout_s=REACH_TIMEOUT_S)
    try:
        probe.init()
    except KafeedError as exc:
        raise KafkaOperationError(
            f"The target cluster {alias!r} cannot run transactions, which exactly-once mirroring "
            f"needs: {exc.message}",
            hint="Give its transaction state log enough live brokers, and its principal the "
            "TransactionalId WRITE and IdempotentWrite permissions.") from exc


def check(settings: MirrorSettings) -> Checked:
    """Connect to every cluster of ``settings`` and check what the mirror needs of each."""
    # First what needs no cluster: the patterns as MirrorMaker's Java will compile them.
    check_site_patterns({site.alias: topic_patterns(site.topics) for site in settings.sites})
    connections = {c.alias: c.connection() for c in (settings.target, *settings.sites)}
    target = settings.target.alias
    brokers = _reach(f"The target cluster {target!r}", connections[target])
    target_id = cluster_id(connections[target])
    topics: dict[str, list[str]] = {}
    for site in settings.sites:
        _reach(f"Site {site.alias!r}", connections[site.alias])
        if cluster_id(connections[site.alias]) == target_id:
            raise ConfigError(f"Site {site.alias!r} is the target cluster itself (cluster id {target_id}): "
                              "it would mirror its own mirrored topics again and again.",
                              hint="Give the site its own cluster's bootstrap in the mirror's config.")
        topics[site.alias] = matching_topics(connections[site.alias], site.topics)
        if not topics[site.alias]:
            raise ConfigError(f"Site {site.alias!r} has no topic matching {site.topics!r}.",
                              hint="Fix the site's topics pattern (regular expressions, each "
                              "matching a whole topic name), or create the topic there first.")
    check_transactions(connections[target], target)
    return Checked(connections=connections, replication=min(3, brokers), topics=topics)
