"""MirrorMaker 2's dedicated-mode properties and log4j2 configuration, rendered from the settings.

Every site flows into the target (``<site>->train.enabled``), never back. No password is
written: each cluster's ``sasl.jaas.config`` is ``${env:KAFEED_MIRROR_JAAS_<n>}``, resolved
by Kafka's ``EnvVarConfigProvider`` from the node's environment (:func:`mirror_secrets`), so
a node killed with SIGKILL leaves no secret behind in ``work_dir``. The target runs
Connect's exactly-once source support (KIP-618/656): records, the source offsets they
came from and the offset syncs are written in one transaction per batch. Offset syncs
live in the target, so a site only needs to be read.
"""

from __future__ import annotations

from kafeed.broker.render import rolling_log4j2
from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from kafeed.mirror.config import MirrorSettings
from kafeed.mirror.origin import TRANSFORM_CLASS

LOG4J2 = rolling_log4j2("kafeed.mirror.logs.dir", "mirror.log", """\
# Every client MirrorMaker opens logs its whole configuration and each partition it seeks:
# tens of thousands of lines a start. Connect's own lines (rebalances, tasks, commits) stay.
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.config.name = org.apache.kafka.common.config
logger.config.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
# A site that refuses the mirror's login makes its source task fail every poll at once and
# log each failure: 35,000 warnings a second, which rolled the whole log away in 5 s. One a
# second is kept (ten at first); errors always pass.
logger.sourcetask.name = org.apache.kafka.connect.mirror.MirrorSourceTask
logger.sourcetask.filter.burst.type = BurstFilter
logger.sourcetask.filter.burst.level = WARN
logger.sourcetask.filter.burst.rate = 1
logger.sourcetask.filter.burst.maxBurst = 10
""")

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def offsets_topic(site: str) -> str:
    """Where Connect keeps the source offsets of ``site``'s flow, in the target cluster."""
    return f"mm2-offsets.{site}.internal"


def status_topic(site: str) -> str:
    """Where Connect keeps the connector and task states of ``site``'s flow, in the target."""
    return f"mm2-status.{site}.internal"


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_properties(alias: str, connection: ConnectionSettings) -> dict[str, str]:
    """A kafeed connection as the Java client's properties (the password included: keep private)."""
    props = {"bootstrap.servers": connection.bootstrap, "security.protocol": connection.security_protocol}
    if connection.ssl_ca_location is not None:
        props["ssl.truststore.type"] = "PEM"
        props["ssl.truststore.location"] = str(connection.ssl_ca_location)
    mechanism = connection.sasl_mechanism
    if mechanism is not None:
        module = _LOGIN_MODULES.get(mechanism)
        if module is None or connection.sasl_password is None:
            raise ConfigError(f"Cluster {alias!r} uses SASL {mechanism}, which the mirror does not "
                              "support.", hint="Use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN.")
        props["sasl.mechanism"] = mechanism
        props["sasl.jaas.config"] = (
            f"{module} required username={_quoted(connection.sasl_username or '')} "
            f"password={_quoted(connection.sasl_password.get_secret_value())};")
    return props


ENV_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


def _aliases(settings: MirrorSettings) -> list[str]:
    return [*(s.alias for s in settings.sites), settings.target.alias]


def secret_variable(index: int) -> str:
    """The environment variable holding the ``sasl.jaas.config`` of cluster ``index``
    (the sites in order, then the target)."""
    return f"KAFEED_MIRROR_JAAS_{index}"


def mirror_secrets(settings: MirrorSettings, connections: dict[str, ConnectionSettings]) -> dict[str, str]:
    """``{variable: sasl.jaas.config}`` for every cluster that logs in with a password: the
    node's environment, which the rendered properties name instead of the passwords."""
    out = {}
    for i, alias in enumerate(_aliases(settings)):
        jaas = java_client_properties(alias, connections[alias]).get("sasl.jaas.config")
        if jaas is not None:
            out[secret_variable(i)] = jaas
    return out


