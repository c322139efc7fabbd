"""What `kafeed broker status` reports: nodes, controller, topics, disk."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafeed.config import ConnectionSettings


@dataclass(frozen=True)
class NodeStatus:
    node_id: int
    port: int
    pid: int | None
    alive: bool
    log_dir: str
    disk_used_bytes: int
    #: Free bytes on the filesystem of the node's log dir (None when it cannot be measured).
    disk_free_bytes: int | None = None
    #: Why a node that should run stopped itself, from its server.log (see :func:`why_stopped`).
    stopped_because: str | None = None


@dataclass(frozen=True)
class ClusterStatus:
    data_dir: str
    bootstrap: str
    nodes: list[NodeStatus]
    controller_id: int | None = None
    topics: list[str] = field(default_factory=list)
    disk_free_bytes: int = 0

    @property
    def nodes_up(self) -> int:
        return sum(n.alive for n in self.nodes)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["nodes_up"] = self.nodes_up
        return out


# A node's log starts each run with this line (log4j's controller MBean, registered first).
_RUN_START = "Registered `kafka:type=kafka.Log4jController` MBean"
# What Kafka logs when a log dir fails under it, most specific first. A broker whose only
# log dir fails (it also holds the metadata log) shuts itself down.
_STOP_REASONS = (
    ("No space left on device", "its log dir is full (No space left on device)"),
    ("Read-only file system", "its log dir became read-only"),
    ("Permission denied", "its log dir is not writable (Permission denied)"),
    ("all log dirs in", "its log dir failed"),
)


def why_stopped(server_log: Path, *, tail_bytes: int = 512 * 1024) -> str | None:
    """Why a node stopped itself, read from the last run in its ``server.log``: a log dir that
    filled up, turned read-only or failed. None when the log names no such cause (a node
    killed from outside, or one that never wrote a log)."""
    try:
        with server_log.open("rb") as fh:
            fh.seek(max(0, server_log.stat().st_size - tail_bytes))
            text = fh.read().decode(errors="replace")
    except OSError:
        return None
    run = text[text.rfind(_RUN_START):] if _RUN_START in text else text
    for needle, reason in _STOP_REASONS:
        if needle in run:
            return reason
    return None


def dir_size(path: Path) -> int:
    """Bytes allocated on disk below ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                # Blocks, not apparent size: Kafka preallocates sparse index files.
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def cluster_view(connection: ConnectionSettings, timeout: float) -> tuple[int | None, list[str]]:
    """The quorum leader and the topics, asked of the live nodes in ``connection``.

    Each part is best effort: a cluster that answers one question and not the
    other still shows what it answered.
    """
    from kafeed.jars.tools import quorum_leader
    from kafeed.kafka import KafkaClients

    admin = KafkaClients(connection).admin()
    try:
        meta = admin.list_topics(timeout=timeout)
        topics = sorted(t for t in meta.topics if not t.startswith("__"))
    except Exception:
        topics = []
    return quorum_leader(connection, timeout=max(timeout, 10.0)), topics
