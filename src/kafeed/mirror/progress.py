"""How far each site's flow has got: the site's end offsets against what the target holds.

What was mirrored is read where exactly-once MirrorMaker commits it: the source offsets
Connect writes to the target's ``mm2-offsets.<site>.internal`` in the same transaction
as the records, read read_committed. So a position counts only records that a
read_committed reader of the target sees, never a batch of a killed node's open
transaction. The last error is the newest failed connector or task state in
``mm2-status.<site>.internal``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.errors import KafeedError, TopicError
from kafeed.kafka import KafkaClients, list_offsets
from kafeed.kafka.offsets import TopicPartitionKey
from kafeed.mirror.config import topic_patterns
from kafeed.mirror.render import offsets_topic, status_topic
from kafeed.topics import TopicAdmin


@dataclass(frozen=True)
class PartitionProgress:
    """One source partition: its end (last stable offset) and the next offset not yet mirrored."""

    topic: str
    partition: int
    source_end: int
    mirrored: int

    @property
    def behind(self) -> int:
        return max(0, self.source_end - self.mirrored)


@dataclass(frozen=True)
class SiteProgress:
    """A site's flow as ``kafeed mirror status`` shows it."""

    alias: str
    reachable: bool
    partitions: tuple[PartitionProgress, ...] = ()
    state: str | None = None  # the source connector's task state (RUNNING, FAILED, ...)
    last_error: str | None = None

    @property
    def behind(self) -> int:
        return sum(p.behind for p in self.partitions)

    def as_dict(self) -> dict[str, Any]:
        return {"site": self.alias, "reachable": self.reachable, "state": self.state,
                "behind_records": self.behind, "last_error": self.last_error,
                "partitions": [{"topic": p.topic, "partition": p.partition, "source_end": p.source_end,
                                "mirrored": p.mirrored, "behind": p.behind} for p in self.partitions]}


def matching_topics(connection: ConnectionSettings, patterns: str) -> list[str]:
    """The site's topics that MirrorMaker's ``topics`` patterns select (each matches a whole name)."""
    compiled = [re.compile(p) for p in topic_patterns(patterns)]
    return sorted(t for t in TopicAdmin(connection).list() if any(c.fullmatch(t) for c in compiled))


def end_offsets(connection: ConnectionSettings, topics: list[str], *,
                timeout: float = 15.0) -> dict[TopicPartitionKey, int]:
    """``{(topic, partition): last stable offset}`` for every partition of ``topics``."""
    if not topics:
        return {}
    action = f"read the end offsets of {', '.join(topics)}"
    admin = KafkaClients(connection).admin()
    meta = admin.list_topics(timeout=timeout).topics
    return list_offsets(admin, [(t, p) for t in topics if t in meta for p in meta[t].partitions],
                        timeout=timeout, action=action)


def latest_by_key(connection: ConnectionSettings, topic: str, *,
                  timeout: float = 30.0) -> dict[bytes, bytes | None]:
    """The newest committed value of every key of a compacted topic (``{}`` when it does not exist)."""
    latest: dict[bytes, bytes | None] = {}
    with KafkaClients(connection).reader(what="mirror status reader") as reader:
        try:
            partitions = reader.partitions(topic, timeout_s=timeout)
        except TopicError:
            return latest
        for msg in reader.read_to_end(topic, partitions, timeout_s=timeout,
                                      hint="Check the target cluster's health and retry."):
            if msg.key() is not None:
                latest[msg.key()] = msg.value()
    return latest


#: A gap this small between what was mirrored and a partition's end may be only transaction
#: markers (one commit marker after a transactional producer's last record); it is read to see.
MARKER_GAP = 100


def caught_up_positions(source: ConnectionSettings, ends: dict[TopicPartitionKey, int],
                        mirrored: dict[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
    """``mirrored``, with each partition whose only offsets left at the site are transaction
    markers (or aborted records: nothing a read_committed reader sees) moved to its end.

    MirrorMaker commits the offset after the last record it copied; a transactional
    producer's partition ends one marker later, so without this it never looks caught up.
    """
    positions = dict(mirrored)
    near = {tp: (positions.get(tp, 0), end) for tp, end in ends.items()
            if 0 < end - positions.get(tp, 0) <= MARKER_GAP}
    if not near:
        return positions
    with KafkaClients(source).reader(what="mirror marker check") as reader:
        for (topic, partition), (at, end) in near.items():
            if not reader.read(topic, {partition: (at, end)}, timeout_s=15.0):
                positions[(topic, partition)] = end
    return positions


def mirrored_positions(target: ConnectionSettings, site: str) -> dict[TopicPartitionKey, int]:
    """Per source (topic, partition) of ``site``: the next offset the target has committed."""
    positions: dict[TopicPartitionKey, int] = {}
    for key, value in latest_by_key(target, offsets_topic(site)).items():
        try:
            connector, where = json.loads(key)
            offset = None if value is None else int(json.loads(value)["offset"])
        except (ValueError, TypeError, KeyError):
            continue
        if connector == "MirrorSourceConnector" and where.get("cluster") == site and offset is not None:
            positions[(str(where["topic"]), int(where["partition"]))] = offset + 1
    return positions


def source_task_state(target: ConnectionSettings, site: str) -> tuple[str | None, str | None]:
    """The source connector's worst task state, and the first line of the newest failure."""
    states: dict[str, dict[str, Any]] = {}
    for key, value in latest_by_key(target, status_topic(site)).items():
        name = key.decode(errors="replace")
        if value is not None and name.startswith(("status-task-", "status-connector-")):
            try:
                states[name] = json.loads(value)
            except ValueError:
                continue
    failed = [s for s in states.values() if s.get("state") == "FAILED" and s.get("trace")]
    error = str(failed[0]["trace"]).strip().splitlines()[0] if failed else None
    tasks = [s.get("state") for n, s in states.items() if n.startswith("status-task-MirrorSourceConnector-")]
    order = ["FAILED", "UNASSIGNED", "PAUSED", "RESTARTING", "RUNNING"]
    state = min(tasks, key=lambda s: order.index(s) if s in order else 0) if tasks else None
    return (str(state) if state is not None else None), error


def site_progress(alias: str, source: ConnectionSettings, patterns: str,
                  target: ConnectionSettings) -> SiteProgress:
    """Where ``alias``' flow stands; a site that cannot be read is reported, not raised."""
    try:
        state, error = source_task_state(target, alias)
        mirrored = mirrored_positions(target, alias)
    except KafeedError as exc:
        return SiteProgress(alias, reachable=False, last_error=f"target: {exc.message}")
    try:
        ends = end_offsets(source, matching_topics(source, patterns))
        mirrored = caught_up_positions(source, ends, mirrored)
    except KafeedError as exc:
        return SiteProgress(alias, reachable=False, state=state, last_error=exc.message)
    parts = tuple(PartitionProgress(t, p, end, mirrored.get((t, p), 0))
                  for (t, p), end in sorted(ends.items()))
    return SiteProgress(alias, reachable=True, partitions=parts, state=state, last_error=error)
