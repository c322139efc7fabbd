"""Disk used per broker log dir, against the free space of its filesystem.

A local cluster (``kafeed broker``'s data dir) is measured directly. Any other
cluster is asked through Kafka's LogDirsCommand (sizes of every partition
replica per broker and log dir); its free space is known only when the log
dir path also exists on this host, since the command does not report it.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafeed.broker.render import node_specs
from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError

log = logging.getLogger("kafeed")


@dataclass(frozen=True)
class DiskUsage:
    broker: int
    log_dir: str
    used_bytes: int  # Kafka's data in this log dir
    free_bytes: int | None  # free on the filesystem holding it (None: not measurable here)
    total_bytes: int | None

    @property
    def used_ratio(self) -> float | None:
        """Used share of the filesystem (0..1): what fills up and stops the broker."""
        if not self.total_bytes or self.free_bytes is None:
            return None
        return (self.total_bytes - self.free_bytes) / self.total_bytes

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        ratio = self.used_ratio
        out["used_ratio"] = None if ratio is None else round(ratio, 4)
        return out


def _dir_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                # Allocated blocks: Kafka preallocates sparse index files.
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except OSError:
                pass
    return total


def _fs(path: str) -> tuple[int | None, int | None]:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None, None
    return usage.free, usage.total


def local_cluster_bootstrap(data_dir: Path) -> str | None:
    """The bootstrap servers of the local cluster in ``data_dir``, or None when there is none."""
    try:
        state = json.loads((data_dir / "cluster.json").read_text())
        specs = node_specs(data_dir.resolve(), int(state["nodes"]), int(state["port"]))
    except (OSError, ValueError, KeyError):
        return None
    return ",".join(f"127.0.0.1:{s.port}" for s in specs)


def local_disk_usage(data_dir: Path) -> list[DiskUsage]:
    """Usage of every node of the local cluster kept in ``data_dir`` (running or not)."""
    try:
        state = json.loads((data_dir / "cluster.json").read_text())
        specs = node_specs(data_dir.resolve(), int(state["nodes"]), int(state["port"]))
    except (OSError, ValueError, KeyError) as exc:
        raise KafeedError(f"{data_dir} holds no local kafeed cluster ({exc}).",
                          hint="Pass the --data-dir given to `kafeed broker start`.") from exc
    out = []
    for spec in specs:
        free, total = _fs(str(spec.log_dir))
        out.append(DiskUsage(spec.node_id, str(spec.log_dir), _dir_size(spec.log_dir), free, total))
    return out


def parse_log_dirs(text: str) -> list[DiskUsage]:
    """Parse LogDirsCommand ``--describe`` output (one JSON line among status lines)."""
    out: list[DiskUsage] = []
    for line in text.splitlines():
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        for broker in doc.get("brokers", []):
            for logdir in broker.get("logDirs", []):
                path = str(logdir.get("logDir", "?"))
                used = sum(int(p.get("size", 0)) for p in logdir.get("partitions", []))
                free, total = _fs(path) if os.path.isdir(path) else (None, None)
                out.append(DiskUsage(int(broker["broker"]), path, used, free, total))
    return out


def remote_disk_usage(settings: ConnectionSettings, *, timeout: float = 60.0) -> list[DiskUsage]:
    """Usage per broker log dir through LogDirsCommand; ``[]`` when it cannot run here.

    Needs the cached Kafka jars (``kafeed broker fetch``) and a PLAINTEXT listener,
    like ``kafeed topic describe``'s sizes.
    """
    from kafeed.broker.fetch import resolve_libs

    if settings.security_protocol != "PLAINTEXT":
        return []
    try:
        libs = resolve_libs(fetch=False)
    except KafeedError:
        return []
    try:
        proc = subprocess.run(
            [libs.java, "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", libs.classpath,
             "org.apache.kafka.tools.LogDirsCommand", "--bootstrap-server", settings.bootstrap,
             "--describe"],
            capture_output=True, text=True, check=False, timeout=timeout,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("LogDirsCommand failed: %s", exc)
        return []
    return parse_log_dirs(proc.stdout)
