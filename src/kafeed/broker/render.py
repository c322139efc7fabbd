"""Render the configuration files of a local KRaft node."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


def rolling_log4j2(logs_dir_property: str, file_name: str, extra: str = "") -> str:
    """A log4j2 configuration: one rolling file (2 x 20 MB) in the directory named by the JVM
    system property ``logs_dir_property``, INFO by default, then ``extra`` lines."""
    return f"""\
status = warn
appender.file.type = RollingFile
appender.file.name = file
appender.file.fileName = ${{sys:{logs_dir_property}}}/{file_name}
appender.file.filePattern = ${{sys:{logs_dir_property}}}/{file_name}.%i
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
appender.file.policies.type = Policies
appender.file.policies.size.type = SizeBasedTriggeringPolicy
appender.file.policies.size.size = 20MB
appender.file.strategy.type = DefaultRolloverStrategy
appender.file.strategy.max = 2
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
{extra}"""


LOG4J2 = rolling_log4j2("kafka.logs.dir", "server.log", """\
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache.kafka
logger.apache.level = INFO
""")


@dataclass(frozen=True)
class NodeSpec:
    """One node of a local cluster: ids, ports and directories."""

    node_id: int
    port: int
    controller_port: int
    directory: Path
    #: A secured cluster's node-to-node (mutual TLS) listener; None on a plaintext cluster.
    internal_port: int | None = None

    @property
    def log_dir(self) -> Path:
        return self.directory / "data"

    @property
    def properties_file(self) -> Path:
        return self.directory / "server.properties"

    @property
    def output_file(self) -> Path:
        return self.directory / "logs" / "server.log"


def node_specs(root: Path, nodes: int, port: int, *, secure: bool = False) -> list[NodeSpec]:
    """Node ``i`` listens on ``port + 2i`` (clients) and ``port + 2i + 1`` (controller).

    A secured cluster adds a node-to-node listener per node after that block, on
    ``port + 2*nodes + i``.
    """
    return [
        NodeSpec(i + 1, port + 2 * i, port + 2 * i + 1, root / f"node-{i + 1}",
                 port + 2 * nodes + i if secure else None)
        for i in range(nodes)
    ]


def ports_per_node(secure: bool) -> int:
    return 3 if secure else 2


@dataclass(frozen=True)
class NodeTls:
    """What a secured node's configuration names: its PKCS#12 keystore, the CA (PEM), the password."""

    keystore: Path
    truststore: Path
    key_password: str


NODE_PRINCIPAL = "User:CN=kafeed-node"


def _secure_lines(node: NodeSpec, all_nodes: list[NodeSpec], tls: NodeTls, super_user: str) -> dict[str, str]:
    """Clients on SASL_SSL with SCRAM-SHA-512; nodes on mutual TLS; ACLs deny by default."""
    listeners = (f"SASL_SSL://127.0.0.1:{node.port},INTERNAL://127.0.0.1:{node.internal_port},"
                 f"CONTROLLER://127.0.0.1:{node.controller_port}")
    return {
        "listeners": listeners,
        "advertised.listeners": listeners,
        "inter.broker.listener.name": "INTERNAL",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,INTERNAL:SSL,CONTROLLER:SSL",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(tls.keystore),
        "ssl.keystore.password": tls.key_password,
        "ssl.key.password": tls.key_password,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(tls.truststore),
        "ssl.endpoint.identification.algorithm": "https",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": f"User:{super_user};{NODE_PRINCIPAL}",
    }


def server_properties(node: NodeSpec, all_nodes: list[NodeSpec], *, tls: NodeTls | None = None,
                      super_user: str = "admin") -> str:
    """The combined broker+controller configuration for ``node`` (secured when ``tls`` is given)."""
    replication = min(3, len(all_nodes))
    min_isr = max(1, replication - 1)
    lines = {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},"
        f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "log.dirs": str(node.log_dir),
        "num.partitions": "1",
        "default.replication.factor": str(replication),
        "min.insync.replicas": "1",
        "offsets.topic.replication.factor": str(replication),
        "offsets.topic.num.partitions": "10",
        "transaction.state.log.replication.factor": str(replication),
        "transaction.state.log.min.isr": str(min_isr),
        "transaction.state.log.num.partitions": "10",
        "share.coordinator.state.topic.replication.factor": str(replication),
        "share.coordinator.state.topic.min.isr": str(min_isr),
        # Local clusters serve tests and demos: rebalance at once, few threads.
        "group.initial.rebalance.delay.ms": "0",
        # Task queues (share groups): a worker joins within a second, a queue may lock a
        # record for as little as a second, and a crashed worker's partitions go to the others
        # after 10 s instead of 45 s, so its tasks come back quickly.
        "group.share.heartbeat.interval.ms": "1000",
        "group.share.min.heartbeat.interval.ms": "500",
        "group.share.min.record.lock.duration.ms": "1000",
        "group.share.session.timeout.ms": "10000",
        "group.share.min.session.timeout.ms": "5000",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        # The controller writes a no-op record to its fsynced log at this interval (500 ms by
        # default): on an idle local node that was half its CPU.
        "metadata.max.idle.interval.ms": "5000",
        "log.segment.bytes": str(256 * 1024 * 1024),
        "message.max.bytes": str(8 * 1024 * 1024),
        "auto.create.topics.enable": "false",
    }
    if tls is not None:
        lines |= _secure_lines(node, all_nodes, tls, super_user)
    if len(all_nodes) == 1:
        lines["controller.quorum.bootstrap.servers"] = f"127.0.0.1:{node.controller_port}"
        # A single node has no one to hand its partitions to, so a controlled shutdown only
        # opens a window in which its metadata lists no broker. librdkafka 2.16 drops every
        # broker it knows on such a response and never connects again (its issue 5301): a
        # client running across a restart of the node would stop for good.
        lines["controlled.shutdown.enable"] = "false"
    else:
        lines["controller.quorum.voters"] = ",".join(
            f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in all_nodes
        )
    return "".join(f"{k}={v}\n" for k, v in lines.items())
