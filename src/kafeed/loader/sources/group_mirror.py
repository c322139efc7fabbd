"""A loader state's positions mirrored to a consumer group, for lag monitoring only."""

from __future__ import annotations

from typing import Any

from kafeed.errors import ConfigError
from kafeed.kafka import KafkaClients
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.assignment import parse_key
from kafeed.loader.state.checkpoint import reader_entries


def commit_positions(settings: LoaderSettings, state: dict[str, Any], group: str | None) -> dict[str, int]:
    """Commit the next offset of every partition in ``state`` to ``group`` (default: the
    settings' group). Returns what was committed."""
    from kafeed.kafka.types import TopicPartition

    if settings.files:
        raise ConfigError("Local files (files=) have no consumer group to mirror positions to.",
                          hint="The checkpointed loader.state_dict() holds them; commit_offsets is for "
                               "topics.")
    name = group or settings.group
    if not name:
        raise ConfigError("commit_offsets needs a consumer group.",
                          hint="Pass group= here or to the dataset.")
    offsets: dict[str, int] = {}
    for reader in reader_entries(state):
        for key, entry in reader["reader"]["partitions"].items():
            offsets[key] = int(entry["next"])
    if not offsets:
        return {}
    clients = KafkaClients(settings.connection)
    consumer = clients.consumer({"group.id": name, "enable.auto.commit": False})
    try:
        tps = [TopicPartition(*parse_key(k), o) for k, o in sorted(offsets.items())]
        consumer.commit(offsets=tps, asynchronous=False)
    finally:
        consumer.close()
    return offsets
