"""Helpers for the archive tests: what a topic holds, what a table holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from kafeed.archive import ArchiveSettings, CatalogSettings
from kafeed.archive.catalog import load_table, open_catalog
from kafeed.config import ConnectionSettings


def settings(topic: str, warehouse: Path, **kwargs: Any) -> ArchiveSettings:
    kwargs.setdefault("flush_interval_s", 0.3)
    # A group per topic: a static member left by one test must not hold up the next one's.
    kwargs.setdefault("group", f"g-{topic}")
    return ArchiveSettings(topic=topic, table=kwargs.pop("table", "arch.t"),
                           catalog=CatalogSettings(warehouse=warehouse), **kwargs)


def topic_records(kafka: ConnectionSettings, topic: str) -> dict[tuple[int, int], bytes | None]:
    """Every committed record of ``topic``: (partition, offset) -> value."""
    c = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": "archive-test-reader",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": "read_committed"})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, -2) for p in parts])
        out: dict[tuple[int, int], bytes | None] = {}
        eof: set[int] = set()
        while len(eof) < len(parts):
            for msg in c.consume(1000, timeout=1.0):
                if msg.error() is not None:
                    eof.add(msg.partition())
                    continue
                out[(msg.partition(), msg.offset())] = msg.value()
        return out
    finally:
        c.close()


def table_rows(warehouse: Path, table: str = "arch.t") -> list[dict[str, Any]]:
    t = load_table(open_catalog(CatalogSettings(warehouse=warehouse)), table)
    return list(t.scan().to_arrow().to_pylist())


def table_keys(warehouse: Path, table: str = "arch.t") -> list[tuple[int, int]]:
    """(partition, offset) of every row, duplicates kept."""
    t = load_table(open_catalog(CatalogSettings(warehouse=warehouse)), table)
    data = t.scan(selected_fields=("partition", "offset")).to_arrow()
    return list(zip(data["partition"].to_pylist(), data["offset"].to_pylist(), strict=True))
