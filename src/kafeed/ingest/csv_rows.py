"""CSV sources: a header row, then one record per row (a quoted field may span lines).

Each row keeps its raw bytes for the dead-letter topic; a header that is not valid
UTF-8 or repeats a column dead-letters every row with that reason.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import IO

from kafeed.ingest.batches import Batch, Item, Position, bad_utf8, new_item, skip_to
from kafeed.ingest.mapping import Rejected


class _LineFeed:
    """Feeds csv.reader one decoded line at a time while keeping the raw bytes and offset."""

    def __init__(self, fh: IO[bytes], offset: int) -> None:
        self.fh = fh
        self.offset = offset
        self.parts: list[bytes] = []

    def __iter__(self) -> _LineFeed:
        return self

    def __next__(self) -> str:
        raw = self.fh.readline()
        if not raw:
            raise StopIteration
        self.offset += len(raw)
        self.parts.append(raw)
        # surrogateescape never fails here; invalid rows are found on their raw bytes below.
        return raw.decode("utf-8", "surrogateescape")

    def take(self) -> bytes:
        raw = b"".join(self.parts)
        self.parts = []
        return raw


def read_csv(fh: IO[bytes], start: Position, n: int) -> Iterator[Batch]:
    csv.field_size_limit(2**31 - 1)  # oversize rows are dead-lettered by size, not by the csv module
    feed = _LineFeed(fh, 0)
    reader = csv.reader(feed, strict=True)
    try:
        header = next(reader)
    except StopIteration:
        yield [], Position(feed.offset, 0)
        return
    except csv.Error as exc:
        bad = Rejected("bad_header", f"CSV header: {exc}")
        yield [Item(0, None, feed.take(), bad)], Position(feed.offset, 0)
        return
    head_raw = feed.take()
    if header and header[0].startswith("\ufeff"):
        header[0] = header[0][1:]
    header_problem: Rejected | None = None
    try:
        head_raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        header_problem = Rejected("bad_header", f"CSV header: invalid UTF-8 at byte {exc.start}")
    dups = sorted({h for h in header if header.count(h) > 1})
    if dups:
        header_problem = Rejected("duplicate_header", f"CSV header repeats column(s) {', '.join(dups)}")
    row_no = start.record
    if start.offset > feed.offset:
        skip_to(fh, start.offset, at=feed.offset)
        feed.offset = start.offset
    width = len(header)
    items: list[Item] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            row_no += 1
            items.append(Item(row_no, None, feed.take(), Rejected("csv_syntax", str(exc)[:200])))
        else:
            raw = feed.take()
            if not row:
                continue
            row_no += 1
            if header_problem is not None:
                items.append(Item(row_no, None, raw, header_problem))
            elif len(row) != width:
                bad = Rejected("csv_columns", f"{len(row)} columns, header has {width}")
                items.append(Item(row_no, None, raw, bad))
            else:
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    items.append(Item(row_no, None, raw, bad_utf8(exc)))
                    continue
                items.append(new_item((row_no, dict(zip(header, row, strict=True)), raw, None)))
        if len(items) >= n:
            yield items, Position(feed.offset, row_no)
            items = []
    yield items, Position(feed.offset, row_no)
