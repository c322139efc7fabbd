"""The archive's data files and commit match pyiceberg's own ``Table.append``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafeed.archive.append import commit_files, partitions, write_data_files
from kafeed.archive.catalog import open_catalog, open_table
from kafeed.archive.rows import RecordBatch, RowMapper
from kafeed.archive.settings import CatalogSettings
from kafeed.schema import make_document

DAY_MS = 86_400_000


def _rows(stamps: list[int]) -> Any:
    batch = RecordBatch("t")
    for i, ms in enumerate(stamps):
        doc = make_document([i, i + 1, 70_000], id=f"d{i}", vocab_size=70_001, metadata={"i": str(i)})
        batch.add(i % 2, i, ms, f"k{i}".encode(), doc.SerializeToString())
    return RowMapper("tokens").rows(batch)


def _table(tmp_path: Path, name: str) -> Any:
    catalog = open_catalog(CatalogSettings(warehouse=tmp_path))
    return open_table(catalog, f"ns.{name}", topic="t", cluster_id="c", kind="tokens",
                      target_file_bytes=1 << 20)


def _files(table: Any) -> list[tuple[Any, int]]:
    return sorted((tuple(f.file.partition), f.file.record_count) for f in table.scan().plan_files())


def _append(table: Any, rows: Any) -> None:
    commit_files(table, write_data_files(table.metadata, table.io, rows), {"k": "v"})


def test_one_partition_is_written_as_pyiceberg_would(tmp_path: Path) -> None:
    rows = _rows([1_700_000_000_000 + i for i in range(50)])
    ours, theirs = _table(tmp_path, "ours"), _table(tmp_path, "theirs")
    assert len(partitions(ours.metadata, rows)) == 1
    _append(ours, rows)
    theirs.append(rows, snapshot_properties={"k": "v"})
    assert ours.scan().to_arrow().equals(theirs.scan().to_arrow())
    # (Null header lists read back as empty ones, whichever way they were written.)
    read = ours.scan().to_arrow().drop_columns(["headers"])
    assert read.to_pylist() == rows.drop_columns(["headers"]).to_pylist()
    assert _files(ours) == _files(theirs)
    assert ours.current_snapshot().summary["k"] == "v"


def test_rows_of_two_days_are_split_as_pyiceberg_would(tmp_path: Path) -> None:
    rows = _rows([DAY_MS * 19_000 + 5, DAY_MS * 19_001 + 5, DAY_MS * 19_000 + 6])
    ours, theirs = _table(tmp_path, "ours"), _table(tmp_path, "theirs")
    parts = partitions(ours.metadata, rows)
    assert [part["offset"].to_pylist() for _, part in parts] == [[0, 2], [1]]
    _append(ours, rows)
    theirs.append(rows)
    assert _files(ours) == _files(theirs) == [(("t", 19_000), 2), (("t", 19_001), 1)]
    assert sorted(ours.scan().to_arrow()["offset"].to_pylist()) == [0, 1, 2]


def test_files_are_invisible_until_committed(tmp_path: Path) -> None:
    table = _table(tmp_path, "late")
    files = write_data_files(table.metadata, table.io, _rows([1_700_000_000_000 + i for i in range(5)]))
    assert len(files) == 1 and Path(files[0].file_path.removeprefix("file://")).exists()
    table.refresh()
    assert table.current_snapshot() is None
    commit_files(table, files, {"k": "v"})
    assert table.scan().to_arrow().num_rows == 5
    assert table.current_snapshot().summary["k"] == "v"
