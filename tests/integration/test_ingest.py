from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError, IngestError, TopicError
from kafeed.ingest import IngestOptions, IngestProgress, content_id, ingest
from kafeed.schema import decode_raw
from tests.integration.ingest_helpers import read_all, run_cli
from tests.kafka_fixtures import TopicFactory


def _jsonl(path: Path, n: int, start: int = 0) -> Path:
    path.write_text("".join(json.dumps({"id": f"j{i}", "text": f"doc {i}", "y": i % 2}) + "\n"
                            for i in range(start, start + n)))
    return path


def test_jsonl_round_trip_exact_ids_keys_and_lineage(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                     tmp_path: Path) -> None:
    topic = make_topic(partitions=3)
    src = _jsonl(tmp_path / "a.jsonl", 500)
    ticks: list[IngestProgress] = []
    summary = ingest([src], topic=topic, settings=kafka,
                     options=IngestOptions(label_field="y", meta_fields=("y",), commit_records=128),
                     on_progress=ticks.append)
    assert ticks[-1].records == 500 and ticks[-1].bytes_read == ticks[-1].total_bytes == src.stat().st_size
    assert (summary.records_in, summary.produced, summary.dead_lettered) == (500, 500, 0)
    assert summary.transactions >= 4 and sum(summary.per_partition.values()) == 500
    recs = read_all(kafka, topic)
    assert sorted(r.key for r in recs if r.key) == sorted(f"j{i}".encode() for i in range(500))
    by_partition = {r.partition for r in recs}
    assert summary.per_partition == {p: sum(r.partition == p for r in recs) for p in by_partition}
    s = decode_raw(next(r.value for r in recs if r.key == b"j7"), [])
    assert (s.id, s.input_data, list(s.target_values)) == ("j7", b"doc 7", [1.0])
    assert s.metadata["kafeed.line"] == "8" and s.source == s.metadata["kafeed.source"] == str(src)
    assert s.metadata["y"] == "1"
    assert summary.bytes_serialized > 0 and summary.bytes_compressed is not None

    again = ingest([src], topic=topic, settings=kafka,
                   options=IngestOptions(label_field="y", meta_fields=("y",)))
    assert again.already_complete and again.produced == 0 and again.job_totals["produced"] == 500
    assert len(read_all(kafka, topic)) == 500


def test_same_id_lands_in_one_partition(kafka: ConnectionSettings, make_topic: TopicFactory,
                                        tmp_path: Path) -> None:
    topic = make_topic(partitions=4)
    src = tmp_path / "dup.jsonl"
    src.write_text("".join(json.dumps({"id": f"k{i % 10}", "text": f"v{i}"}) + "\n" for i in range(200)))
    ingest([src], topic=topic, settings=kafka)
    parts: dict[bytes, set[int]] = {}
    for r in read_all(kafka, topic):
        parts.setdefault(r.key or b"", set()).add(r.partition)
    assert len(parts) == 10 and all(len(p) == 1 for p in parts.values())


