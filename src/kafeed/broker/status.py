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
    from kafeed.kafka import admin_client

    admin = admin_client(connection)
    try:
        meta = admin.list_topics(timeout=timeout)
        topics = sorted(t for t in meta.topics if not t.startswith("__"))
    except Exception:
        topics = []
    return quorum_leader(connection, timeout=max(timeout, 10.0)), topics
