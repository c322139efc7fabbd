"""The archive sink on the real broker and a local SQLite catalog: exactly once, resumable."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from pyiceberg.types import StringType

from kafeed.archive import CatalogSettings
from kafeed.archive.catalog import load_table, open_catalog
from kafeed.archive.compact import compact
from kafeed.archive.rows import record_value
from kafeed.archive.schema import PROP_CLUSTER
from kafeed.archive.sink import run_archive
from kafeed.archive.status import archive_status
from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from tests.cli_support import usage_error
from tests.integration.archive_support import settings, table_keys, table_rows, topic_records
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory


def cluster_of(kafka: ConnectionSettings) -> str:
    return str(KafkaClients(kafka).admin().list_topics(timeout=10).cluster_id)


def test_archive_round_trip_and_resume(kafka: ConnectionSettings, make_topic: TopicFactory,
                                       tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 300, bad=[5, 17])
    s = settings(topic, tmp_path)
    first = run_archive(s, kafka, until_caught_up=True)
    assert first.rows_written == 300
    held = topic_records(kafka, topic)
    rows = table_rows(tmp_path)
    assert sorted((r["partition"], r["offset"]) for r in rows) == sorted(held)
    # Every row gives back the exact bytes that were consumed; the two bad ones are kept raw.
    assert all(record_value(r) == held[(r["partition"], r["offset"])] for r in rows)
    assert sum(r["kind"] == "raw" for r in rows) == 2
    # A second run (the command line) starts from the table's positions: nothing again...
    capsys.readouterr()
    assert main(["archive", "--topic", topic, "--table", "arch.t", "--warehouse", str(tmp_path),
                 "-b", kafka.bootstrap, "--until-caught-up", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows_written"] == 0 and report["positions"] == {"0": first.positions[0],
                                                                   "1": first.positions[1]}
    # ... then only what is new.
    produce_docs(kafka.bootstrap, topic, 50, first=300)
    again = run_archive(s, kafka, until_caught_up=True)
    assert again.rows_written == 50
    keys = table_keys(tmp_path)
    assert len(keys) == len(set(keys)) == 350
    # Status: the table's side next to the topic's; every partition archived to its end.
    status = archive_status("arch.t", CatalogSettings(warehouse=tmp_path), kafka)
    assert status.rows == 350 and sum(p.rows for p in status.partitions) == 350
    assert all(p.archived_up_to == p.high_watermark and p.lag == 0 for p in status.partitions)
    assert status.files >= 2  # the first run and the third wrote one file each
    # Compaction: one file per day, the same rows, and the positions survive it.
    result = compact("arch.t", CatalogSettings(warehouse=tmp_path))
    assert result.files_after < result.files_before and result.rows == 350
    assert sorted(table_keys(tmp_path)) == sorted(keys)
    assert run_archive(s, kafka, until_caught_up=True).rows_written == 0
    # Replay into a new topic: the same bytes at the same partitions and offsets.
    target = make_topic(partitions=2)
    assert main(["replay", "--table", "arch.t", "--warehouse", str(tmp_path), "--topic", target,
                 "-b", kafka.bootstrap]) == 0
    assert topic_records(kafka, target) == topic_records(kafka, topic)


def test_bad_tables_and_catalogs_are_one_sentence(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                  tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    topic, other = make_topic(), make_topic()
    produce_docs(kafka.bootstrap, topic, 20)
    run_archive(settings(topic, tmp_path), kafka, until_caught_up=True)
    catalog = open_catalog(CatalogSettings(warehouse=tmp_path))
    base = ["archive", "--table", "arch.t", "--warehouse", str(tmp_path), "-b", kafka.bootstrap,
            "--until-caught-up"]

    def snapshots() -> int:
        return len(load_table(catalog, "arch.t").snapshots())

    before = snapshots()
    assert "archives topic" in usage_error([*base, "--topic", other], capsys)
    assert "holds tokens records" in usage_error([*base, "--topic", topic, "--kind", "samples"], capsys)
    table = load_table(catalog, "arch.t")
    with table.transaction() as tx:  # as if the table had been made on another cluster
        tx.set_properties({PROP_CLUSTER: "another-cluster"})
    assert "of Kafka cluster 'another-cluster'" in usage_error([*base, "--topic", topic], capsys)
    with table.transaction() as tx:
        tx.set_properties({PROP_CLUSTER: cluster_of(kafka)})
    with table.update_schema() as update:
        update.add_column("extra", StringType())
    assert "schema" in usage_error([*base, "--topic", topic], capsys)
    assert snapshots() == before, "a refused run wrote something"
    # A warehouse that cannot be written (a path below a regular file: root ignores modes).
    (tmp_path / "a file").write_text("x")
    bad_wh = ["archive", "--table", "x.t", "--warehouse", str(tmp_path / "a file" / "wh"),
              "-b", kafka.bootstrap, "--topic", topic]
    assert "--warehouse" in (line := usage_error(bad_wh, capsys)) and "cannot be created" in line
    # A catalog that does not answer: a runtime failure (exit 1), still one sentence.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("PYICEBERG_CATALOG__GONE__TYPE", "rest")
    monkeypatch.setenv("PYICEBERG_CATALOG__GONE__URI", f"http://127.0.0.1:{port}")
    rc = main(["archive", "--table", "x.t", "--catalog", "gone", "-b", kafka.bootstrap, "--topic", topic])
    err = capsys.readouterr().err
    assert rc == 1 and "Could not open the Iceberg catalog 'gone'" in err and "Traceback" not in err
