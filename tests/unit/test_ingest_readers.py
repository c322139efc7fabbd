from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafeed.errors import ConfigError, IngestError
from kafeed.ingest import IngestOptions, discover
from kafeed.ingest.batches import Batch, Item, Position
from kafeed.ingest.csv_rows import read_csv
from kafeed.ingest.readers import read_jsonl, read_source, read_text
from kafeed.ingest.sql import check


def _all(batches: Iterator[Batch]) -> tuple[list[Item], Position]:
    items: list[Item] = []
    last = Position()
    for batch, pos in batches:
        items.extend(batch)
        last = pos
    return items, last


def test_jsonl_parses_rejects_and_tracks_offsets() -> None:
    data = (b'\xef\xbb\xbf{"id": "a", "text": "one"}\n'
            b"\n"
            b"{broken\n"
            b'[1, 2]\n'
            b'{"text": "caf\xff"}\n'
            b'{"id": "b", "text": "two"}')
    items, pos = _all(read_jsonl(io.BytesIO(data), Position(), 2))
    assert [i.where for i in items] == [1, 3, 4, 5, 6]  # the blank line 2 is not a record
    assert items[0].fields == {"id": "a", "text": "one"}  # a leading BOM is tolerated
    kinds = [i.reject.kind if i.reject else None for i in items]
    assert kinds == [None, "bad_json", "not_object", "invalid_utf8", None]
    assert items[2].raw == b"[1, 2]\n"
    assert pos == Position(len(data), 6)


def test_jsonl_absurd_nesting_is_a_bad_line_not_a_crash() -> None:
    data = b"[" * 200_000 + b"]" * 200_000 + b"\n" + b'{"text": "after"}\n'
    items, _ = _all(read_jsonl(io.BytesIO(data), Position(), 10))
    assert items[0].reject is not None and items[0].reject.kind == "bad_json"
    assert items[1].fields == {"text": "after"}


def test_jsonl_resumes_from_a_batch_position() -> None:
    lines = [json.dumps({"id": str(i), "text": f"t{i}"}).encode() + b"\n" for i in range(10)]
    data = b"".join(lines)
    batches = list(read_jsonl(io.BytesIO(data), Position(), 3))
    mid = batches[1][1]
    rest, _ = _all(read_jsonl(io.BytesIO(data), mid, 3))
    assert [i.fields["id"] for i in rest if i.fields] == [str(i) for i in range(6, 10)]
    assert rest[0].where == 7


@pytest.mark.parametrize(("mode", "expected"), [
    ("line", ["first line", "second", "para two"]),
    ("paragraph", ["first line\nsecond", "para two"]),
    ("file", ["first line\nsecond\n\n  \npara two\n"]),
])
def test_text_modes(mode: str, expected: list[str]) -> None:
    data = b"first line\nsecond\n\n  \npara two\n"
    items, _ = _all(read_text(io.BytesIO(data), Position(), 100, mode))
    assert [i.fields["text"] for i in items if i.fields] == expected


def test_text_paragraph_resume_and_line_numbers() -> None:
    data = b"".join(f"p{i} a\np{i} b\n\n".encode() for i in range(7))
    batches = list(read_text(io.BytesIO(data), Position(), 2, "paragraph"))
    assert [i.where for i in batches[0][0]] == [1, 4]
    rest, _ = _all(read_text(io.BytesIO(data), batches[0][1], 2, "paragraph"))
    assert [i.fields["text"] for i in rest if i.fields] == [f"p{i} a\np{i} b" for i in range(2, 7)]


def test_text_binary_garbage_is_rejected() -> None:
    items, _ = _all(read_text(io.BytesIO(b"ok\n\x89PNG\xff\xfe\n"), Position(), 10, "line"))
    assert items[0].reject is None and items[1].reject is not None and items[1].reject.kind == "invalid_utf8"


def test_csv_rows_bad_rows_and_resume() -> None:
    data = ('\ufeffid,text,label\n1,hello,0.5\n2,"multi\nline",1\n3,too,many,cols\n'
            '4,"bad"quote,1\n5,fine,2\n').encode() + b"6,caf\xff,3\n"
    items, pos = _all(read_csv(io.BytesIO(data), Position(), 2))
    kinds = [i.reject.kind if i.reject else None for i in items]
    assert kinds == [None, None, "csv_columns", "csv_syntax", None, "invalid_utf8"]
    assert items[0].fields == {"id": "1", "text": "hello", "label": "0.5"}
    assert items[1].fields is not None and items[1].fields["text"] == "multi\nline"
    assert [i.where for i in items] == [1, 2, 3, 4, 5, 6]
    assert pos.offset == len(data)
    first = next(iter(read_csv(io.BytesIO(data), Position(), 2)))
    rest, _ = _all(read_csv(io.BytesIO(data), first[1], 2))
    assert [i.where for i in rest] == [3, 4, 5, 6]


def test_csv_duplicate_header_dead_letters_every_row() -> None:
    items, _ = _all(read_csv(io.BytesIO(b"text,text\na,b\nc,d\n"), Position(), 10))
    assert [i.reject.kind if i.reject else None for i in items] == ["duplicate_header"] * 2


