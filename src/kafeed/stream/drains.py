"""A stage's drain over every input topic: one :class:`kafeed.kafka.Drain` per topic, each
keeping its own record of progress, made at the first caught-up check."""

from __future__ import annotations

from typing import Any

from kafeed.config import ConnectionSettings
from kafeed.kafka import Drain, KafkaClients, group_positions, stall_seconds
from kafeed.stream.settings import StreamSettings


class InputDrains:
    """Whether the group has committed every partition of every input up to its end."""

    def __init__(self, connection: ConnectionSettings, settings: StreamSettings, *, stage: str,
                 clients: KafkaClients) -> None:
        stall_s = stall_seconds(settings.kafka.session_timeout_ms, settings.drain_stall_s)
        self._drains = {topic: Drain(connection, topic, what=f"kafeed {stage}", group=settings.group,
                                     stall_s=stall_s, clients=clients)
                        for topic in settings.inputs}

    def done(self, consumer: Any, assigned: set[tuple[str, int]]) -> bool:
        """Every input checked (a drain that is not asked does not see progress)."""
        done = []
        for topic, drain in self._drains.items():
            committed = group_positions(consumer, topic, drain.partitions())
            done.append(drain.done(committed, {p for t, p in assigned if t == topic}))
        return all(done)

    def close(self) -> None:
        for drain in self._drains.values():
            drain.close()
