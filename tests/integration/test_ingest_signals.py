"""Stopping ingest: SIGINT → 130, SIGTERM → 143, committed work kept, a re-run completes exactly once.

Also: an interrupted compressed source resumes exactly, and a run whose records all (or
too many) went to the dead-letter topic exits 1 after its summary.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from kafeed.config import ConnectionSettings
from kafeed.ingest import IngestOptions, IngestProgress, ingest
from tests.integration.ingest_helpers import SRC, progress_end, read_all, run_cli, wait_for_marker
from tests.kafka_fixtures import TopicFactory

ENV = {**os.environ, "PYTHONPATH": str(SRC)}


def _lines(n: int, start: int = 0) -> bytes:
    return "".join(f'{{"id": "r{i}", "text": "small line {i}"}}\n' for i in range(start, start + n)).encode()


def _command(src: str, topic: str, kafka: ConnectionSettings, job: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "kafeed.cli.main", "ingest", src, "-t", topic, "-b", kafka.bootstrap,
            "--job-id", job, "--json", *extra]


def _assert_exactly_once(kafka: ConnectionSettings, topic: str, n: int) -> None:
    keys = [r.key for r in read_all(kafka, topic, timeout=90)]
    assert len(keys) == n
    assert set(keys) == {f"r{i}".encode() for i in range(n)}


@pytest.mark.parametrize(("sig", "code", "compressed"), [
    (signal.SIGINT, 130, False),
    (signal.SIGTERM, 143, True),
])
def test_signal_mid_run_exits_128_plus_signum_and_a_rerun_completes_exactly_once(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
        sig: signal.Signals, code: int, compressed: bool) -> None:
    topic = make_topic(partitions=3)
    n = 400_000
    src = tmp_path / ("big.jsonl.gz" if compressed else "big.jsonl")
    src.write_bytes(gzip.compress(_lines(n), compresslevel=1) if compressed else _lines(n))
    job = f"sig-{uuid.uuid4().hex[:8]}"
    args = _command(str(src), topic, kafka, job, "--commit-records", "2000")
    start = progress_end(kafka)
    proc = subprocess.Popen(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        marker = wait_for_marker(kafka, job, timeout=90, start=start)  # a first transaction is committed
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert marker is not None and not marker["finished"]
    assert proc.returncode == code, stderr.decode()
    message = " ".join(stderr.decode().split())
    assert f"Stopped by {sig.name}: the work committed so far is kept." in message
    assert "Re-run the same command" in message
    stopped = json.loads(stdout)
    assert stopped["stopped"] and 0 < stopped["produced"] < n

    rerun = subprocess.run(args, env=ENV, capture_output=True, timeout=240, check=False)
    assert rerun.returncode == 0, rerun.stderr.decode()
    summary = json.loads(rerun.stdout)
    assert summary["resumed"] and not summary["stopped"]
    assert summary["skipped_committed"] == stopped["produced"]
    assert summary["skipped_committed"] + summary["produced"] == n
    _assert_exactly_once(kafka, topic, n)


def test_sigint_interrupts_a_stdin_read_that_waits_for_input(kafka: ConnectionSettings,
                                                             make_topic: TopicFactory) -> None:
    topic = make_topic(partitions=1)
    job = f"stdin-{uuid.uuid4().hex[:8]}"
    args = _command("-", topic, kafka, job, "--commit-records", "1")
    start = progress_end(kafka)
    proc = subprocess.Popen(args, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        assert proc.stdin is not None
        proc.stdin.write(_lines(3))
        proc.stdin.flush()  # stdin stays open: ingest blocks reading line 4
        marker = wait_for_marker(kafka, job, timeout=60, min_record=3, start=start)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert marker is not None
    assert proc.returncode == 130, stderr.decode()
    assert json.loads(stdout)["stopped"]
    # The same stream piped again: the three committed lines are skipped, the rest added.
    rerun = subprocess.run(args, env=ENV, input=_lines(5), capture_output=True, timeout=120, check=False)
    assert rerun.returncode == 0, rerun.stderr.decode()
    assert json.loads(rerun.stdout)["produced"] == 2
    _assert_exactly_once(kafka, topic, 5)


@pytest.mark.parametrize("suffix", [".zst", ".xz"])
def test_stopped_compressed_ingest_resumes_exactly_once(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                        tmp_path: Path, suffix: str) -> None:
    import lzma

    import zstandard

    topic = make_topic(partitions=2)
    n = 30_000
    data = _lines(n)
    src = tmp_path / f"docs.jsonl{suffix}"
    src.write_bytes(zstandard.ZstdCompressor().compress(data) if suffix == ".zst" else lzma.compress(data))
    options = IngestOptions(job_id=f"z-{uuid.uuid4().hex[:8]}", read_batch=1000, commit_records=3000)
    stop = threading.Event()
    ticks: list[IngestProgress] = []

    def on_progress(p: IngestProgress) -> None:
        ticks.append(p)
        if p.records >= 7000:
            stop.set()

    first = ingest([src], topic=topic, settings=kafka, options=options, on_progress=on_progress,
                   stop_event=stop)
    assert first.stopped and first.records_in == 7000 == first.produced
    assert ticks[-1].total_bytes == src.stat().st_size
    assert 0 < ticks[0].bytes_read <= ticks[-1].bytes_read <= src.stat().st_size
    second = ingest([src], topic=topic, settings=kafka, options=options)
    assert second.resumed and not second.stopped
    assert (second.skipped_committed, second.produced) == (7000, n - 7000)
    _assert_exactly_once(kafka, topic, n)


def test_truncated_archive_is_one_sentence_and_keeps_what_was_committed(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    # Incompressible-ish text, so the cut falls after several read batches.
    body = "".join(f'{{"id": "r{i}", "text": "{uuid.uuid4().hex * 4}"}}\n' for i in range(40_000)).encode()
    packed = gzip.compress(body)
    src = tmp_path / "cut.jsonl.gz"
    src.write_bytes(packed[: len(packed) // 2])
    result = run_cli(str(src), "-t", topic, "-b", kafka.bootstrap, "--commit-records", "1000")
    assert result.returncode == 1
    err = " ".join(result.stderr.decode().split())
    assert "Traceback" not in err
    assert f"error: {src} is corrupt or truncated: its gzip stream breaks after" in err
    kept = read_all(kafka, topic)
    assert 0 < len(kept) < 40_000
    assert len({r.key for r in kept}) == len(kept)


def test_all_dead_lettered_fails_after_the_summary(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                   tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"body": "no text"}\n{broken\n')
    result = run_cli(str(bad), "-t", topic, "-b", kafka.bootstrap, "--json")
    assert result.returncode == 1
    assert json.loads(result.stdout)["dead_lettered"] == 2  # the summary came first
    err = " ".join(result.stderr.decode().split())
    assert f"error: ingest: every one of the 2 records read went to {topic}.dlq." in err
    assert len(read_all(kafka, f"{topic}.dlq")) == 2


def test_max_dlq_ratio(kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path) -> None:
    topic = make_topic(partitions=1)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_bytes(b'{"text": "good one"}\n{"text": "good two"}\n{broken\n')  # 1 of 3 bad
    ok = run_cli(str(mixed), "-t", topic, "-b", kafka.bootstrap, "--max-dlq-ratio", "0.5", "--restart")
    assert ok.returncode == 0, ok.stderr.decode()
    strict = run_cli(str(mixed), "-t", topic, "-b", kafka.bootstrap, "--max-dlq-ratio", "0.25", "--restart")
    assert strict.returncode == 1
    assert "1 of 3 records (33.3%) went to" in " ".join(strict.stderr.decode().split())
    assert "--max-dlq-ratio 0.25" in strict.stderr.decode()
    assert len(read_all(kafka, topic)) == 4  # both runs' good records stay committed
    bad_ratio = run_cli(str(mixed), "-t", topic, "-b", kafka.bootstrap, "--max-dlq-ratio", "1.5")
    assert bad_ratio.returncode == 2
    assert "max_dlq_ratio" in bad_ratio.stderr.decode()
