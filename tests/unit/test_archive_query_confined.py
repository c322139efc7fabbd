"""`kafeed archive query` stays in its table: one SELECT over the snapshot's own files.

Every way out of the table that DuckDB offers (writing files, attaching databases, reading
other files, installing or loading extensions, changing its settings) is refused in one
sentence with exit 2 and leaves nothing behind; a SELECT reads what pyiceberg reads; values
print as they are; Ctrl-C ends a running query with exit 130.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafeed.archive.append import commit_files, write_data_files
from kafeed.archive.catalog import open_catalog, open_table
from kafeed.archive.query import query
from kafeed.archive.rows import RecordBatch, RowMapper
from kafeed.archive.settings import CatalogSettings
from kafeed.cli.main import main
from kafeed.schema import make_document
from tests.cli_support import usage_error

ROWS = 50


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """A table ``ns.t`` of 50 rows in one data file, beside a file that is not the table's."""
    wh = tmp_path / "wh"
    wh.mkdir()
    table = open_table(open_catalog(CatalogSettings(warehouse=wh)), "ns.t", topic="t", cluster_id="c",
                       kind="tokens", target_file_bytes=1 << 20)
    batch = RecordBatch("t")
    for i in range(ROWS):
        doc = make_document([i, i + 1], id=f"d{i}", vocab_size=100, metadata={"i": str(i)})
        batch.add(i % 2, i, 1_700_000_000_000 + i, f"k{i}".encode(), doc.SerializeToString())
    rows = RowMapper("tokens").rows(batch)
    commit_files(table, write_data_files(table.metadata, table.io, rows), {})
    (tmp_path / "secret.csv").write_text("user,password\nroot,hunter2\n")
    return wh


def _args(wh: Path, sql: str, *more: str) -> list[str]:
    return ["archive", "query", sql, "--table", "ns.t", "--warehouse", str(wh), *more]


def _data_file(wh: Path) -> Path:
    (path,) = [p for p in wh.rglob("*.parquet")]
    return path


ESCAPES = {
    "copy to a new file": "COPY (SELECT * FROM t) TO '{out}/dump.csv'",
    "copy over the table's file": "COPY (SELECT 1 AS x) TO '{data}' (FORMAT parquet, USE_TMP_FILE false)",
    "copy from a file": "COPY t FROM '{secret}'",
    "attach": "ATTACH '{out}/other.db' AS other",
    "read_csv outside": "SELECT * FROM read_csv('{secret}')",
    "read_csv /etc/passwd": "SELECT * FROM read_csv('/etc/passwd')",
    "read_text": "SELECT content FROM read_text('{secret}')",
    "read_blob": "SELECT content FROM read_blob('{secret}')",
    "glob": "SELECT * FROM glob('{out}/*')",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "set": "SET enable_external_access = true",
    "pragma": "PRAGMA enable_profiling",
    "two statements": "SELECT 1; COPY (SELECT 1) TO '{out}/two.csv'",
    "create": "CREATE TABLE copy AS SELECT * FROM t",
    "a SELECT that reads another file": "SELECT * FROM t WHERE EXISTS (SELECT * FROM read_csv('{secret}'))",
}


