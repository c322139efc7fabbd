"""SQL over an archive table with DuckDB, confined to the snapshot's own data files.

pyiceberg only plans the scan (which data files the current snapshot holds); DuckDB reads
those files itself, so a query checks that the table is readable by an engine other than the
one that wrote it. kafeed writes append and rewrite (compaction) snapshots only, never delete
files; a table that has them is refused rather than read with deleted rows in it.

A query is SQL from whoever runs the command, so DuckDB is opened as a sandbox before the
query is parsed: external access off except the snapshot's data files (``allowed_paths``),
no extension installed or loaded, the configuration locked; and only one ``SELECT`` is run.
``COPY ... TO``, ``ATTACH``, ``INSTALL``/``LOAD`` and ``read_csv``/``read_text`` of any other
file are refused as :class:`~kafeed.errors.ConfigError`. A table whose files are not local
paths is handed to DuckDB as an Arrow stream read by pyiceberg instead (one scan per query).

The query runs in a thread: DuckDB does not look at Python's signals while it computes, so
the calling thread waits, and on ``KeyboardInterrupt`` interrupts the connection and re-raises.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from kafeed.archive.catalog import load_table, open_catalog
from kafeed.archive.settings import CatalogSettings
from kafeed.errors import ConfigError
from kafeed.extras import MissingExtra

DEFAULT_LIMIT = 1000
"""Rows a query returns unless told otherwise (``--limit``)."""

_QUERY_THREAD = "kafeed-archive-query"


@dataclass(frozen=True)
class QueryAnswer:
    """What a query returned: its first ``limit`` rows (an Arrow table) and whether it had more."""

    rows: Any
    more: bool


def view_name(table_name: str) -> str:
    """The name a query uses for the table: its last dotted part (``main.tokens`` -> ``tokens``)."""
    return table_name.rsplit(".", 1)[-1]


def data_files(table: Any) -> list[str]:
    """Local paths (or URIs as pyiceberg holds them) of the current snapshot's data files."""
    paths = []
    for task in table.scan().plan_files():
        if task.delete_files:
            raise ConfigError("The table has delete files, which this query does not apply.",
                              hint="Query it with an engine that reads Iceberg deletes (Spark, Trino).")
        uri = urlparse(task.file.file_path)
        paths.append(unquote(uri.path) if uri.scheme in ("file", "") else task.file.file_path)
    return paths


def _is_local(path: str) -> bool:
    return path.startswith("/")


def sandbox(table: Any, name: str) -> Any:
    """A DuckDB connection that sees ``table`` as the view ``name`` and nothing else: its own
    data files are the only paths it may open, no extension can be installed or loaded, and
    the configuration is locked."""
    import duckdb

    con = duckdb.connect(config={"autoinstall_known_extensions": False,
                                 "autoload_known_extensions": False})
    try:
        files = data_files(table)
        local = all(_is_local(f) for f in files)
        # allowed_paths is refused in connect()'s config ("before the database is started").
        con.execute("SET allowed_paths = ?", [files if local else []])
        con.execute("SET enable_external_access = false")
        if not files:  # no snapshot yet: the table's columns, no rows
            con.register(name, table.schema().as_arrow().empty_table())
        elif local:
            con.read_parquet(files).create_view(name)
        else:
            con.register(name, table.scan().to_arrow_batch_reader())
        con.execute("SET lock_configuration = true")
    except BaseException:
        con.close()
        raise
    return con


def check_statement(sql: str) -> None:
    """Refuse anything but one ``SELECT`` (which includes ``WITH``, ``VALUES``, ``FROM t``,
    ``DESCRIBE``, ``SUMMARIZE``) in one sentence."""
    import duckdb

    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise ConfigError(f"The query failed: {_first_line(exc)}", hint=None) from None
    if len(statements) != 1:
        raise ConfigError(f"A query is one statement; this one holds {len(statements)}.",
                          hint="Run each statement on its own.")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise ConfigError(f"Only a SELECT runs here, not {kind.name}: a query reads the table "
                          "and nothing else.", hint="Write a SELECT over the table.")


def query(table_name: str, catalog: CatalogSettings, sql: str, *,
          limit: int | None = DEFAULT_LIMIT) -> QueryAnswer:
    """Run one ``SELECT`` against the table (named :func:`view_name` in it), confined to the
    table's own data files; its first ``limit`` rows (all of them for None)."""
    try:
        import duckdb
    except ModuleNotFoundError as exc:
        raise MissingExtra("duckdb", "archive") from exc
    check_statement(sql)
    name = view_name(table_name)
    con = sandbox(load_table(open_catalog(catalog), table_name), name)
    try:
        def run() -> Any:
            rel = con.sql(sql)
            if rel is None:  # extract_statements said SELECT; DuckDB still returned nothing
                raise ConfigError("The query returned no result set.", hint="Write a SELECT over the table.")
            return (rel if limit is None else rel.limit(limit + 1)).to_arrow_table()

        try:
            rows = _interruptible(con, run)
        except duckdb.PermissionException:
            raise ConfigError(f"The query reaches outside the table: only {name!r} can be read here.",
                              hint="Query the table's view; copy results with --json.") from None
        except duckdb.Error as exc:
            raise ConfigError(f"The query failed: {_first_line(exc)}",
                              hint=f"The table is called {name!r} in the query.") from None
    finally:
        with contextlib.suppress(duckdb.Error):  # busy: a second Ctrl-C left the query running
            con.close()
    more = limit is not None and rows.num_rows > limit
    return QueryAnswer(rows.slice(0, limit) if more else rows, more)


def _interruptible(con: Any, work: Any) -> Any:
    """``work()`` in a thread, this thread waiting; a ``KeyboardInterrupt`` here interrupts
    DuckDB, again until the thread ends: an interrupt before execution starts is lost, and
    one while the statement is being planned is refused as "busy"."""
    import duckdb

    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["value"] = work()
        except BaseException as exc:  # handed to the waiting thread as it is
            done["error"] = exc

    thread = threading.Thread(target=target, name=_QUERY_THREAD, daemon=True)
    try:
        thread.start()  # in the try: a Ctrl-C may come as soon as the thread exists
        thread.join()
    except KeyboardInterrupt:
        while thread.is_alive():
            with contextlib.suppress(duckdb.Error):
                con.interrupt()
            thread.join(0.05)
        raise
    if "error" in done:
        raise done["error"]
    return done["value"]


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
