"""Kafka's own Java admin tools, run from the cached jars against any cluster.

They answer what the Kafka client cannot ask: sizes of partition replicas on
disk (LogDirsCommand) and the KRaft quorum leader (MetadataQuorumCommand).
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.jars.fetch import QUICK_JVM, resolve_libs

log = logging.getLogger("kafeed")


def run_kafka_tool(settings: ConnectionSettings, tool: str, args: list[str], *,
                   timeout: float = 60.0) -> str | None:
    """Stdout of one of Kafka's Java admin tools against ``settings``' cluster, or None.

    Needs the cached Kafka jars and a PLAINTEXT listener; what these tools add
    (sizes on disk, the quorum leader) is informative, so callers show "n/a"
    rather than fail when this returns None.
    """
    if settings.security_protocol != "PLAINTEXT":
        return None
    try:
        libs = resolve_libs(fetch=False)
    except KafeedError:
        return None
    cmd = [libs.java, "-Xmx128m", *QUICK_JVM, "-cp", libs.classpath,
           f"org.apache.kafka.tools.{tool}", "--bootstrap-server", settings.bootstrap, *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("%s failed: %s", tool, exc)
        return None
    return proc.stdout if proc.returncode == 0 else None


def describe_log_dirs(settings: ConnectionSettings, *, topics: list[str] | None = None,
                      timeout: float = 60.0) -> list[dict[str, Any]] | None:
    """Kafka's LogDirsCommand ``--describe``: its ``brokers`` list, or None when it cannot run."""
    args = ["--describe"] + (["--topic-list", ",".join(topics)] if topics else [])
    out = run_kafka_tool(settings, "LogDirsCommand", args, timeout=timeout)
    return None if out is None else parse_log_dirs_output(out)


def quorum_leader(settings: ConnectionSettings, *, timeout: float = 30.0) -> int | None:
    """The KRaft quorum leader (the active controller) from MetadataQuorumCommand, or None.

    DescribeCluster cannot tell: under KRaft, brokers answer it with any live broker.
    """
    out = run_kafka_tool(settings, "MetadataQuorumCommand", ["describe", "--status"], timeout=timeout)
    match = re.search(r"^LeaderId:\s*(-?\d+)", out or "", re.M)
    return int(match.group(1)) if match and int(match.group(1)) >= 0 else None


def parse_log_dirs_output(text: str) -> list[dict[str, Any]]:
    """The ``brokers`` list of LogDirsCommand's output (one JSON line among status lines)."""
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                brokers: list[dict[str, Any]] = json.loads(line).get("brokers", [])
            except ValueError:
                continue
            return brokers
    return []


def log_dir_sizes(settings: ConnectionSettings, topic: str) -> dict[int, int]:
    """Bytes on disk per partition (largest replica); ``{}`` when they cannot be read."""
    sizes: dict[int, int] = {}
    for broker in describe_log_dirs(settings, topics=[topic]) or []:
        for logdir in broker.get("logDirs", []):
            for part in logdir.get("partitions", []):
                name, _, idx = part["partition"].rpartition("-")
                if name == topic:
                    sizes[int(idx)] = max(sizes.get(int(idx), 0), int(part["size"]))
    return sizes
