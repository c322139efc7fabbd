"""The commit a sink assembles: chunks written on the helper thread, and what happens when
those files cannot be used as they are."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from kafeed.archive import pending as pending_module
from kafeed.archive.append import commit_files
from kafeed.archive.catalog import open_catalog, open_table
from kafeed.archive.pending import PendingCommit
from kafeed.archive.rows import RecordBatch, RowMapper
from kafeed.archive.settings import CatalogSettings
from kafeed.schema import make_document


def _chunk(partition: int, offsets: range) -> tuple[Any, dict[int, tuple[int, int]], int]:
    batch = RecordBatch("t")
    for o in offsets:
        doc = make_document([o, o + 1], id=f"d{partition}-{o}", vocab_size=70_000)
        batch.add(partition, o, 1_700_000_000_000 + o, None, doc.SerializeToString())
    return RowMapper("tokens").rows(batch), batch.ranges(), batch.value_bytes


@pytest.fixture
def table(tmp_path: Path) -> Any:
    catalog = open_catalog(CatalogSettings(warehouse=tmp_path))
    return open_table(catalog, "ns.t", topic="t", cluster_id="c", kind="tokens", target_file_bytes=1 << 20)


@pytest.fixture
def staged() -> Iterator[PendingCommit]:
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="helper")
    yield PendingCommit(executor)
    executor.shutdown(wait=True)


def _keys(table: Any) -> list[tuple[int, int]]:
    table.refresh()
    data = table.scan(selected_fields=("partition", "offset")).to_arrow()
    return sorted(zip(data["partition"].to_pylist(), data["offset"].to_pylist(), strict=True))


def test_chunks_are_written_on_the_helper_thread_and_committed_in_one_snapshot(
        table: Any, staged: PendingCommit, monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[str] = []
    write = pending_module.write_data_files

    def recorded(*args: Any) -> list[Any]:
        threads.append(threading.current_thread().name)
        return write(*args)

    monkeypatch.setattr(pending_module, "write_data_files", recorded)
    for partition, offsets in ((0, range(0, 5)), (1, range(0, 3)), (0, range(5, 9))):
        rows, ranges, size = _chunk(partition, offsets)
        staged.add(table, rows, ranges, size)
    assert staged.ranges == {0: (0, 9), 1: (0, 3)} and staged.records == 12
    files = staged.files()
    assert files is not None and len(files) == 3
    assert all(name.startswith("helper") for name in threads) and len(threads) == 3
    commit_files(table, files, {"k": "v"})
    assert _keys(table) == [(0, o) for o in range(9)] + [(1, o) for o in range(3)]
    assert len(table.snapshots()) == 1


def test_rows_of_a_lost_partition_are_not_committed_from_the_written_files(
        table: Any, staged: PendingCommit) -> None:
    for partition in (0, 1):
        staged.add(table, *_chunk(partition, range(0, 4)))
    staged.drop({1})
    assert staged.ranges == {0: (0, 4)} and staged.records == 4
    assert staged.files() is None  # the files hold partition 1's rows too
    rows = staged.rows({0: 2})
    kept = zip(rows["partition"].to_pylist(), rows["offset"].to_pylist(), strict=True)
    assert list(kept) == [(0, 2), (0, 3)]
    assert staged.rows({}).num_rows == 0


def test_a_failed_write_is_raised_once_then_the_rows_are_written_again(
        table: Any, staged: PendingCommit, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: Any) -> list[Any]:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pending_module, "write_data_files", full)
    staged.add(table, *_chunk(0, range(0, 3)))
    with pytest.raises(OSError, match="No space"):
        staged.files()
    assert staged.files() is None
    assert staged.rows({0: 0}).num_rows == 3
