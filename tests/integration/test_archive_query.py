"""A table written by `kafeed archive` is read by DuckDB from its Parquet files: the same rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafeed.archive.sink import run_archive
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from tests.cli_support import usage_error
from tests.integration.archive_support import settings, table_rows
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory

COLUMNS = ("partition", "offset", "kind", "value")


def test_duckdb_reads_the_same_rows_as_pyiceberg(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                 tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kafeed.archive import CatalogSettings
    from kafeed.archive.query import query

    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 200, bad=[3])
    s = settings(topic, tmp_path)
    assert run_archive(s, kafka, until_caught_up=True).rows_written == 200
    produce_docs(kafka.bootstrap, topic, 40, first=200)
    assert run_archive(s, kafka, until_caught_up=True).rows_written == 40  # a second data file

    expected = sorted(tuple(r[c] for c in COLUMNS) for r in table_rows(tmp_path))
    got = query("arch.t", CatalogSettings(warehouse=tmp_path),
                "SELECT partition, \"offset\", kind, value FROM t ORDER BY partition, \"offset\"", limit=None)
    assert not got.more
    rows = sorted(tuple(r[c] for c in COLUMNS) for r in got.rows.to_pylist())
    assert len(rows) == 240 and rows == expected

    # The command line: the same engine, JSON out; a bad query is one sentence, exit 2.
    capsys.readouterr()
    assert main(["archive", "query", "SELECT kind, count(*) AS n FROM t GROUP BY kind ORDER BY kind",
                 "--table", "arch.t", "--warehouse", str(tmp_path), "--json"]) == 0
    counts = {r["kind"]: r["n"] for r in json.loads(capsys.readouterr().out)}
    assert sum(counts.values()) == 240 and counts.get("raw") == 1
    line = usage_error(["archive", "query", "SELECT nope FROM t", "--table", "arch.t",
                        "--warehouse", str(tmp_path)], capsys)
    assert "The query failed" in line
