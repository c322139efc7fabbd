"""Readers: a source → batches of items, each batch ending at a resumable position.

Each input record is an :class:`Item`; a reader rejects what it cannot parse (the
item's ``reject``) and the mapping rejects the rest. A batch's
:class:`Position` is where the next batch starts, so a progress marker taken
after any batch is a clean resume point. Blank lines are not records.
Compressed files and stdin are decompressed on the fly (:mod:`kafeed.ingest.compressed`).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import IO, Any, NamedTuple

from kafeed.ingest.compressed import open_stream
from kafeed.ingest.mapping import Rejected
from kafeed.ingest.options import IngestOptions
from kafeed.ingest.sources import Source


class Item(NamedTuple):
    """One input record, as a reader hands it over.

    ``where`` is its 1-based line (or row) number; ``fields`` the parsed row (None when the
    reader rejected it); ``raw`` the original bytes for the dead-letter topic (None: rebuilt
    from ``fields``); ``reject`` why the input is bad, None when it parsed.
    """

    where: int
    fields: Mapping[str, Any] | None
    raw: bytes | None
    reject: Rejected | None


# Builds an Item from one tuple at half the cost of ``Item(...)``, whose ``__new__`` is Python
# code: the readers' loops over good records use it (measured ~0.15 µs a record saved).
_item: Callable[[tuple[int, Mapping[str, Any] | None, bytes | None, Rejected | None]], Item] = \
    partial(tuple.__new__, Item)

BOM = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class Position:
    """Resume point inside one source: byte ``offset`` (files, stdin) and records consumed.

    For a compressed source ``offset`` counts decompressed bytes (a resume reads up to
    it again); ``source_bytes`` is how much of the file itself was read, for progress
    (None: the same as ``offset``). Only ``offset`` and ``record`` are resume state.
    """

    offset: int = 0
    record: int = 0
    source_bytes: int | None = None


Batch = tuple[list[Item], Position]


def _skip(fh: IO[bytes], offset: int, at: int = 0) -> None:
    """Move ``fh`` from byte ``at`` to byte ``offset``: seek, or read the bytes away when it
    cannot seek (a pipe, a decompressed stream)."""
    if offset <= at:
        return
    try:
        fh.seek(offset)
    except (OSError, io.UnsupportedOperation):
        left = offset - at
        while left > 0:
            chunk = fh.read(min(left, 1 << 20))
            if not chunk:
                break
            left -= len(chunk)


def _bad_utf8(exc: UnicodeDecodeError) -> Rejected:
    return Rejected("invalid_utf8", f"invalid UTF-8 at byte {exc.start}")


def read_jsonl(fh: IO[bytes], start: Position, n: int) -> Iterator[Batch]:
    # The C scanner behind json.loads, called directly: saves the per-line wrapper calls.
    scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
    offset, line_no = start.offset, start.record
    _skip(fh, offset)
    while True:
        lines = list(islice(fh, n))
        if not lines:
            return
        items: list[Item] = []
        append = items.append
        for line_no, raw in enumerate(lines, line_no + 1):  # noqa: B020 (line_no carries over)
            body = raw.strip()
            if not body:
                continue
            if line_no == 1 and body.startswith(BOM):
                body = body[3:].strip()
            try:
                text = body.decode("utf-8")
            except UnicodeDecodeError as exc:
                append(Item(line_no, None, raw, _bad_utf8(exc)))
                continue
            try:
                obj, end = scan(text, 0)
            except StopIteration as stop:
                reason = f"expecting a JSON value at column {stop.value + 1}"
                append(Item(line_no, None, raw, Rejected("bad_json", reason)))
                continue
            except (ValueError, RecursionError) as exc:  # RecursionError: absurdly deep nesting
                reason = str(exc)[:200] or type(exc).__name__
                append(Item(line_no, None, raw, Rejected("bad_json", reason)))
                continue
            if end != len(text):
                reason = f"extra data after the JSON value at column {end + 1}"
                append(Item(line_no, None, raw, Rejected("bad_json", reason)))
            elif type(obj) is not dict:
                reason = f"JSON {type(obj).__name__}, not an object"
                append(Item(line_no, None, raw, Rejected("not_object", reason)))
            else:
                append(_item((line_no, obj, raw, None)))
        offset += sum(map(len, lines))
        yield items, Position(offset, line_no)


def _decode_text(raw: bytes, line_no: int) -> Item:
    try:
        return _item((line_no, {"text": raw.decode("utf-8")}, raw, None))
    except UnicodeDecodeError as exc:
        return Item(line_no, None, raw, _bad_utf8(exc))


def read_text(fh: IO[bytes], start: Position, n: int, mode: str) -> Iterator[Batch]:
    """Plain text: the whole stream (``file``), each line, or blank-line-separated paragraphs."""
    if mode == "file":
        if start.record > 0:
            return
        raw = fh.read()
        if raw.startswith(BOM):
            raw = raw[3:]
        whole = [_decode_text(raw, 1)] if raw.strip() else []
        yield whole, Position(start.offset + len(raw), 1)
        return
    offset, line_no = start.offset, start.record
    _skip(fh, offset)
    para: list[bytes] = []
    para_line = 0
    items: list[Item] = []
    for raw in fh:
        line_no += 1
        offset += len(raw)
        body = raw[3:] if line_no == 1 and raw.startswith(BOM) else raw
        if mode == "line":
            if body.strip():
                items.append(_decode_text(body.rstrip(b"\r\n"), line_no))
        elif body.strip():
            if not para:
                para_line = line_no
            para.append(body)
            continue
        elif para:
            items.append(_decode_text(b"".join(para).rstrip(b"\r\n"), para_line))
            para = []
        if len(items) >= n:
            yield items, Position(offset, line_no)
            items = []
    if para:
        items.append(_decode_text(b"".join(para).rstrip(b"\r\n"), para_line))
    yield items, Position(offset, line_no)


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
        _skip(fh, start.offset, at=feed.offset)
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
                    items.append(Item(row_no, None, raw, _bad_utf8(exc)))
                    continue
                items.append(_item((row_no, dict(zip(header, row, strict=True)), raw, None)))
        if len(items) >= n:
            yield items, Position(feed.offset, row_no)
            items = []
    yield items, Position(feed.offset, row_no)


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
            items.append(_item((row_no, row, None, None)))
        yield items, Position(0, row_no)


def open_stdin() -> IO[bytes]:
    return sys.stdin.buffer


def _read_stream(fh: IO[bytes], kind: str, options: IngestOptions, start: Position,
                 n: int) -> Iterator[Batch]:
    """A byte stream (plain or decompressed) → batches; ``kind`` is jsonl, csv or text."""
    if kind == "jsonl":
        return read_jsonl(fh, start, n)
    if kind == "csv":
        return read_csv(fh, start, n)
    return read_text(fh, start, n, options.text_mode)


def _read_file(raw: IO[bytes], name: str, kind: str, options: IngestOptions, start: Position,
               n: int) -> Iterator[Batch]:
    fh, stream = open_stream(raw, name)
    try:
        if stream is None:
            yield from _read_stream(fh, kind, options, start, n)
            return
        for items, pos in _read_stream(fh, kind, options, start, n):
            yield items, Position(pos.offset, pos.record, stream.compressed_read)
    finally:
        if stream is not None:
            fh.close()


def read_source(source: Source, options: IngestOptions, start: Position) -> Iterator[Batch]:
    """Dispatch on the source kind; SQL lives in :mod:`kafeed.ingest.sql`."""
    n = min(options.read_batch, options.commit_records)  # commits fall on batch boundaries
    if source.kind == "parquet":
        yield from read_parquet(source, start, n)
        return
    if source.kind == "sql":
        from kafeed.ingest.sql import read_sql

        assert options.sql is not None and options.dsn is not None
        yield from read_sql(options.dsn, options.sql, start, n)
        return
    if source.kind == "stdin":
        yield from _read_file(open_stdin(), source.name, options.stdin_format, options, start, n)
        return
    assert source.path is not None
    with source.path.open("rb") as f:
        yield from _read_file(f, source.name, source.kind, options, start, n)


def raw_bytes(item: Item) -> bytes:
    """The bytes a dead-letter record carries: the original input, or the row as JSON."""
    if item.raw is not None:
        return item.raw
    return json.dumps(item.fields, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass")
