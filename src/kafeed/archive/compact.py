"""Rewrite a table's small files: one file per (topic, day) where a day has several small ones.

Each day is rewritten in its own commit (an overwrite of exactly that day's rows, sorted
by partition and offset), carrying the current positions in its summary so that the
newest snapshot still says where the archive stands. A compaction that loses a race with
a sink reads the day again and retries; the sink's commits are never held up.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from kafeed.archive.catalog import check_table, load_table, open_catalog
from kafeed.archive.position import encode_positions, read_positions
from kafeed.archive.schema import PROP_CLUSTER, PROP_TOPIC, offsets_key
from kafeed.archive.settings import CatalogSettings
from kafeed.errors import CatalogUnavailable

log = logging.getLogger("kafeed")
ATTEMPTS = 10


@dataclass(frozen=True)
class CompactResult:
    days: int
    files_before: int
    files_after: int
    rows: int


def _small_days(table: Any, target_bytes: int) -> dict[date, int]:
    """Days with more than one file, at least one of them below ``target_bytes``: file counts."""
    epoch = date(1970, 1, 1)
    files: dict[date, list[int]] = {}
    for task in table.scan().plan_files():
        day = epoch + timedelta(days=int(task.file.partition[1]))
        files.setdefault(day, []).append(task.file.file_size_in_bytes)
    return {d: len(sizes) for d, sizes in files.items() if len(sizes) > 1 and min(sizes) < target_bytes}


def compact(table_name: str, catalog: CatalogSettings, *, target_bytes: int | None = None) -> CompactResult:
    """Rewrite every day of ``table_name`` whose files are small (see the module docstring)."""
    from pyiceberg.exceptions import CommitFailedException

    table = load_table(open_catalog(catalog), table_name)
    check_table(table, table_name, topic=table.properties.get(PROP_TOPIC, ""), cluster_id=None, kind=None)
    topic = table.properties[PROP_TOPIC]
    key = offsets_key(table.properties.get(PROP_CLUSTER, ""), topic)
    target = target_bytes or int(table.properties.get("write.target-file-size-bytes", 128 * 1024 * 1024))
    days = _small_days(table, target)
    before = sum(days.values())
    rows = 0
    for day in sorted(days):
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        # Topic names are [A-Za-z0-9._-]: safe inside quotes.
        where = (f"topic = '{topic}' AND timestamp >= '{start.isoformat()}' "
                 f"AND timestamp < '{(start + timedelta(days=1)).isoformat()}'")
        for attempt in range(ATTEMPTS):
            table.refresh()
            data = table.scan(row_filter=where).to_arrow().sort_by([("partition", "ascending"),
                                                                     ("offset", "ascending")])
            positions = read_positions(table, key)
            props = {key: encode_positions(positions)} if positions else {}
            try:
                table.overwrite(data, overwrite_filter=where, snapshot_properties=props)
            except CommitFailedException:
                log.info("kafeed archive compact: %s lost a race (attempt %d); reading it again", day,
                         attempt + 1)
                continue
            rows += data.num_rows
            break
        else:
            raise CatalogUnavailable(f"Could not compact {day} of {table_name!r}: writers kept committing "
                                     "first.", hint="Run it again when the sink is less busy.")
    after = sum(1 for task in table.scan().plan_files()
                if (date(1970, 1, 1) + timedelta(days=int(task.file.partition[1]))) in days)
    return CompactResult(days=len(days), files_before=before, files_after=after, rows=rows)
