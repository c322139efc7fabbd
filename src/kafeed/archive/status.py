"""What a table holds of its topic, next to what the topic holds now."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from kafeed.archive.catalog import check_table, load_table, open_catalog
from kafeed.archive.position import read_positions
from kafeed.archive.schema import PROP_CLUSTER, PROP_TOPIC, offsets_key
from kafeed.archive.settings import CatalogSettings
from kafeed.config import ConnectionSettings
from kafeed.errors import TopicError
from kafeed.kafka import KafkaClients


@dataclass(frozen=True)
class PartitionStatus:
    partition: int
    archived_up_to: int | None  # next offset to archive (None: nothing yet)
    log_start: int | None  # the topic's low watermark (None: the cluster did not answer)
    high_watermark: int | None
    rows: int
    files: int

    @property
    def lag(self) -> int | None:
        if self.high_watermark is None:
            return None
        return self.high_watermark - (self.archived_up_to or 0)


@dataclass(frozen=True)
class ArchiveStatus:
    table: str
    topic: str
    cluster_id: str
    snapshots: int
    files: int
    bytes: int
    rows: int
    partitions: list[PartitionStatus]

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for entry, part in zip(data["partitions"], self.partitions, strict=True):
            entry["lag"] = part.lag
        return data


def _int_bound(data: bytes | None) -> int | None:
    return None if data is None else int.from_bytes(data[:4], "little", signed=True)


def archive_status(table_name: str, catalog: CatalogSettings,
                   connection: ConnectionSettings | None = None) -> ArchiveStatus:
    """Per partition: archived up to, log start, high watermark, rows and files; with
    ``connection`` None, the topic's side is left out (the table alone)."""
    table = load_table(open_catalog(catalog), table_name)
    check_table(table, table_name, topic=table.properties.get(PROP_TOPIC, ""), cluster_id=None, kind=None)
    topic = table.properties[PROP_TOPIC]
    cluster_id = table.properties.get(PROP_CLUSTER, "")
    positions = read_positions(table, offsets_key(cluster_id, topic))
    part_id = table.schema().find_field("partition").field_id
    files = rows = size = 0
    per_rows: dict[int, int] = {}
    per_files: dict[int, int] = {}
    for task in table.scan().plan_files():
        f = task.file
        files += 1
        rows += f.record_count
        size += f.file_size_in_bytes
        low = _int_bound((f.lower_bounds or {}).get(part_id))
        high = _int_bound((f.upper_bounds or {}).get(part_id))
        if low is not None and high is not None:
            for p in range(low, high + 1):
                per_files[p] = per_files.get(p, 0) + 1
    if rows:  # one integer column: cheap next to the data
        counts = table.scan(selected_fields=("partition",)).to_arrow()["partition"].value_counts()
        per_rows = {int(c["values"].as_py()): int(c["counts"].as_py()) for c in counts}
    marks = _watermarks(connection, topic, sorted(set(positions) | set(per_rows))) if connection else {}
    parts = sorted(set(positions) | set(per_rows) | set(marks))
    return ArchiveStatus(
        table=table_name, topic=topic, cluster_id=cluster_id, snapshots=len(table.snapshots()),
        files=files, bytes=size, rows=rows,
        partitions=[PartitionStatus(partition=p, archived_up_to=positions.get(p),
                                    log_start=marks.get(p, (None, None))[0],
                                    high_watermark=marks.get(p, (None, None))[1],
                                    rows=per_rows.get(p, 0), files=per_files.get(p, 0)) for p in parts])


def _watermarks(connection: ConnectionSettings, topic: str, known: list[int]) -> dict[int, tuple[int, int]]:
    with KafkaClients(connection).reader(what="archive status") as reader:
        try:
            parts = reader.partitions(topic, timeout_s=10)
        except TopicError:
            parts = []
        return reader.watermarks(topic, sorted(set(known) | set(parts)), timeout_s=10)
