"""SQL sources: ``sqlite:///path.db`` (stdlib sqlite3) or ``postgresql://...`` (psycopg, extra ``postgres``).

Rows stream with ``fetchmany``; a resume re-runs the query and skips the rows
already committed, so the query must return rows in a stable order (use ORDER BY).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError, IngestError
from kafeed.ingest.batches import Batch, Item, Position
from kafeed.ingest.sources import redact_dsn


def connect(dsn: str) -> Any:
    """Open a DB-API connection for ``dsn``; a wrong DSN is one clear :class:`ConfigError`."""
    if dsn.startswith("sqlite:///"):
        path = Path(dsn[len("sqlite:///"):])
        if not path.is_file():
            raise ConfigError(f"SQLite database {path} does not exist.",
                              hint="Use --dsn sqlite:///path/to/file.db with an existing file.")
        try:
            return sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise ConfigError(f"Could not open SQLite database {path}: {exc}.") from exc
    if dsn.startswith(("postgresql://", "postgres://")):
        try:
            import psycopg  # type: ignore[import-not-found, unused-ignore]
        except ImportError:
            raise ConfigError("Reading from PostgreSQL needs psycopg.",
                              hint="pip install 'kafeed[postgres]'") from None
        try:
            return psycopg.connect(dsn, connect_timeout=10)
        except Exception as exc:
            raise ConfigError(f"Could not connect to {redact_dsn(dsn)}: {exc}.".replace("\n", " ")) from exc
    raise ConfigError(f"Unsupported DSN {redact_dsn(dsn)!r}.",
                      hint="Use sqlite:///path.db or postgresql://user@host/db.")


def execute(conn: Any, query: str, dsn: str) -> Any:
    """Run ``query``; bad SQL is one :class:`IngestError` sentence.

    PostgreSQL gets a named (server-side) cursor so rows stream instead of
    arriving all at once; sqlite3 cursors step lazily already.
    """
    try:
        cursor = conn.cursor() if isinstance(conn, sqlite3.Connection) else conn.cursor(name="kafeed_ingest")
        cursor.execute(query)
    except Exception as exc:
        raise IngestError(f"The query failed on {redact_dsn(dsn)}: {exc}.".replace("\n", " "),
                          hint="Check the --sql statement.") from exc
    if cursor.description is None:
        raise IngestError("The --sql statement returns no rows.", hint="Use a SELECT.")
    return cursor


def check(dsn: str, query: str) -> None:
    """Preflight: the DSN opens and the query runs (nothing is read yet)."""
    conn = connect(dsn)
    try:
        execute(conn, query, dsn)
    finally:
        conn.close()


def read_sql(dsn: str, query: str, start: Position, n: int) -> Iterator[Batch]:
    conn = connect(dsn)
    try:
        cursor = execute(conn, query, dsn)
        names = [d[0] for d in cursor.description]
        row_no = 0
        left = start.record
        while left > 0:
            chunk = cursor.fetchmany(min(left, n))
            if not chunk:
                return
            left -= len(chunk)
            row_no += len(chunk)
        while True:
            try:
                rows = cursor.fetchmany(n)
            except Exception as exc:
                raise IngestError(f"Reading rows from {redact_dsn(dsn)} failed: {exc}.") from exc
            if not rows:
                return
            items: list[Item] = []
            for row in rows:
                row_no += 1
                items.append(Item(row_no, dict(zip(names, row, strict=True)), None, None))
            yield items, Position(0, row_no)
    finally:
        conn.close()
