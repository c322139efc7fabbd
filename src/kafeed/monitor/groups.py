"""Consumer groups and their committed offsets, read through the admin API."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kafeed.errors import translate_kafka_error

log = logging.getLogger("kafeed")


@dataclass(frozen=True)
class GroupOffsets:
    group: str
    state: str  # STABLE, EMPTY, ... as the broker names it; UNKNOWN when it did not say
    members: int
    #: (topic, partition) -> committed offset (partitions without a commit are left out)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)


def read_group_offsets(admin: Any, *, groups: list[str] | None = None,
                       timeout: float = 10.0) -> list[GroupOffsets]:
    """Committed offsets of ``groups`` (default: every classic/consumer group in the cluster)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    try:
        if groups is None:
            listed = admin.list_consumer_groups(request_timeout=timeout).result(timeout=timeout)
            groups = sorted(g.group_id for g in listed.valid)
    except Exception as exc:
        raise translate_kafka_error(exc, action="list consumer groups") from exc
    if not groups:
        return []
    described: dict[str, Any] = {}
    try:
        for gid, future in admin.describe_consumer_groups(groups, request_timeout=timeout).items():
            try:
                described[gid] = future.result(timeout=timeout)
            except Exception as exc:
                log.debug("could not describe group %s: %s", gid, exc)
    except Exception as exc:
        log.debug("describe_consumer_groups failed: %s", exc)
    out: list[GroupOffsets] = []
    # One request per group: the admin API takes a single group per call.
    for gid in groups:
        try:
            future = admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(gid)], request_timeout=timeout)[gid]
            result = future.result(timeout=timeout)
        except Exception as exc:
            log.debug("could not read offsets of group %s: %s", gid, exc)
            continue
        offsets = {
            (tp.topic, tp.partition): int(tp.offset)
            for tp in result.topic_partitions
            if tp.error is None and tp.offset >= 0
        }
        desc = described.get(gid)
        state = "UNKNOWN" if desc is None else str(getattr(desc.state, "name", desc.state))
        members = 0 if desc is None else len(desc.members)
        out.append(GroupOffsets(gid, state, members, offsets))
    return out