def test_csv_parquet_txt_dir_and_avro(kafka: ConnectionSettings, make_topic: TopicFactory,
                                      tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    d = tmp_path / "corpus"
    d.mkdir()
    (d / "a.csv").write_text("id,text,score\n" + "".join(f"c{i},csv row {i},{i}\n" for i in range(30)))
    pq.write_table(pa.table({"id": [f"p{i}" for i in range(40)], "text": [f"pq {i}" for i in range(40)],
                             "score": [float(i) for i in range(40)]}), d / "b.parquet", row_group_size=16)
    (d / "c.txt").write_text("para one\nstill one\n\npara two\n\n\npara three\n")
    summary = ingest([d], topic=topic, settings=kafka,
                     options=IngestOptions(text_mode="paragraph", label_field=None, format="avro",
                                           meta_fields=("score",), read_batch=7))
    assert (summary.produced, summary.dead_lettered) == (30 + 40 + 3, 0)
    recs = read_all(kafka, topic)
    samples = [decode_raw(r.value, list(r.headers.items())) for r in recs]
    assert all(r.headers["kafeed.format"] == b"avro" for r in recs)
    ids = {s.id for s in samples}
    texts = {"para one\nstill one", "para two", "para three"}
    assert ids == {f"c{i}" for i in range(30)} | {f"p{i}" for i in range(40)} | {content_id(t) for t in texts}
    rows = {s.id: s for s in samples}
    assert rows["c4"].metadata["kafeed.row"] == "5" and rows["c4"].metadata["score"] == "4"
    assert rows["p39"].metadata["kafeed.row"] == "40" and rows["p39"].input_data == b"pq 39"
    assert rows[content_id("para two")].metadata["kafeed.line"] == "4"


@pytest.mark.parametrize("mode", ["line", "file"])
def test_text_modes_into_topic(kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
                               mode: str) -> None:
    topic = make_topic(partitions=2)
    lines = [f"Line {i}: to be or not to be." if i % 9 else "" for i in range(400)]
    src = tmp_path / "s.txt"
    src.write_text("\n".join(lines) + "\n")
    summary = ingest([src], topic=topic, settings=kafka, options=IngestOptions(text_mode=mode))
    expected = [ln for ln in lines if ln.strip()] if mode == "line" else ["\n".join(lines) + "\n"]
    assert summary.produced == len(expected)
    keys = sorted(r.key or b"" for r in read_all(kafka, topic))
    assert keys == sorted(content_id(t).encode() for t in expected)


def test_sqlite_source(kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    db = tmp_path / "f.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE docs (doc_id TEXT, body TEXT, label REAL)")
    con.executemany("INSERT INTO docs VALUES (?,?,?)", [(f"q{i}", f"row {i}", i / 4) for i in range(60)]
                    + [("bad", None, 1.0)])
    con.commit()
    con.close()
    opts = IngestOptions(sql="SELECT doc_id, body, label FROM docs ORDER BY rowid", dsn=f"sqlite:///{db}",
                         text_field="body", id_field="doc_id", label_field="label", read_batch=25)
    summary = ingest([], topic=topic, settings=kafka, options=opts)
    assert (summary.produced, summary.dead_lettered, summary.dead_letter_kinds) == (60, 1, {"null_text": 1})
    recs = read_all(kafka, topic)
    assert sorted(r.key or b"" for r in recs) == sorted(f"q{i}".encode() for i in range(60))
    dlq = read_all(kafka, f"{topic}.dlq")
    assert dlq[0].headers["kafeed.row"] == b"61" and json.loads(dlq[0].value or b"")["doc_id"] == "bad"


def test_stdin_via_cli_json_summary(kafka: ConnectionSettings, make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    data = "".join(json.dumps({"text": f"line {i}"}) + "\n" for i in range(50)).encode()
    proc = run_cli("-", "-t", topic, "-b", kafka.bootstrap, "--json", stdin=data)
    assert proc.returncode == 0, proc.stderr.decode()
    summary = json.loads(proc.stdout)
    assert summary["produced"] == 50 and summary["per_partition"] == {"0": 50}
    assert summary["bytes_compressed"] is not None and summary["bytes_serialized"] > 0
    assert sorted(r.key or b"" for r in read_all(kafka, topic)) == sorted(
        content_id(f"line {i}").encode() for i in range(50))
    text = run_cli("-", "-t", topic, "-b", kafka.bootstrap, "--stdin-format", "text", "--json",
                   "--job-id", "stdin-text", stdin=b"alpha\n\nbeta\n")
    assert json.loads(text.stdout)["produced"] == 2


def test_restart_ingests_again(kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    src = _jsonl(tmp_path / "r.jsonl", 20)
    ingest([src], topic=topic, settings=kafka)
    again = ingest([src], topic=topic, settings=kafka, options=IngestOptions(restart=True))
    assert again.produced == 20 and not again.already_complete
    assert len(read_all(kafka, topic)) == 40


def test_changed_source_refuses_to_resume(kafka: ConnectionSettings, make_topic: TopicFactory,
                                          tmp_path: Path) -> None:
    from kafeed.errors import ResumeMismatch

    topic = make_topic(partitions=1)
    src = _jsonl(tmp_path / "c.jsonl", 20)
    ingest([src], topic=topic, settings=kafka)
    _jsonl(src, 25)
    with pytest.raises(ResumeMismatch, match="changed"):
        ingest([src], topic=topic, settings=kafka)


def test_fatal_errors_write_nothing(kafka: ConnectionSettings, make_topic: TopicFactory,
                                    tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    with pytest.raises(ConfigError, match="does not exist"):
        ingest([tmp_path / "missing.jsonl"], topic=topic, settings=kafka)
    db = tmp_path / "e.db"
    sqlite3.connect(db).close()
    with pytest.raises(IngestError, match="query failed"):
        ingest([], topic=topic, settings=kafka, options=IngestOptions(sql="SELEC nope", dsn=f"sqlite:///{db}"))
    with pytest.raises(TopicError, match="does not exist"):
        ingest([_jsonl(tmp_path / "x.jsonl", 3)], topic="no-such-topic-here", settings=kafka)
    assert read_all(kafka, topic) == []


def test_cli_missing_file_and_bad_sql_are_one_sentence(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                       tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    proc = run_cli(str(tmp_path / "nope.jsonl"), "-t", topic, "-b", kafka.bootstrap)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "nope.jsonl does not exist" in err and "Traceback" not in err
    proc = run_cli("--sql", "SELECT x FROM y", "--dsn", f"sqlite:///{tmp_path}/none.db", "-t", topic,
                   "-b", kafka.bootstrap)
    assert proc.returncode != 0 and "does not exist" in proc.stderr.decode()
    assert read_all(kafka, topic) == []


def test_cli_unreachable_broker_fails_fast(tmp_path: Path) -> None:
    import time

    from kafeed.broker import free_port_block

    src = _jsonl(tmp_path / "u.jsonl", 3)
    t0 = time.monotonic()
    proc = run_cli(str(src), "-t", "raw", "-b", f"127.0.0.1:{free_port_block(1)}")
    elapsed = time.monotonic() - t0
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "no Kafka broker answered" in err and "Traceback" not in err
    assert elapsed < 20, elapsed
