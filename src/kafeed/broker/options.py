"""What a local cluster is created with (:class:`ClusterOptions`), checked before anything starts,
and on later starts against what the cluster recorded (:func:`refuse_changes`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from kafeed.broker.render import ports_per_node
from kafeed.choices import JitMode
from kafeed.errors import ConfigError


class ClusterOptions(BaseModel):
    """What a new local cluster is created with; checked before anything starts.

    Node ``i`` listens on ``port + 2(i-1)`` and its controller on the port after, so
    the whole block up to ``port + 2*nodes - 1`` must fit below 65536 (a secured cluster
    adds one node-to-node port per node: ``3*nodes`` ports). Ports below 1024 need root,
    which a local test cluster should not.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    nodes: Literal[1, 3] | None = None
    secure: bool | None = None
    port: int | None = Field(default=None, ge=1024)
    heap_mb: int = Field(default=512, ge=128)
    jit: JitMode = "full"

    @field_validator("port")
    @classmethod
    def _block_fits(cls, port: int | None, info: ValidationInfo) -> int | None:
        nodes = info.data.get("nodes") or 1
        width = ports_per_node(bool(info.data.get("secure"))) * nodes
        top = 65535 - (width - 1)
        if port is not None and port > top:
            raise ValueError(f"should be at most {top}: {nodes} node(s) use ports "
                             f"port..port+{width - 1}")
        return port


def refuse_changes(data_dir: Path, state: dict[str, Any], *, nodes: int | None, port: int | None,
                   secure: bool | None) -> None:
    """ConfigError when an explicit option differs from what ``cluster.json`` (``state``) recorded."""
    if nodes is not None and nodes != int(state["nodes"]):
        raise ConfigError(
            f"{data_dir} holds a {state['nodes']}-node cluster, not {nodes}.",
            hint="Use another --data-dir, or `kafeed broker stop --purge` it first.",
        )
    if secure is not None and secure != bool(state.get("secure")):
        kind = "secured" if state.get("secure") else "plaintext"
        raise ConfigError(
            f"{data_dir} holds a {kind} cluster; security is chosen when it is created.",
            hint="Use another --data-dir, or `kafeed broker stop --purge` it first.",
        )
    if port is not None and port != int(state["port"]):
        raise ConfigError(
            f"{data_dir} holds a cluster on port {state['port']}, not {port}.",
            hint="Use another --data-dir, or `kafeed broker stop --purge` it first.",
        )
