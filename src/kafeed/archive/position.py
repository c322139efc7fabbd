"""Where the archive stands: the next offset per Kafka partition, read from the table.

Every commit of the sink puts, in its snapshot's summary, the key
``kafeed.offsets.<cluster id>.<topic>`` with a JSON object ``{"<partition>": next offset}``
for every partition archived so far. That summary lands in the same catalog commit as the
data files, so the table alone says what it holds: a sink reads its position here on start
and after every failure, never from a consumer group. Snapshots without the key (written by
other tools) are skipped by walking the parent chain.

Beside it, ``kafeed.topic-id.<cluster id>.<topic>`` names the topic's id (Kafka gives a topic
a new one when it is deleted and created again): positions of a topic of the same name but
another id belong to records that are gone (tables written before the key have none).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kafeed.errors import CatalogUnavailable, ConfigError


def refreshed_positions(table: Any, key: str, *, name: str) -> dict[int, int]:
    """:func:`read_positions` of table ``name`` refreshed from its catalog first."""
    try:
        table.refresh()
    except Exception as exc:
        raise CatalogUnavailable(f"Could not read table {name!r}: {exc}.",
                                 hint="Check that the catalog is reachable.") from exc
    return read_positions(table, key)


def read_positions(table: Any, key: str) -> dict[int, int]:
    """``{partition: next offset}`` as of the table's current snapshot (empty: nothing archived)."""
    value = read_summary(table, key)
    return {} if value is None else decode_positions(value, key)


def read_summary(table: Any, key: str) -> str | None:
    """The newest value of snapshot summary ``key`` along the current snapshot's ancestry."""
    snapshot = table.current_snapshot()
    while snapshot is not None:
        summary = snapshot.summary
        value = summary[key] if summary is not None else None
        if value is not None:
            return str(value)
        parent = snapshot.parent_snapshot_id
        snapshot = table.snapshot_by_id(parent) if parent is not None else None
    return None


def decode_positions(value: str, key: str) -> dict[int, int]:
    try:
        data = json.loads(value)
        return {int(p): int(o) for p, o in data.items()}
    except (ValueError, AttributeError, TypeError):
        raise ConfigError(f"The table's snapshot summary {key!r} is not kafeed's position map.",
                          hint="Archive into a new table.") from None


def encode_positions(positions: Mapping[int, int]) -> str:
    return json.dumps({str(p): o for p, o in sorted(positions.items())}, separators=(",", ":"))

