"""Rebuilding a stage's state for newly assigned partitions from its changelog topic."""

from __future__ import annotations

from typing import Any

from kafeed.kafka import KafkaClients
from kafeed.stream.snapshots import read_from_snapshot
from kafeed.stream.stage import Stage
from kafeed.stream.topics import read_changelog


def restore_partitions(clients: KafkaClients, stage: Stage[Any], changelog: str, parts: list[int], *,
                       timeout_s: float) -> int:
    """Hand ``stage`` each partition's changelog entries (from the newest snapshot on, when the
    stage writes snapshots); the number of changelog records read."""
    if stage.snapshots:
        entries, read = read_from_snapshot(clients, changelog, parts, timeout_s=timeout_s,
                                           first_window=stage.snapshot_window)
    else:
        entries = read_changelog(clients, changelog, parts, timeout_s=timeout_s)
        read = sum(len(e) for e in entries.values())
    for p in parts:
        stage.restore(p, entries.get(p, []))
    return read
