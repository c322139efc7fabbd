"""Consumer groups and their committed offsets.

Committed offsets are read with a (never subscribing) consumer per group, not
with the admin API's ListConsumerGroupOffsets: librdkafka's admin path crashes
the process (SIGSEGV) when the broker answers that request with NOT_COORDINATOR,
which happens for a group not seen before and whenever the coordinator moves,
e.g. after a broker loss (confluentinc/librdkafka#5040,
confluent-kafka-python#1982; reproduced with confluent-kafka 2.16.1). A
consumer's own group handle retries that error properly. The consumer joins
nothing and commits nothing: it only sends OffsetFetch.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients

log = logging.getLogger("kafeed")


@dataclass(frozen=True)
class GroupOffsets:
    group: str
    state: str  # STABLE, EMPTY, ... as the broker names it; UNKNOWN when it did not say
    members: int
    #: (topic, partition) -> committed offset (partitions without a commit are left out)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)


class GroupOffsetReader:
    """Reads groups and committed offsets; keeps one idle consumer per group between polls."""

    def __init__(self, settings: ConnectionSettings, admin: Any, *, timeout: float = 10.0) -> None:
        self.settings = settings
        self.admin = admin
        self.timeout = timeout
        self._consumers: dict[str, Any] = {}

    def _consumer(self, group: str) -> Any:
        consumer = self._consumers.get(group)
        if consumer is None:
            consumer = self._consumers[group] = KafkaClients(self.settings).consumer({
                "group.id": group, "enable.auto.commit": False,
                "client.id": f"{self.settings.client_id}-monitor"})
        return consumer

    def list_groups(self) -> list[str]:
        listed = self.admin.list_consumer_groups(request_timeout=self.timeout).result(timeout=self.timeout)
        return sorted(g.group_id for g in listed.valid)

    def _describe(self, groups: list[str]) -> dict[str, Any]:
        described: dict[str, Any] = {}
        try:
            futures = self.admin.describe_consumer_groups(groups, request_timeout=self.timeout)
        except Exception as exc:
            log.debug("describe_consumer_groups failed: %s", exc)
            return described
        for gid, future in futures.items():
            try:
                described[gid] = future.result(timeout=self.timeout)
            except Exception as exc:  # NOT_COORDINATOR while the coordinator loads: unknown for now
                log.debug("could not describe group %s: %s", gid, exc)
        return described

    def committed(self, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int] | None:
        """Committed offsets of ``group`` on ``partitions``; None when the coordinator did not answer."""
        from kafeed.kafka.types import TopicPartition

        if not partitions:
            return {}
        try:
            result = self._consumer(group).committed(
                [TopicPartition(t, p) for t, p in partitions], timeout=self.timeout)
        except Exception as exc:
            log.debug("could not read offsets of group %s: %s", group, exc)
            return None
        return {(tp.topic, tp.partition): int(tp.offset) for tp in result
                if tp.error is None and tp.offset >= 0}

    def read(self, partitions: list[tuple[str, int]], *,
             groups: list[str] | None = None) -> list[GroupOffsets]:
        """Every group's (or ``groups``') committed offsets on ``partitions``."""
        if groups is None:
            groups = self.list_groups()
        for gone in set(self._consumers) - set(groups):
            self._consumers.pop(gone).close()
        if not groups:
            return []
        described = self._describe(groups)
        out: list[GroupOffsets] = []
        for gid in groups:
            offsets = self.committed(gid, partitions)
            if offsets is None:
                continue
            desc = described.get(gid)
            state = "UNKNOWN" if desc is None else str(getattr(desc.state, "name", desc.state))
            members = 0 if desc is None else len(desc.members)
            out.append(GroupOffsets(gid, state, members, offsets))
        return out

    def close(self) -> None:
        while self._consumers:
            _gid, consumer = self._consumers.popitem()
            consumer.close()
