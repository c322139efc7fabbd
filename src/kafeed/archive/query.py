"""SQL over an archive table with DuckDB, reading the snapshot's Parquet files directly.

pyiceberg only plans the scan (which data files the current snapshot holds); DuckDB reads
those files itself, so a query checks that the table is readable by an engine other than the
one that wrote it. kafeed writes append and rewrite (compaction) snapshots only, never delete
files; a table that has them is refused rather than read with deleted rows in it.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

from kafeed.archive.catalog import load_table, open_catalog
from kafeed.archive.settings import CatalogSettings
from kafeed.errors import ConfigError
from kafeed.extras import MissingExtra


def view_name(table_name: str) -> str:
    """The name a query uses for the table: its last dotted part (``main.tokens`` -> ``tokens``)."""
    return table_name.rsplit(".", 1)[-1]


def data_files(table: Any) -> list[str]:
    """Local paths (or URIs DuckDB reads as they are) of the current snapshot's data files."""
    paths = []
    for task in table.scan().plan_files():
        if task.delete_files:
            raise ConfigError("The table has delete files, which this query does not apply.",
                              hint="Query it with an engine that reads Iceberg deletes (Spark, Trino).")
        uri = urlparse(task.file.file_path)
        paths.append(unquote(uri.path) if uri.scheme == "file" else task.file.file_path)
    return paths


def query(table_name: str, catalog: CatalogSettings, sql: str) -> Any:
    """Run ``sql`` against the table (named :func:`view_name` in it): its rows as an Arrow
    table, or None for a statement that returns none."""
    try:
        import duckdb
    except ModuleNotFoundError as exc:
        raise MissingExtra("duckdb", "archive") from exc
    table = load_table(open_catalog(catalog), table_name)
    files = data_files(table)
    con = duckdb.connect()
    try:
        if files:
            con.read_parquet(files).create_view(view_name(table_name))
        else:  # no snapshot yet: the table's columns, no rows
            con.register(view_name(table_name), table.schema().as_arrow().empty_table())
        try:
            result = con.sql(sql)
            return result.to_arrow_table() if result is not None else None
        except duckdb.Error as exc:
            raise ConfigError(f"The query failed: {str(exc).splitlines()[0]}",
                              hint=f"The table is called {view_name(table_name)!r} in the query.") from None
    finally:
        con.close()
