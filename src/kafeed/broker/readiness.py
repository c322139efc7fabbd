"""Waiting for a starting cluster: every node up and answering, or an error quoting its log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kafeed.broker.processes import alive_after, pid_alive
from kafeed.broker.render import NodeSpec
from kafeed.config import ConnectionSettings
from kafeed.errors import BrokerError


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` of a node's log, for an error that says why it did not start."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log written)"


def wait_ready(connection: ConnectionSettings, specs: list[NodeSpec], pids: dict[str, Any], *,
               marker: str, timeout: float) -> None:
    """Return once the cluster reports all ``specs`` as brokers; BrokerError when a node
    exits (``pids``: node id text → pid) or ``timeout`` passes first."""
    from kafeed.kafka import KafkaClients

    # librdkafka logs connection refusals while a node boots; the kafeed.librdkafka
    # logger that every client config routes them to keeps them off stderr.
    admin = KafkaClients(connection).admin()
    deadline = time.monotonic() + timeout
    while True:
        for spec in specs:
            pid = pids.get(str(spec.node_id))
            if not pid_alive(pid, marker) and not alive_after(pid, marker):
                raise BrokerError(
                    f"Kafka node {spec.node_id} exited while starting. Last lines of "
                    f"{spec.output_file}:\n{tail(spec.output_file)}\n"
                    f"{tail(spec.directory / 'logs' / 'stdout.log', 10)}"
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
                f"{specs[0].output_file}:\n{tail(specs[0].output_file)}"
            )
        time.sleep(0.3)
