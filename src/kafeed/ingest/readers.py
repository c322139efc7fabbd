"""Readers: a source → batches of items, each batch ending at a resumable position.

Each input record is an :class:`Item`; a reader rejects what it cannot parse (the
item's ``reject``) and the mapping rejects the rest. A batch's
:class:`Position` is where the next batch starts, so a progress marker taken
after any batch is a clean resume point. Blank lines are not records.
Compressed files and stdin are decompressed on the fly (:mod:`kafeed.ingest.compressed`).

This module reads JSON lines and text and dispatches on the source kind; items and
positions are :mod:`kafeed.ingest.batches`, CSV :mod:`kafeed.ingest.csv_rows`, Parquet
:mod:`kafeed.ingest.parquet_rows` and SQL :mod:`kafeed.ingest.sql`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from itertools import islice
from typing import IO, Any

from kafeed.ingest.batches import BOM, Batch, Item, Position, bad_utf8, new_item, skip_to
from kafeed.ingest.compressed import open_stream
from kafeed.ingest.csv_rows import read_csv
from kafeed.ingest.mapping import Rejected
from kafeed.ingest.options import IngestOptions
from kafeed.ingest.parquet_rows import read_parquet
from kafeed.ingest.sources import Source


def read_jsonl(fh: IO[bytes], start: Position, n: int) -> Iterator[Batch]:
    # The C scanner behind json.loads, called directly: saves the per-line wrapper calls.
    scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
    offset, line_no = start.offset, start.record
    skip_to(fh, offset)
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
                append(Item(line_no, None, raw, bad_utf8(exc)))
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
                append(new_item((line_no, obj, raw, None)))
        offset += sum(map(len, lines))
        yield items, Position(offset, line_no)


def _decode_text(raw: bytes, line_no: int) -> Item:
    try:
        return new_item((line_no, {"text": raw.decode("utf-8")}, raw, None))
    except UnicodeDecodeError as exc:
        return Item(line_no, None, raw, bad_utf8(exc))


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
    skip_to(fh, offset)
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