def _escaped(value: str) -> str:
    # java.util.Properties reads a backslash as an escape and "#"/"!" opening a line as a comment.
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def mirror_properties(settings: MirrorSettings, connections: dict[str, ConnectionSettings], *,
                      replication: int, rest_port: int) -> str:
    """The ``mm2.properties`` of a dedicated MirrorMaker node running every site's flow.

    ``connections`` holds each alias' connection; ``replication`` is the replication
    factor of the mirrored and internal topics in the target.
    """
    target = settings.target.alias
    lines: dict[str, str] = {
        "clusters": ", ".join([*(s.alias for s in settings.sites), target]),
        # KIP-710: nodes of one mirror cluster forward task configurations to the leader.
        "dedicated.mode.enable.internal.rest": "true",
        "listeners": f"http://{settings.rest_host}:{rest_port}",
        f"{target}.exactly.once.source.support": "enabled",
        # Worker settings reach each flow's Connect worker through the target's prefix.
        f"{target}.scheduled.rebalance.max.delay.ms": str(round(settings.rebalance_delay_s * 1000)),
        # Plugins from their service manifests only (KIP-898): Connect's default also scans
        # every class of the classpath by reflection, 3-4 s a flow on start.
        f"{target}.plugin.discovery": "service_load",
        f"{target}.producer.transaction.timeout.ms": str(round(settings.transaction_timeout_s * 1000)),
        "tasks.max": str(settings.tasks_max),
        "replication.factor": str(replication),
        "offset.storage.replication.factor": str(replication),
        "status.storage.replication.factor": str(replication),
        "config.storage.replication.factor": str(replication),
        "checkpoints.topic.replication.factor": str(replication),
        "heartbeats.topic.replication.factor": str(replication),
        "offset-syncs.topic.replication.factor": str(replication),
        # New topics at a site are mirrored within seconds, not the default ten minutes.
        "refresh.topics.interval.seconds": "10",
        "refresh.groups.interval.seconds": "30",
        # The site's role is only asked to read: its ACLs and topic configs stay its own.
        "sync.topic.acls.enabled": "false",
        "sync.topic.configs.enabled": "false",
    }
    secrets = mirror_secrets(settings, connections)
    if secrets:
        # Passwords reach the JVM in its environment, never in this file (KIP-887).
        lines["config.providers"] = "env"
        lines["config.providers.env.class"] = ENV_PROVIDER
    for i, alias in enumerate(_aliases(settings)):
        for key, value in java_client_properties(alias, connections[alias]).items():
            secret = key == "sasl.jaas.config"
            lines[f"{alias}.{key}"] = f"${{env:{secret_variable(i)}}}" if secret else value
    for site in settings.sites:
        flow = f"{site.alias}->{target}"
        lines[f"{flow}.enabled"] = "true"
        lines[f"{target}->{site.alias}.enabled"] = "false"
        lines[f"{flow}.topics"] = site.topics
        lines[f"{flow}.emit.checkpoints.enabled"] = "true"
        lines[f"{flow}.emit.offset-syncs.enabled"] = "true"
        lines[f"{flow}.offset-syncs.topic.location"] = "target"
        lines[f"{flow}.emit.heartbeats.enabled"] = "true"
        # Training groups read the site-prefixed topics under their own names: nothing to sync.
        lines[f"{flow}.sync.group.offsets.enabled"] = "false"
        # Each copy names its site record in a header (kafeed.mirror.origin, for lineage).
        lines[f"{flow}.transforms"] = "origin"
        lines[f"{flow}.transforms.origin.type"] = TRANSFORM_CLASS
        # The mirror copies what a read_committed reader sees at the site: no aborted records.
        lines[f"{site.alias}.consumer.isolation.level"] = "read_committed"
    return "".join(f"{key} = {_escaped(value)}\n" for key, value in lines.items())
