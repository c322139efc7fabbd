"""Several `kafeed prepare` processes in one group: every surviving document exactly once."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

from kafeed.config import ConnectionSettings
from tests.prepare_support import (
    document_ids,
    high_watermarks,
    paragraphs,
    prepare_command,
    prepare_env,
    produce,
    read_topic,
    sample_record,
    watermark_consumer,
)


def test_two_processes_share_six_partitions(kafka: ConnectionSettings, make_topic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    raw = make_topic(partitions=6)
    good = paragraphs(1200)
    records = [sample_record(t) for t in good] + [sample_record(t) for t in good[::10]]
    produce(kafka, raw, records)
    output, group = f"{raw}.tokens", f"g-{raw}"
    cmd = prepare_command(kafka.bootstrap, raw, output, group, "--batch-size", "25",
                          "--until-caught-up", "--json")
    env = prepare_env(str(tmp_path))
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=240)
        assert p.returncode == 0, stderr
        results.append(json.loads(stdout))
    assert all(r["balanced"] for r in results)
    # Committed counts add up across workers: no record was processed twice or skipped.
    assert sum(r["records_in"] for r in results) == len(records)
    assert sum(r["duplicates"] for r in results) == 120
    ids = document_ids(read_topic(kafka, output))
    assert len(ids) == len(set(ids)) == 1200


def test_sigterm_finishes_the_open_transaction(kafka: ConnectionSettings, make_topic, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    raw = make_topic(partitions=2)
    good = paragraphs(3000)
    produce(kafka, raw, [sample_record(t) for t in good])
    output = f"{raw}.tokens"
    cmd = prepare_command(kafka.bootstrap, raw, output, f"g-{raw}", "--batch-size", "20", "--json")
    proc = subprocess.Popen(cmd, env=prepare_env(str(tmp_path)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    # Readiness: a committed batch on the output (the stop handler is installed before that),
    # asked of one client so that the stop follows at once, mid-run even on a fast machine.
    watch = watermark_consumer(kafka)
    try:
        while high_watermarks(kafka, output, watch) < 20:
            assert proc.poll() is None
            assert time.monotonic() < deadline, "prepare never committed a batch"
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)  # before the close: a consumer's close can take seconds
    finally:
        watch.close()
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143, stderr
    stats = json.loads(stdout)
    assert stats["balanced"] and 0 < stats["records_in"] < 3000
    # What it reported as committed is exactly what the output topic holds.
    ids = document_ids(read_topic(kafka, output))
    assert len(ids) == len(set(ids)) == stats["documents_out"]
