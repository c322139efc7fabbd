"""Parquet sources: one record per row, read a row group at a time; a resume skips whole groups."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from kafeed.ingest.batches import Batch, Item, Position, new_item
from kafeed.ingest.mapping import Rejected
from kafeed.ingest.sources import Source


def read_parquet(source: Source, start: Position, n: int) -> Iterator[Batch]:
    import pyarrow.parquet as pq

    assert source.path is not None
    try:
        pf = pq.ParquetFile(source.path)
    except Exception as exc:  # pyarrow raises ArrowInvalid / OSError for a file that is not Parquet
        if start.record == 0:
            bad = Rejected("unreadable_file", f"not a Parquet file: {exc}"[:300])
            yield [Item(1, None, None, bad)], Position(0, 1)
        return
    meta = pf.metadata
    groups, first_row, skip = [], 0, start.record
    for g in range(meta.num_row_groups):
        rows = meta.row_group(g).num_rows
        if first_row + rows <= skip:
            first_row += rows
            continue
        groups.append(g)
    row_no = first_row
    drop = skip - first_row
    if not groups:
        return
    for batch in pf.iter_batches(batch_size=n, row_groups=groups):
        rows_list: list[dict[str, Any]] = batch.to_pylist()
        if drop:
            cut = min(drop, len(rows_list))
            rows_list, drop, row_no = rows_list[cut:], drop - cut, row_no + cut
        items: list[Item] = []
        for row in rows_list:
            row_no += 1
            items.append(new_item((row_no, row, None, None)))
        yield items, Position(0, row_no)