def _write_parquet(path: Path, n: int, group: int) -> None:
    table = pa.table({"id": [f"r{i}" for i in range(n)], "text": [f"row {i}" for i in range(n)]})
    pq.write_table(table, path, row_group_size=group)


def test_parquet_batches_and_resume_across_row_groups(tmp_path: Path) -> None:
    path = tmp_path / "d.parquet"
    _write_parquet(path, 25, 10)
    src = discover([str(path)])[0]
    opts = IngestOptions(read_batch=4)
    items, pos = _all(read_source(src, opts, Position()))
    assert [i.fields["id"] for i in items if i.fields] == [f"r{i}" for i in range(25)]
    assert pos.record == 25
    rest, _ = _all(read_source(src, opts, Position(0, 13)))
    assert [i.where for i in rest] == list(range(14, 26))


def test_parquet_unreadable_file_is_one_reject(tmp_path: Path) -> None:
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"not parquet at all")
    items, _ = _all(read_source(discover([str(path)])[0], IngestOptions(), Position()))
    assert len(items) == 1 and items[0].reject is not None and items[0].reject.kind == "unreadable_file"


def _sqlite(path: Path) -> str:
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE docs (id TEXT, body TEXT, score REAL)")
    con.executemany("INSERT INTO docs VALUES (?, ?, ?)", [(f"s{i}", f"body {i}", i / 2) for i in range(9)])
    con.commit()
    con.close()
    return f"sqlite:///{path}"


def test_sql_sqlite_rows_and_resume(tmp_path: Path) -> None:
    dsn = _sqlite(tmp_path / "f.db")
    opts = IngestOptions(sql="SELECT id, body AS text, score FROM docs ORDER BY id", dsn=dsn, read_batch=4)
    src = discover([], sql=opts.sql, dsn=dsn)[0]
    assert src.kind == "sql" and "sqlite" in src.name
    items, _ = _all(read_source(src, opts, Position()))
    assert [i.fields["id"] for i in items if i.fields] == [f"s{i}" for i in range(9)]
    assert items[3].fields == {"id": "s3", "text": "body 3", "score": 1.5}
    rest, _ = _all(read_source(src, opts, Position(0, 5)))
    assert [i.where for i in rest] == [6, 7, 8, 9]


def test_sql_errors_are_one_sentence(tmp_path: Path) -> None:
    dsn = _sqlite(tmp_path / "f.db")
    with pytest.raises(IngestError, match="query failed"):
        check(dsn, "SELECT nope FROM missing")
    with pytest.raises(ConfigError, match="does not exist"):
        check(f"sqlite:///{tmp_path / 'absent.db'}", "SELECT 1")
    with pytest.raises(ConfigError, match="Unsupported DSN"):
        check("mysql://u:secret@h/db", "SELECT 1")
    with pytest.raises(ConfigError) as info:
        check("mysql://u:secret@h/db", "SELECT 1")
    assert "secret" not in str(info.value)


def test_stdin_jsonl_and_text(monkeypatch: pytest.MonkeyPatch) -> None:
    import kafeed.ingest.readers as readers

    src = discover(["-"])[0]
    monkeypatch.setattr(readers, "open_stdin", lambda: io.BytesIO(b'{"text": "a"}\n{"text": "b"}\n'))
    items, _ = _all(read_source(src, IngestOptions(), Position()))
    assert [i.fields["text"] for i in items if i.fields] == ["a", "b"]
    monkeypatch.setattr(readers, "open_stdin", lambda: io.BytesIO(b'one\ntwo\nthree\n'))
    items, _ = _all(read_source(src, IngestOptions(stdin_format="text"), Position(4, 1)))
    assert [i.fields["text"] for i in items if i.fields] == ["two", "three"]  # resume skips bytes on a pipe


def test_discover_paths_dirs_globs_and_errors(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    for name in ("b.jsonl", "a.csv", "sub/c.txt", "sub/ignored.bin"):
        (tmp_path / name).write_text("x\n")
    names = [Path(s.name).name for s in discover([str(tmp_path)])]
    assert names == ["a.csv", "b.jsonl", "c.txt"]
    assert [s.kind for s in discover([str(tmp_path / "*.jsonl")])] == ["jsonl"]
    with pytest.raises(ConfigError, match="does not exist"):
        discover([str(tmp_path / "missing.jsonl")])
    with pytest.raises(ConfigError, match="matches no"):
        discover([str(tmp_path / "*.parquet")])
    with pytest.raises(ConfigError, match="suffix"):
        discover([str(tmp_path / "sub/ignored.bin")])
    with pytest.raises(ConfigError, match="No sources"):
        discover([])
    with pytest.raises(ConfigError, match="together"):
        discover([], sql="SELECT 1")
    one = discover([str(tmp_path / "b.jsonl")])[0]
    assert one.identity.endswith(f"|{one.size}|{(tmp_path / 'b.jsonl').stat().st_mtime_ns}")