@pytest.mark.parametrize("sql", ESCAPES.values(), ids=ESCAPES.keys())
def test_every_way_out_of_the_table_is_refused(warehouse: Path, sql: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = warehouse.parent
    data = _data_file(warehouse)
    before = sorted(p.name for p in out.rglob("*")), data.read_bytes()
    text = sql.format(out=out, data=data, secret=out / "secret.csv")
    line = usage_error(_args(warehouse, text), capsys)
    assert "hunter2" not in line
    assert (sorted(p.name for p in out.rglob("*")), data.read_bytes()) == before  # nothing written


def test_a_select_reads_what_pyiceberg_reads(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kafeed.archive.catalog import load_table

    table = load_table(open_catalog(CatalogSettings(warehouse=warehouse)), "ns.t")
    cols = ["partition", "offset", "key", "value"]
    expected = sorted(tuple(r[c] for c in cols) for r in table.scan().to_arrow().to_pylist())
    got = query("ns.t", CatalogSettings(warehouse=warehouse), 'SELECT partition, "offset", key, value FROM t')
    assert not got.more and sorted(tuple(r[c] for c in cols) for r in got.rows.to_pylist()) == expected
    # The table's own files stay readable by name, and a WITH / DESCRIBE are SELECTs too.
    data = _data_file(warehouse)
    assert query("ns.t", CatalogSettings(warehouse=warehouse),
                 f"WITH x AS (SELECT * FROM read_parquet('{data}')) SELECT count(*) AS n FROM x"
                 ).rows.to_pylist() == [{"n": ROWS}]
    assert main(_args(warehouse, "DESCRIBE t", "--json")) == 0
    assert "offset" in {r["column_name"] for r in json.loads(capsys.readouterr().out)}


def test_a_default_limit_and_limit(warehouse: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cs = CatalogSettings(warehouse=warehouse)
    assert query("ns.t", cs, 'SELECT * FROM t ORDER BY "offset"', limit=10).more
    assert main(_args(warehouse, 'SELECT "offset" FROM t ORDER BY "offset"', "--limit", "7", "--json")) == 0
    captured = capsys.readouterr()
    assert [r["offset"] for r in json.loads(captured.out)] == list(range(7))
    assert "--limit" in captured.err
    assert main(_args(warehouse, 'SELECT "offset" FROM t, range(30)', "--json")) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)) == 1000 and "The first 1,000 rows" in captured.err
    assert main(_args(warehouse, 'SELECT "offset" FROM t, range(30)', "--limit", "0", "--json")) == 0
    captured = capsys.readouterr()
    assert len(json.loads(captured.out)) == ROWS * 30 and captured.err == ""


VALUES = ["[bold]x[/bold]", "[link=http://example.com]y[/link]", "[red]", "http://a.b/[c]", "1e3 True None"]


@pytest.mark.parametrize("value", VALUES)
def test_values_print_as_they_are(warehouse: Path, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    quoted = value.replace("'", "''")
    assert main(_args(warehouse, f'SELECT \'{quoted}\' AS "{quoted}" FROM t LIMIT 1')) == 0
    printed = capsys.readouterr().out
    assert printed.count(value) == 2, printed  # the header and the cell
    assert "\x1b" not in printed


@pytest.fixture
def sigint_raises() -> Iterator[None]:
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_ctrl_c_stops_a_running_query_with_130(warehouse: Path, sigint_raises: None,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    main_thread = threading.get_ident()
    started: dict[str, Any] = {}

    def interrupt_once_running() -> None:
        # The query's thread is the readiness signal; without one (DuckDB in this thread, where
        # it never sees the signal) the query runs to its end, about a minute.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
                t.name == "kafeed-archive-query" for t in threading.enumerate()):
            time.sleep(0.01)
        started["at"] = time.monotonic()
        signal.pthread_kill(main_thread, signal.SIGINT)

    poker = threading.Thread(target=interrupt_once_running)
    poker.start()
    rc = main(_args(warehouse, "SELECT sum(hash(range * \"offset\")) FROM t, range(3000000000)"))
    poker.join()
    assert rc == 130
    assert time.monotonic() - started["at"] < 5
    err = capsys.readouterr().err
    assert "Interrupted." in err and "bug" not in err


def test_a_table_of_remote_files_is_read_through_pyiceberg_and_still_confined(
        warehouse: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import kafeed.archive.query as q

    monkeypatch.setattr(q, "_is_local", lambda path: False)  # as an object store's URIs are
    sql = 'SELECT count(*) AS n, sum("offset") AS s FROM t'
    got = query("ns.t", CatalogSettings(warehouse=warehouse), sql)
    assert got.rows.to_pylist() == [{"n": ROWS, "s": sum(range(ROWS))}]
    secret = warehouse.parent / "secret.csv"
    usage_error(_args(warehouse, f"SELECT * FROM read_csv('{secret}')"), capsys)
    usage_error(_args(warehouse, f"SELECT * FROM read_parquet('{_data_file(warehouse)}')"), capsys)
