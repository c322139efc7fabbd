"""Disk used per broker log dir, against the free space of its filesystem.

A local cluster (``kafeed broker``'s data dir) is measured directly. Any other
cluster is asked through Kafka's LogDirsCommand (sizes of every partition
replica per broker and log dir); its free space is known only when the log
dir path also exists on this host, since the command does not report it.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kafeed.broker import LocalCluster
from kafeed.broker.render import NodeSpec
from kafeed.broker.status import dir_size
from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError
from kafeed.jars.tools import describe_log_dirs, parse_log_dirs_output

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


def _fs(path: str) -> tuple[int | None, int | None]:
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return None, None
    return usage.free, usage.total


def _recorded_nodes(data_dir: Path) -> list[NodeSpec] | None:
    try:
        return LocalCluster(data_dir.resolve()).recorded_nodes()
    except (KafeedError, OSError, ValueError, KeyError):
        return None


def local_cluster_bootstrap(data_dir: Path) -> str | None:
    """The bootstrap servers of the local cluster in ``data_dir``, or None when there is none."""
    specs = _recorded_nodes(data_dir)
    return None if specs is None else ",".join(f"127.0.0.1:{s.port}" for s in specs)


def local_disk_usage(data_dir: Path) -> list[DiskUsage]:
    """Usage of every node of the local cluster kept in ``data_dir`` (running or not)."""
    specs = _recorded_nodes(data_dir)
    if specs is None:
        raise KafeedError(f"{data_dir} holds no local kafeed cluster (no readable cluster.json).",
                          hint="Pass the --data-dir given to `kafeed broker start`.")
    out = []
    for spec in specs:
        free, total = _fs(str(spec.log_dir))
        out.append(DiskUsage(spec.node_id, str(spec.log_dir), dir_size(spec.log_dir), free, total))
    return out


def parse_log_dirs(text: str) -> list[DiskUsage]:
    """Usage per broker log dir from LogDirsCommand ``--describe`` output."""
    return _usage(parse_log_dirs_output(text))


def _usage(brokers: list[dict[str, Any]]) -> list[DiskUsage]:
    out: list[DiskUsage] = []
    for broker in brokers:
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
    return _usage(describe_log_dirs(settings, timeout=timeout) or [])
