"""Start, stop and inspect a local Apache Kafka cluster (KRaft, 1 or 3 nodes).

A cluster lives in one data directory: ``cluster.json`` records its id, node
count, ports and process ids; ``node-N/`` holds each node's configuration,
log segments and server log. Several clusters run side by side in different
data directories.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from kafeed.broker.options import ClusterOptions, refuse_changes
from kafeed.broker.ports import port_free
from kafeed.broker.processes import kill_and_wait, pid_alive, spawn_node, terminate
from kafeed.broker.readiness import wait_ready
from kafeed.broker.render import NodeSpec, node_specs
from kafeed.broker.secure import SUPER_USER, SecureMaterial
from kafeed.broker.status import ClusterStatus, NodeStatus, cluster_view, dir_size, why_stopped
from kafeed.broker.storage import format_nodes
from kafeed.choices import JitMode
from kafeed.config import ConnectionSettings, load_connection
from kafeed.errors import BrokerError, ConfigError, invalid_settings
from kafeed.home import kafeed_home
from kafeed.jars import KafkaLibs, resolve_libs

log = logging.getLogger("kafeed")

STATE_FILE = "cluster.json"
STATE_VERSION = 1


def default_data_dir() -> Path:
    return kafeed_home() / "clusters" / "default"


class LocalCluster:
    """A local Kafka cluster kept in ``data_dir``.

    ``nodes``, ``port`` and ``secure`` apply when the cluster is first created; later
    starts reuse what ``cluster.json`` recorded (a different explicit value is refused).
    A secured cluster (``secure=True``) keeps its CA, certificates and one client
    settings file per role under ``data_dir/secure`` (see :mod:`kafeed.broker.secure`).
    """

    def __init__(
        self,
        data_dir: Path | None = None,
        *,
        nodes: int | None = None,
        port: int | None = None,
        heap_mb: int = 512,
        jit: JitMode = "full",
        kafka_home: Path | None = None,
        secure: bool | None = None,
        auto_create_topics: bool = False,
    ) -> None:
        try:
            options = ClusterOptions.model_validate(
                {"nodes": nodes, "secure": secure, "port": port, "heap_mb": heap_mb, "jit": jit}
            )
        except ValidationError as exc:
            raise invalid_settings(exc, what="local cluster options") from None
        self.data_dir = (data_dir or default_data_dir()).resolve()
        self._nodes_arg: int | None = options.nodes
        self._port_arg = options.port
        self._secure_arg = options.secure
        self.heap_mb = options.heap_mb
        self.jit = options.jit
        self.kafka_home = kafka_home
        # Nodes started by this object create topics on first use (not recorded: each start says).
        self.auto_create_topics = auto_create_topics

    # -- recorded state ------------------------------------------------------

    @property
    def state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    def _read_state(self) -> dict[str, Any] | None:
        try:
            state: dict[str, Any] = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise BrokerError(f"{self.state_path} is unreadable: {exc}.") from exc
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise BrokerError(f"{self.state_path} has an unknown version.")
        return state

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        os.replace(tmp, self.state_path)

    def _specs(self, state: dict[str, Any]) -> list[NodeSpec]:
        return node_specs(self.data_dir, int(state["nodes"]), int(state["port"]),
                          secure=bool(state.get("secure")))

    @property
    def material(self) -> SecureMaterial:
        return SecureMaterial(self.data_dir / "secure")

    @property
    def secure(self) -> bool:
        state = self._read_state()
        return bool(self._secure_arg) if state is None else bool(state.get("secure"))

    def client_file(self, role: str) -> Path:
        """The client settings file of ``role`` (a secured cluster's; 0600, holds its password)."""
        if not self.secure:
            raise ConfigError(f"{self.data_dir} holds a plaintext cluster: it has no role settings files.",
                              hint="Start a secured one with `kafeed broker start --secure`.")
        return self.material.client_file(role)

    def connection(self, role: str = SUPER_USER) -> ConnectionSettings:
        """How to reach this cluster: plaintext, or as ``role`` on a secured one."""
        if not self.secure:
            return ConnectionSettings(bootstrap=self.bootstrap)
        return load_connection(config_file=self.client_file(role), env={})

    def recorded_nodes(self) -> list[NodeSpec] | None:
        """The nodes ``cluster.json`` records (running or not); None when there is no cluster here."""
        state = self._read_state()
        return None if state is None else self._specs(state)

    @property
    def bootstrap(self) -> str:
        state = self._read_state()
        if state is None:
            nodes, port, secure = self._nodes_arg or 1, self._port_arg or 9092, bool(self._secure_arg)
        else:
            nodes, port, secure = int(state["nodes"]), int(state["port"]), bool(state.get("secure"))
        specs = node_specs(self.data_dir, nodes, port, secure=secure)
        return ",".join(f"127.0.0.1:{s.port}" for s in specs)

    # -- lifecycle -----------------------------------------------------------

    def is_running(self) -> bool:
        state = self._read_state()
        return state is not None and any(
            pid_alive(pid, str(self.data_dir)) for pid in state.get("pids", {}).values()
        )

    def start(self, *, timeout: float = 90.0) -> bool:
        """Start every node; return False when the cluster was already running."""
        state = self._read_state()
        if state is not None:
            self._check_args(state)
        if state is not None and self.is_running():
            dead = [
                spec for spec in self._specs(state)
                if not pid_alive(state["pids"].get(str(spec.node_id)), str(self.data_dir))
            ]
            if not dead:
                return False
            libs = resolve_libs(kafka_home=self.kafka_home)
            for spec in dead:
                state["pids"][str(spec.node_id)] = self._spawn(libs, spec)
            self._write_state(state)
            self._wait_ready(state, timeout)
            return True
        libs = resolve_libs(kafka_home=self.kafka_home)
        if state is None:
            state = self._create(libs)
        specs = self._specs(state)
        busy = [p for s in specs for p in (s.port, s.controller_port, s.internal_port)
                if p is not None and not port_free(p)]
        if busy:
            raise BrokerError(
                f"Port {busy[0]} on 127.0.0.1 is already in use, so the broker cannot listen.",
                hint="Stop whatever holds it or pick another --port (only on first start).",
            )
        state["pids"] = {str(s.node_id): self._spawn(libs, s) for s in specs}
        self._write_state(state)
        try:
            self._wait_ready(state, timeout)
            if state.get("secure") and not state.get("acls_granted"):
                self._grant_roles()
                state["acls_granted"] = True
                self._write_state(state)
        except Exception:
            self.stop(timeout=5)
            raise
        return True

    def _grant_roles(self) -> None:
        """Give every role principal its bindings (the super user needs none)."""
        from kafeed.acl import ROLES, AclAdmin, role_bindings

        admin = AclAdmin(self.connection())
        admin.grant([b for role in ROLES if role != SUPER_USER for b in role_bindings(role, role)])

    def _check_args(self, state: dict[str, Any]) -> None:
        refuse_changes(self.data_dir, state, nodes=self._nodes_arg, port=self._port_arg,
                       secure=self._secure_arg)

    def _create(self, libs: KafkaLibs) -> dict[str, Any]:
        nodes, port, secure = self._nodes_arg or 1, self._port_arg or 9092, bool(self._secure_arg)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        specs = node_specs(self.data_dir, nodes, port, secure=secure)
        cluster_id = format_nodes(libs, specs, self.material, secure=secure)
        state: dict[str, Any] = {
            "version": STATE_VERSION,
            "cluster_id": cluster_id,
            "nodes": nodes,
            "port": port,
            "secure": secure,
            "pids": {},
        }
        self._write_state(state)
        log.info("formatted a %d-node %s cluster %s in %s", nodes,
                 "secured" if secure else "plaintext", cluster_id, self.data_dir)
        return state

    def _spawn(self, libs: KafkaLibs, spec: NodeSpec) -> int:
        return spawn_node(libs, spec, heap_mb=self.heap_mb, jit=self.jit,
                          auto_create_topics=self.auto_create_topics)

    def _wait_ready(self, state: dict[str, Any], timeout: float) -> None:
        wait_ready(self.connection(), self._specs(state), state["pids"], marker=str(self.data_dir),
                   timeout=timeout)

    def stop(self, *, timeout: float = 30.0, purge: bool = False) -> list[int]:
        """Stop every node (SIGTERM, then SIGKILL after ``timeout``); return stopped ids."""
        if not (math.isfinite(timeout) and timeout >= 0):
            raise ConfigError(f"Invalid stop options: timeout: got {timeout!r}, should be a finite "
                              "number of seconds, 0 or more.")
        state = self._read_state()
        stopped: list[int] = []
        if state is not None:
            live = {
                int(nid): pid for nid, pid in state.get("pids", {}).items()
                if pid_alive(pid, str(self.data_dir))
            }
            terminate(live, str(self.data_dir), timeout)
            stopped = sorted(live)
            state["pids"] = {}
            self._write_state(state)
        if purge and self.data_dir.exists():
            shutil.rmtree(self.data_dir)
        return stopped

    def node_pid(self, node_id: int) -> int | None:
        """The process id of a running node, None when it is not running (fault tests signal it)."""
        state = self._read_state()
        pid = None if state is None else state["pids"].get(str(node_id))
        return pid if pid_alive(pid, str(self.data_dir)) else None

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (fault tests)."""
        state = self._read_state()
        pid = None if state is None else state["pids"].get(str(node_id))
        if not pid_alive(pid, str(self.data_dir)):
            raise BrokerError(f"Node {node_id} of {self.data_dir} is not running.")
        assert pid is not None
        kill_and_wait(pid, str(self.data_dir))

    def status(self, *, timeout: float = 5.0) -> ClusterStatus:
        state = self._read_state()
        if state is None:
            raise BrokerError(
                f"No local cluster in {self.data_dir}.",
                hint="Start one with `kafeed broker start`.",
            )
        specs = self._specs(state)
        nodes = []
        for s in specs:
            pid = state["pids"].get(str(s.node_id))
            alive = pid_alive(pid, str(self.data_dir))
            try:
                free: int | None = shutil.disk_usage(s.log_dir).free
            except OSError:
                free = None
            nodes.append(NodeStatus(
                node_id=s.node_id, port=s.port, pid=pid, alive=alive, log_dir=str(s.log_dir),
                disk_used_bytes=dir_size(s.log_dir), disk_free_bytes=free,
                # A node with a recorded pid that is gone died on its own (or was killed).
                stopped_because=why_stopped(s.output_file) if pid is not None and not alive else None,
            ))
        bootstrap = ",".join(f"127.0.0.1:{s.port}" for s in specs)
        controller: int | None = None
        topics: list[str] = []
        live = ",".join(f"127.0.0.1:{n.port}" for n in nodes if n.alive)
        if live:
            controller, topics = cluster_view(self.connection().model_copy(update={"bootstrap": live}),
                                              timeout)
        return ClusterStatus(
            data_dir=str(self.data_dir),
            bootstrap=bootstrap,
            nodes=nodes,
            controller_id=controller,
            topics=topics,
            disk_free_bytes=shutil.disk_usage(self.data_dir).free,
        )
