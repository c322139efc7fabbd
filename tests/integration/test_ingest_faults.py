"""Bad input goes to the DLQ with reasons and counts balance; a SIGKILLed ingest resumes exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from kafeed.config import ConnectionSettings
from kafeed.ingest import IngestOptions, ingest
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.ingest_helpers import SRC, progress_end, read_all, wait_for_marker
from tests.kafka_fixtures import TopicFactory

BAD_JSONL: list[tuple[bytes, str]] = [
    (b'{"id": "b1", "text": broken}\n', "bad_json"),
    (b'\xef\xbb\xbf{"id": "b2", "text": "bom mid-file"}\n', "bad_json"),
    (b'{"id": "b3", "text": "caf\xe9 latin-1"}\n', "invalid_utf8"),
    (b'{"id": "b4", "body": "no text field"}\n', "missing_text"),
    (b'{"id": "b5", "text": 12345}\n', "text_not_string"),
    (b'{"id": "b6", "text": null}\n', "null_text"),
    (b'{"id": "b7", "text": ""}\n', "empty_text"),
    (b'{"id": "b8", "text": "   \\t  "}\n', "empty_text"),
    (b'{"id": "b9", "text": "ok", "y": "high"}\n', "bad_label"),
    (b'{"id": "b10", "text": "ok", "y": NaN}\n', "bad_label"),
    (b'{"id": "b11", "text": "ok", "y": -Infinity}\n', "bad_label"),
    (b'{"id": "b12", "text": "ok"}\n', "missing_label"),
    (b'["an", "array"]\n', "not_object"),
    (b'{"id": {"nested": 1}, "text": "ok", "y": 1}\n', "bad_id"),
    (b'{"id": "b15", "text": "nul\\u0000byte", "y": 1}\n', "binary_content"),
    (b'{"id": "b16", "text": "' + b"x" * 300_000 + b'", "y": 1}\n', "oversize"),
]


def _good(i: int) -> bytes:
    return json.dumps({"id": f"g{i}", "text": f"good {i}", "y": i}).encode() + b"\n"


def _set_max_message_bytes(kafka: ConnectionSettings, limits: dict[str, int]) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

    client = AdminClient({"bootstrap.servers": kafka.bootstrap})
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=[
        ConfigEntry("max.message.bytes", str(limit), incremental_operation=AlterConfigOpType.SET)])
        for name, limit in limits.items()]
    for future in client.incremental_alter_configs(resources).values():
        future.result(timeout=15)


def test_malformed_corpus_goes_to_dlq_and_counts_balance(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                         admin: TopicAdmin, tmp_path: Path) -> None:
    topic = make_topic(partitions=2)
    # Small size limits, so that "oversize" and DLQ truncation are cheap to provoke.
    admin.create(plan_topic(f"{topic}.dlq", brokers=1, partitions=1))
    _set_max_message_bytes(kafka, {topic: 200_000, f"{topic}.dlq": 100_000})
    d = tmp_path / "bad"
    d.mkdir()
    body = b"".join(_good(i) + bad for i, (bad, _) in enumerate(BAD_JSONL))
    (d / "a.jsonl").write_bytes(body + _good(99) + b'{"id": "b17", "text": "truncat')  # no newline
    (d / "b.csv").write_bytes(b"id,text,y\nc1,fine,1\nc2,too,many,cols\nc3,\"bad\"quote,1\n"
                              b"c4,caf\xe9,1\nc5,\"multi\nline\",2\nc6,short\n")
    (d / "c.csv").write_bytes(b"id,text,text,y\nd1,a,b,1\n")
    no_text = pa.table({"id": ["p1", "p2"], "body": ["no", "text column"], "y": [1, 2]})
    pq.write_table(no_text, d / "d.parquet")
    (d / "e.parquet").write_bytes(b"PAR1 this is not really parquet")
    (d / "f.txt").write_bytes(b"a fine line\n\x89PNG\r\n\x1a\n\x00\x00\xff\xfe garbage\n")
    expected_kinds = Counter(kind for _, kind in BAD_JSONL)
    expected_kinds.update({"bad_json": 1, "csv_columns": 2, "csv_syntax": 1, "invalid_utf8": 3,
                           "duplicate_header": 1, "missing_text": 2, "unreadable_file": 1,
                           "missing_label": 1, "binary_content": 1})
    summary = ingest([d], topic=topic, settings=kafka, options=IngestOptions(label_field="y"))

    good_ids = {f"g{i}" for i in range(len(BAD_JSONL))} | {"g99", "c1", "c5"}
    assert summary.records_in == summary.produced + summary.dead_lettered
    assert summary.dead_letter_kinds == dict(expected_kinds)
    assert len(expected_kinds) >= 15
    assert summary.produced == len(good_ids)
    recs = read_all(kafka, topic)
    assert {(r.key or b"").decode() for r in recs} >= good_ids and len(recs) == summary.produced
    dlq = read_all(kafka, f"{topic}.dlq")
    assert len(dlq) == summary.dead_lettered
    assert Counter(r.headers["kafeed.error.kind"].decode() for r in dlq) == expected_kinds
    for r in dlq:
        assert r.headers["kafeed.error.reason"] and r.headers["kafeed.source"]
        assert "kafeed.line" in r.headers or "kafeed.row" in r.headers
    oversize = next(r for r in dlq if r.headers["kafeed.error.kind"] == b"oversize")
    assert int(oversize.headers["kafeed.error.truncated"]) > len(oversize.value or b"")
    bad_utf8 = next(r for r in dlq if r.headers["kafeed.source"].endswith(b"a.jsonl")
                    and r.headers["kafeed.error.kind"] == b"invalid_utf8")
    assert bad_utf8.value == BAD_JSONL[2][0]  # the raw bytes, untouched
    assert bad_utf8.headers["kafeed.line"] == b"6"


def test_sigkill_mid_run_then_rerun_is_exactly_once(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                    tmp_path: Path) -> None:
    topic = make_topic(partitions=3)
    # Enough that the kill lands mid-run: a fast machine ingested 100,000 lines before the
    # first marker was seen.
    n = 400_000
    src = tmp_path / "big.jsonl"
    src.write_text("".join(f'{{"id": "r{i}", "text": "small line {i}"}}\n' for i in range(n)))
    job = f"kill-{uuid.uuid4().hex[:8]}"
    args = [sys.executable, "-m", "kafeed.cli.main", "ingest", str(src), "-t", topic, "-b", kafka.bootstrap,
            "--job-id", job, "--commit-records", "4000", "--json"]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    start = progress_end(kafka)
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        marker = wait_for_marker(kafka, job, timeout=60, start=start)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert marker is not None and not marker["finished"]
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"

    rerun = subprocess.run(args, env=env, capture_output=True, timeout=180, check=False)
    assert rerun.returncode == 0, rerun.stderr.decode()
    summary = json.loads(rerun.stdout)
    assert summary["resumed"] and 0 < summary["skipped_committed"] < n
    assert summary["skipped_committed"] + summary["produced"] == n
    recs = read_all(kafka, topic, timeout=60)
    keys = [r.key for r in recs]
    assert len(keys) == n
    assert set(keys) == {f"r{i}".encode() for i in range(n)}
