"""Start, stop and inspect a local Apache Kafka cluster (KRaft, 1 or 3 nodes).

A cluster lives in one data directory: ``cluster.json`` records its id, node
count, ports and process ids; ``node-N/`` holds each node's configuration,
log segments and server log. Several clusters run side by side in different
data directories.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from kafeed.broker.pki import write_private
from kafeed.broker.ports import port_free
from kafeed.broker.render import LOG4J2, NodeSpec, NodeTls, node_specs, ports_per_node, server_properties
from kafeed.broker.secure import (
    SUPER_USER,
    SecureMaterial,
    create_material,
    scram_format_args,
    write_argfile,
)
from kafeed.broker.status import ClusterStatus, NodeStatus, cluster_view, dir_size, why_stopped
from kafeed.choices import JitMode
from kafeed.config import ConnectionSettings, load_connection
from kafeed.errors import BrokerError, ConfigError, invalid_settings
from kafeed.home import kafeed_home
from kafeed.jars import QUICK_JIT, KafkaLibs, resolve_libs

log = logging.getLogger("kafeed")

STATE_FILE = "cluster.json"
STATE_VERSION = 1


def default_data_dir() -> Path:
    return kafeed_home() / "clusters" / "default"


def _pid_alive(pid: int | None, marker: str) -> bool:
    """True when ``pid`` runs and its command line mentions ``marker`` (guards pid reuse)."""
    if pid is None:
        return False
    try:  # reap it if it is our own exited child
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read().decode(errors="replace")
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[-1].split()[0]
    except OSError:
        return False
    if state == b"Z":
        return False
    # An empty command line is a process in the middle of execve (the java
    # launcher can re-exec itself): alive, not yet showing its arguments.
    if not cmdline:
        try:  # kernel threads also show none, but have no executable
            os.readlink(f"/proc/{pid}/exe")
        except OSError:
            return False
        return True
    return marker in cmdline


def _alive_after(pid: int | None, marker: str, delay: float = 0.5) -> bool:
    """A second look before declaring a just-started node dead (exec is not atomic to /proc)."""
    time.sleep(delay)
    return _pid_alive(pid, marker)


def _new_cluster_id() -> str:
    # Kafka's Uuid text form: url-safe base64 of 16 random bytes, no padding,
    # never starting with '-' (it would read as a command-line flag).
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log written)"


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
        if state.get("version") != STATE_VERSION:
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
            _pid_alive(pid, str(self.data_dir)) for pid in state.get("pids", {}).values()
        )

    def start(self, *, timeout: float = 90.0) -> bool:
        """Start every node; return False when the cluster was already running."""
        state = self._read_state()
        if state is not None:
            self._check_args(state)
        if state is not None and self.is_running():
            dead = [
                spec for spec in self._specs(state)
                if not _pid_alive(state["pids"].get(str(spec.node_id)), str(self.data_dir))
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
        if self._nodes_arg is not None and self._nodes_arg != int(state["nodes"]):
            raise ConfigError(
                f"{self.data_dir} holds a {state['nodes']}-node cluster, not {self._nodes_arg}.",
                hint="Use another --data-dir, or `kafeed broker stop --purge` it first.",
            )
        if self._secure_arg is not None and self._secure_arg != bool(state.get("secure")):
            kind = "secured" if state.get("secure") else "plaintext"
            raise ConfigError(
                f"{self.data_dir} holds a {kind} cluster; security is chosen when it is created.",
                hint="Use another --data-dir, or `kafeed broker stop --purge` it first.",
            )
        if self._port_arg is not None and self._port_arg != int(state["port"]):
            raise ConfigError(
                f"{self.data_dir} holds a cluster on port {state['port']}, not {self._port_arg}.",
                hint="Use another --data-dir, or `kafeed broker stop --purge` it first.",
            )

    def _create(self, libs: KafkaLibs) -> dict[str, Any]:
        nodes, port, secure = self._nodes_arg or 1, self._port_arg or 9092, bool(self._secure_arg)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cluster_id = _new_cluster_id()
        specs = node_specs(self.data_dir, nodes, port, secure=secure)
        scram: list[str] = []
        material = self.material
        if secure:
            bootstrap = ",".join(f"127.0.0.1:{s.port}" for s in specs)
            material, passwords = create_material(material.root, specs, bootstrap)
            scram = scram_format_args(passwords)
        procs = []
        for spec in specs:
            (spec.directory / "logs").mkdir(parents=True, exist_ok=True)
            tls = (NodeTls(keystore=material.keystore(spec), truststore=material.ca_pem,
                           key_password=material.key_password()) if secure else None)
            text = server_properties(spec, specs, tls=tls)
            if secure:  # it names the key password
                write_private(spec.properties_file, text.encode())
            else:
                spec.properties_file.write_text(text)
            (spec.directory / "log4j2.properties").write_text(LOG4J2)
            args = ["-Xmx256m", QUICK_JIT, "-cp", libs.classpath, "kafka.tools.StorageTool",
                    "format", "-t", cluster_id, "-c", str(spec.properties_file),
                    *(["--standalone"] if nodes == 1 else []), *scram]
            # The SCRAM passwords go in an argument file the JVM reads, not on its command line.
            argfile = write_argfile(spec.directory / "format.args", args) if secure else None
            cmd = [libs.java, f"@{argfile}"] if argfile else [libs.java, *args]
            procs.append((spec, argfile, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                          stderr=subprocess.STDOUT, text=True)))
        for spec, argfile, proc in procs:
            try:
                out, _ = proc.communicate(timeout=120)
            finally:
                if argfile is not None:
                    argfile.unlink(missing_ok=True)
            if proc.returncode != 0:
                raise BrokerError(
                    f"Formatting storage of node {spec.node_id} failed:\n{out.strip()[-2000:]}"
                )
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
        logs = spec.directory / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        heap = self.heap_mb
        cmd = [
            libs.java, f"-Xmx{heap}m", f"-Xms{min(heap, 128)}m", "-XX:+UseG1GC",
            "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
            *([QUICK_JIT] if self.jit == "quick" else []),
            f"-Dkafka.logs.dir={logs}",
            f"-Dlog4j2.configurationFile={spec.directory / 'log4j2.properties'}",
            "-cp", libs.classpath, "kafka.Kafka", str(spec.properties_file),
        ]
        # posix_spawn in a new session: the node outlives this process, and no
        # Popen object is left behind to warn about a child still running.
        out = str(logs / "stdout.log")
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, out, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ]
        return os.posix_spawn(libs.java, cmd, dict(os.environ), file_actions=actions, setsid=True)

    def _wait_ready(self, state: dict[str, Any], timeout: float) -> None:
        from kafeed.kafka import admin_client

        specs = self._specs(state)
        # librdkafka logs connection refusals while a node boots; the kafeed.librdkafka
        # logger that every client config routes them to keeps them off stderr.
        admin = admin_client(self.connection())
        deadline = time.monotonic() + timeout
        while True:
            for spec in specs:
                pid = state["pids"].get(str(spec.node_id))
                if not _pid_alive(pid, str(self.data_dir)) and not _alive_after(pid, str(self.data_dir)):
                    raise BrokerError(
                        f"Kafka node {spec.node_id} exited while starting. Last lines of "
                        f"{spec.output_file}:\n{_tail(spec.output_file)}\n"
                        f"{_tail(spec.directory / 'logs' / 'stdout.log', 10)}"
                    )
            try:
                meta = admin.list_topics(timeout=2)
                if len(meta.brokers) >= len(specs):
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"The local cluster did not answer within {timeout:.0f}s. Last lines of "
                    f"{specs[0].output_file}:\n{_tail(specs[0].output_file)}"
                )
            time.sleep(0.3)

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
                if _pid_alive(pid, str(self.data_dir))
            }
            for pid in live.values():
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and any(
                _pid_alive(pid, str(self.data_dir)) for pid in live.values()
            ):
                time.sleep(0.2)
            for pid in live.values():
                if _pid_alive(pid, str(self.data_dir)):
                    log.warning("node pid %d did not stop in %.0fs; killing it", pid, timeout)
                    os.kill(pid, signal.SIGKILL)
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
        return pid if _pid_alive(pid, str(self.data_dir)) else None

    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node (fault tests)."""
        state = self._read_state()
        pid = None if state is None else state["pids"].get(str(node_id))
        if not _pid_alive(pid, str(self.data_dir)):
            raise BrokerError(f"Node {node_id} of {self.data_dir} is not running.")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while _pid_alive(pid, str(self.data_dir)) and time.monotonic() < deadline:
            time.sleep(0.05)

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
            alive = _pid_alive(pid, str(self.data_dir))
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
