"""Static, deterministic assignment of partitions to readers.

A reader is one (rank, DataLoader worker) pair: ``index = rank * num_workers + worker``
of ``count = world_size * num_workers``. Partitions, sorted by (topic, partition), go
round-robin to readers, so every partition has exactly one owner and the answer depends
on nothing but the arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

log = logging.getLogger("kafeed")

TopicPartition = tuple[str, int]


def partition_key(topic: str, partition: int) -> str:
    """The state's key for one partition: ``"topic:partition"``."""
    return f"{topic}:{partition}"


def parse_key(key: str) -> TopicPartition:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def assign(partitions: Iterable[TopicPartition], index: int, count: int) -> list[TopicPartition]:
    """The partitions reader ``index`` of ``count`` owns (possibly none)."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"reader index {index} is not in 0..{count - 1}")
    ordered = sorted(set(partitions))
    return [tp for i, tp in enumerate(ordered) if i % count == index]


def owned(every: list[TopicPartition], mode: str, index: int, count: int) -> list[TopicPartition]:
    """The shards of ``every`` reader ``index`` of ``count`` reads: all of them in replicated
    mode, else its share (:func:`assign`), with a warning when some readers get none."""
    if mode == "replicated":
        return every
    warn_if_idle(len(every), count)
    return assign(every, index, count)


def warn_if_idle(num_partitions: int, count: int) -> None:
    """Say clearly that some readers will get nothing (they end at once)."""
    if num_partitions < count:
        log.warning(
            "kafeed loader: %d partition(s) for %d readers (ranks x workers): %d reader(s) will be "
            "idle and end at once; use at least as many partitions as readers.",
            num_partitions, count, count - num_partitions,
        )
