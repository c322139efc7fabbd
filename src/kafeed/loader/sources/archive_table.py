"""The cold tier of a topic for the loader: archived records read back from the Iceberg table.

A reader with ``archive=`` consults one :class:`ArchiveTable` per archived topic. For a
partition whose next offset lies below the topic's log start offset, the reader takes the
records from the table (:meth:`ArchiveTable.read`, a range of offsets in offset order)
until it reaches the log start, then from Kafka: one offset order, so windows, shuffle,
sharding and the saved state are those of a topic that never expired. The state holds
offsets only; which tier an offset is read from is decided again on every open.

Records come back as a partition queues them (kafeed.loader.sources.partition: ``(offset, payload,
timestamp_ms, 0, raw)``), each payload already decoded from the table's columns
(kafeed.loader.nodes.record_kinds), so the hot path never re-encodes a protobuf. A row the table
kept raw (it did not decode when archived) or one of another tokenizer carries no payload but
a :class:`RawRow`; the cold tier decodes its exact bytes as it would a Kafka record's, and
counts or dead-letters it the same way.

The table is opened once per reader and pinned to its snapshot; it is reloaded only when
the log start moves past what that snapshot holds. pyiceberg is imported here, when a
source opens: it is the ``archive`` extra.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from kafeed.archive.catalog import check_table, load_table, open_catalog
from kafeed.archive.position import read_positions
from kafeed.archive.rows import record_value
from kafeed.archive.schema import PROP_CLUSTER, offsets_key
from kafeed.errors import ConfigError
from kafeed.loader.nodes.record_kinds import KINDS
from kafeed.loader.settings import LoaderSettings
from kafeed.loader.sources.offsets import explicit_offset, timestamp_ms
from kafeed.loader.sources.partition import Entry

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("kafeed")

INSTALL_HINT = "Install the archive extra: pip install 'kafeed[archive]'."


def _ordered(parts: Any, offsets: Any) -> bool:
    """Rows in (partition, offset) order."""
    step = parts[1:] - parts[:-1]
    return bool(np.all((step > 0) | ((step == 0) & (offsets[1:] >= offsets[:-1]))))


class RawRow:
    """An archived row whose payload is still to be decoded from its bytes: its value and key
    are read with one more scan for the whole row (rare: bad records)."""

    __slots__ = ("_full", "_source", "offset", "partition")

    def __init__(self, source: ArchiveTable, partition: int, offset: int) -> None:
        self._source = source
        self.partition = partition
        self.offset = offset
        self._full: dict[str, Any] | None = None

    def _row(self) -> dict[str, Any]:
        if self._full is None:
            self._full = self._source.row(self.partition, self.offset)
        return self._full

    def value(self) -> bytes | None:
        return record_value(self._row())

    def key(self) -> bytes | None:
        key: bytes | None = self._row()["key"]
        return key


def _import_pyiceberg() -> None:
    try:
        import pyarrow  # noqa: F401
        import pyiceberg  # noqa: F401
    except ImportError:
        raise ConfigError("Reading a topic's archive (archive=) needs pyiceberg and pyarrow.",
                          hint=INSTALL_HINT) from None


class ArchiveTable:
    """Topic ``topic``'s table ``identifier``, for one reader."""

    def __init__(self, settings: LoaderSettings, topic: str, identifier: str) -> None:
        self.settings = settings
        self.topic = topic
        self.identifier = identifier
        self._table: Any = None
        self._cluster_id = ""
        self._positions: dict[int, int] = {}
        self._lows: dict[int, int] | None = None
        # The files read last and their rows: a data file holds many refills' worth of offsets.
        self._last: tuple[tuple[str, ...], pa.Table] | None = None
        self._tokenizer = settings.tokenizer

    def open(self, cluster_id: str | None) -> None:
        """Load the table and refuse one that is not this topic's on this cluster, of this kind
        (``cluster_id`` None: the table's own, for a table read without its cluster)."""
        _import_pyiceberg()
        table = load_table(open_catalog(self.settings.archive_catalog), self.identifier)
        if cluster_id is None:
            cluster_id = str(table.properties.get(PROP_CLUSTER, ""))
        self._cluster_id = cluster_id
        check_table(table, self.identifier, topic=self.topic, cluster_id=cluster_id,
                    kind=self.settings.kind)
        self._pin(table)

    def partitions(self) -> dict[int, int]:
        """``{partition: the offset past its last archived record}`` as of the pinned snapshot."""
        return dict(self._positions)

    def _pin(self, table: Any) -> None:
        self._table = table
        self._positions = read_positions(table, offsets_key(self._cluster_id, self.topic))
        self._lows = None
        self._last = None

    def refresh(self) -> None:
        """Reload the table: the sink may have archived more since it was opened."""
        self._pin(load_table(open_catalog(self.settings.archive_catalog), self.identifier))

    def release(self) -> None:
        """Forget the rows of the files read last (no partition is read from the table now)."""
        self._last = None

    def archived_to(self, partition: int) -> int:
        """The next offset the table does not hold yet (0: nothing archived)."""
        return self._positions.get(partition, 0)

    def low(self, partition: int) -> int | None:
        """The first archived offset of ``partition`` (None: no row of it)."""
        if self._lows is None:  # one scan of two integer columns for every partition
            data = self._table.scan(selected_fields=("partition", "offset")).to_arrow()
            lows = data.group_by("partition").aggregate([("offset", "min")])
            self._lows = dict(zip(lows["partition"].to_pylist(), lows["offset_min"].to_pylist(),
                                  strict=True))
        return self._lows.get(partition)

    def first_at(self, partition: int, ms: int, below: int) -> int | None:
        """The first archived offset below ``below`` whose timestamp is at or after ``ms``."""
        data = self._table.scan(
            row_filter=f"partition = {int(partition)} AND offset < {int(below)} "
                       f"AND timestamp >= {int(ms) * 1000}",
            selected_fields=("offset",)).to_arrow()
        return int(np.min(data["offset"].to_numpy())) if data.num_rows else None

    def floor(self, key: str, partition: int, log_start: int, first: int) -> int:
        """The lowest offset a reader wanting to start at ``first`` can read: the first archived
        offset when ``first`` lies below the log start and the table holds rows there (it must
        then reach the log start), else the log start."""
        if first >= log_start:
            return log_start
        low = self.low(partition)
        if low is None or low >= log_start:
            return log_start
        self.check_reaches(key, partition, max(first, low), log_start)
        return low

    def cold_start(self, key: str, partition: int, first: int, log_start: int) -> int:
        """The start offset of a fresh reader, ``first`` as resolved in the log, moved into the
        cold tier where ``settings.start`` asks for records the log no longer has."""
        spec = self.settings.start
        if first > log_start or spec == "latest":
            return first
        if spec == "earliest":
            wish: int | None = 0
        elif isinstance(spec, datetime | int):
            wish = self.first_at(partition, timestamp_ms(spec), log_start)
        else:
            wish = explicit_offset(spec, self.topic, partition)
            wish = 0 if wish is None else wish
        if wish is None:
            return first
        return max(wish, self.floor(key, partition, log_start, wish))

    def check_reaches(self, key: str, partition: int, first: int, log_start: int) -> None:
        """Offsets ``first`` .. ``log_start - 1`` must all be read from the table."""
        if self.archived_to(partition) < log_start:
            self.refresh()
        archived = self.archived_to(partition)
        if archived < log_start:
            raise ConfigError(
                f"Offsets {max(first, archived)}..{log_start - 1} of partition {key} are neither in "
                f"table {self.identifier!r} (archived up to {archived}) nor in the topic (log start "
                f"{log_start}).", hint="Start at or after the log start offset (start=), or keep "
                                       "`kafeed archive` ahead of the topic's retention.")

    # -- records ---------------------------------------------------------------------------
    def read(self, ranges: Mapping[int, tuple[int, int]]) -> dict[int, list[Entry]]:
        """The archived records of each partition with offsets in its ``[first, stop)``, in
        offset order. One read of the data files that may hold them (a file holds every Kafka
        partition's rows); rows are picked by index, the token lists never copied."""
        out: dict[int, list[Entry]] = {p: [] for p in ranges}
        wanted = {p: r for p, r in ranges.items() if r[1] > r[0]}
        if not wanted:
            return out
        data = self._files(wanted)
        parts = data["partition"].to_numpy()
        offsets = data["offset"].to_numpy()
        pick = np.zeros(data.num_rows, dtype=np.bool_)
        for p, (first, stop) in wanted.items():
            pick |= (parts == p) & (offsets >= first) & (offsets < stop)
        rows = np.flatnonzero(pick)
        if rows.size > 1 and not _ordered(parts[rows], offsets[rows]):  # files are written sorted
            rows = rows[np.lexsort((offsets[rows], parts[rows]))]
        if rows.size > 1:
            p, o = parts[rows], offsets[rows]
            rows = rows[np.concatenate([[True], (o[1:] != o[:-1]) | (p[1:] != p[:-1])])]  # never twice
        if not rows.size:
            return out
        stamps = (data["timestamp"].cast("int64").to_numpy() // 1000)[rows].tolist()
        payloads = KINDS[self.settings.kind].from_columns(data, rows, self._tokenizer)
        chosen_parts, offs = parts[rows], offsets[rows].tolist()
        cuts = (np.flatnonzero(chosen_parts[1:] != chosen_parts[:-1]) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(offs)], strict=True):
            p = int(chosen_parts[lo])
            out[p] = [(o, pl, st, 0, None if pl is not None else RawRow(self, p, o))
                      for o, st, pl in zip(offs[lo:hi], stamps[lo:hi], payloads[lo:hi], strict=True)]
        return out

    def _files(self, ranges: Mapping[int, tuple[int, int]]) -> pa.Table:
        """Every row of the data files whose statistics say they may hold ``ranges``: the
        filter prunes files only (filtering rows would copy the token lists). The rows of the
        files read last are kept until other files are needed, so a file is read once."""
        from pyiceberg.io.pyarrow import ArrowScan

        fields = ("partition", *KINDS[self.settings.kind].columns)
        terms = [f"(partition = {int(p)} AND offset >= {int(a)} AND offset < {int(b)})"
                 for p, (a, b) in sorted(ranges.items())]
        tasks = list(self._table.scan(row_filter=" OR ".join(terms), selected_fields=fields).plan_files())
        key = tuple(sorted(task.file.file_path for task in tasks))
        if self._last is not None and self._last[0] == key:  # the next refill from the same files
            return self._last[1]
        whole = self._table.scan(selected_fields=fields)
        data = ArrowScan(whole.table_metadata, whole.io, whole.projection(), whole.row_filter,
                         whole.case_sensitive).to_table(tasks)
        self._last = (key, data)
        return data

    def row(self, partition: int, offset: int) -> dict[str, Any]:
        """One whole row (every column), for a record decoded from its bytes."""
        rows = self._table.scan(row_filter=f"partition = {int(partition)} AND offset = {int(offset)}"
                                ).to_arrow().to_pylist()
        return dict(rows[0])
