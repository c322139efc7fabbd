"""The archive under faults: sinks SIGKILLed at random moments while records are produced,
and two sinks at once; the table must hold every record exactly once.

Sinks are forked from one helper process that imported pyiceberg once
(tests/integration/archive_forker.py), so a kill costs no interpreter start.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafeed.archive import CatalogSettings
from kafeed.archive.catalog import load_table, open_catalog
from kafeed.archive.sink import WRITER_PROPERTY, run_archive
from kafeed.config import ConnectionSettings
from kafeed.errors import ConfigError
from tests.integration.archive_support import settings, table_keys, topic_records
from tests.integration.loader_data import produce_docs
from tests.kafka_fixtures import TopicFactory

ROOT = Path(__file__).resolve().parents[2]
DEADLINE_S = 90


class Forker:
    """The helper process; :meth:`start` forks one sink and returns its pid."""

    def __init__(self, kafka: ConnectionSettings, log: Path) -> None:
        self.log = log
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.integration.archive_forker", kafka.bootstrap, "0.15"],
                cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def start(self, topic: str, warehouse: Path, instance: str = "sink-0", sizes: str = "") -> int:
        """A sink with static membership ``instance``: a restart with the same name takes the
        partitions back at once, without waiting for the killed one's session to time out.
        ``sizes``: ``"TARGET_BYTES FLUSH_S"`` instead of the defaults."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{instance} {topic} {warehouse} {sizes}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture(scope="module")
def forker(kafka: ConnectionSettings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forker]:
    made = Forker(kafka, tmp_path_factory.mktemp("sinks") / "sinks.log")
    yield made
    made.close()


class Snapshots:
    """The table's snapshot summaries, read through one catalog connection."""

    def __init__(self, warehouse: Path) -> None:
        self.catalog = open_catalog(CatalogSettings(warehouse=warehouse))
        self.table: Any = None

    def __call__(self) -> list[dict[str, str]]:
        if self.table is None:
            try:
                self.table = load_table(self.catalog, "arch.t")
            except ConfigError:  # not created yet
                return []
        self.table.refresh()
        return [dict(s.summary.model_dump()) for s in self.table.snapshots() if s.summary is not None]

    def files(self) -> set[str]:
        """Names of the data files the table's current snapshot references."""
        if not self():
            return set()
        return {Path(task.file.file_path).name for task in self.table.scan().plan_files()}


def data_files_on_disk(warehouse: Path) -> set[str]:
    return {path.name for path in warehouse.rglob("*.parquet")}


def _wait(condition, what: str, log: Path | None = None) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}" + (
            f"; the sinks said: {log.read_text()[-3000:]}" if log else "")
        time.sleep(0.1)


class Producing:
    """Documents produced in small chunks on a thread until stopped."""

    def __init__(self, kafka: ConnectionSettings, topic: str, chunk: int = 40) -> None:
        self.count = 0
        self._stop = threading.Event()

        def loop() -> None:
            # Paced: a few hundred records a second, so the table stays small.
            while not self._stop.wait(0.1):
                produce_docs(kafka.bootstrap, topic, chunk, first=self.count, seed=self.count)
                self.count += chunk

        self._thread = threading.Thread(target=loop, daemon=True)
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=60)
        return self.count


def _kill_run(kafka: ConnectionSettings, topic: str, tmp_path: Path, forker: Forker, kills: int,
              seed: int) -> None:
    rng = random.Random(seed)
    producing = Producing(kafka, topic)
    snapshots = Snapshots(tmp_path)
    for _ in range(kills):
        before = len(snapshots())
        pid = forker.start(topic, tmp_path)
        # A kill at a random moment after the sink has committed at least once: mid-batch,
        # mid-write of data files, or mid-commit.
        _wait(lambda: len(snapshots()) > before, "a commit by the new sink", forker.log)  # noqa: B023
        time.sleep(rng.uniform(0, 0.3))
        os.kill(pid, signal.SIGKILL)
    _finish_exactly_once(kafka, topic, tmp_path, producing.stop())


def _finish_exactly_once(kafka: ConnectionSettings, topic: str, tmp_path: Path, produced: int) -> None:
    """Run a last sink to the end; then every produced record is in the table once."""
    # The last sink takes the killed one's place in the group (same static member name), as
    # an operator's restart would; a new name would wait for the dead member's session to end.
    final = run_archive(settings(topic, tmp_path, instance="sink-0"), kafka, until_caught_up=True)
    held = topic_records(kafka, topic)
    keys = table_keys(tmp_path)
    assert len(held) == produced
    assert len(keys) == len(set(keys)), "a record was archived twice"
    assert set(keys) == set(held), "a record was lost"
    assert final.rows_written < produced  # the killed sinks did most of the work


def test_sigkilled_sink_loses_and_repeats_nothing(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                  tmp_path: Path, forker: Forker) -> None:
    _kill_run(kafka, make_topic(partitions=3), tmp_path, forker, kills=5, seed=12)


def test_sink_killed_while_data_files_wait_for_their_commit(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path, forker: Forker) -> None:
    # Commits of 8 KiB of values, so a chunk's data file (a quarter of that) is written on the helper
    # thread every few dozen records and waits there for the commit: each kill lands after a file of
    # the new sink appeared on disk that no snapshot references.
    topic = make_topic(partitions=3)
    producing = Producing(kafka, topic)
    snapshots = Snapshots(tmp_path)
    for _ in range(3):
        before = len(snapshots())
        pid = forker.start(topic, tmp_path, sizes="8192 30")
        _wait(lambda: len(snapshots()) > before, "a commit by the new sink", forker.log)  # noqa: B023
        ahead = data_files_on_disk(tmp_path) - snapshots.files()

        def written_ahead() -> bool:
            on_disk = data_files_on_disk(tmp_path)  # listed first: a file committed meanwhile is not ahead
            return bool(on_disk - snapshots.files() - ahead)  # noqa: B023

        _wait(written_ahead, "a data file written ahead of its commit", forker.log)
        os.kill(pid, signal.SIGKILL)
    _finish_exactly_once(kafka, topic, tmp_path, producing.stop())
    # Files some kill left uncommitted: the kills did land between a file's write and its commit.
    assert data_files_on_disk(tmp_path) - snapshots.files()


@pytest.mark.slow
def test_sigkilled_sink_many_times(kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
                                   forker: Forker) -> None:
    _kill_run(kafka, make_topic(partitions=4), tmp_path, forker, kills=25, seed=1212)


def test_two_sinks_in_one_group(kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
                                forker: Forker) -> None:
    topic = make_topic(partitions=4)
    producing = Producing(kafka, topic)
    pids = [forker.start(topic, tmp_path, "sink-a"), forker.start(topic, tmp_path, "sink-b")]
    snapshots = Snapshots(tmp_path)
    _wait(lambda: len({s.get(WRITER_PROPERTY) for s in snapshots()} - {None}) >= 2,
          "commits from both sinks", forker.log)
    produced = producing.stop()
    _wait(lambda: len(table_keys(tmp_path)) >= produced, "every record in the table")
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    keys = table_keys(tmp_path)
    assert len(keys) == len(set(keys)) == produced
    assert set(keys) == set(topic_records(kafka, topic))


def test_two_sinks_racing_for_the_same_partitions(kafka: ConnectionSettings, make_topic: TopicFactory,
                                                  tmp_path: Path) -> None:
    # Different groups: both sinks own every partition, so nearly every commit races the other's.
    topic = make_topic(partitions=2)
    produce_docs(kafka.bootstrap, topic, 600)
    results = []

    def one(group: str) -> None:
        results.append(run_archive(settings(topic, tmp_path, group=group, flush_interval_s=0.05), kafka,
                                   until_caught_up=True))

    threads = [threading.Thread(target=one, args=(g,)) for g in ("race-a", "race-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=DEADLINE_S)
    keys = table_keys(tmp_path)
    assert len(keys) == len(set(keys)) == 600
    assert sum(r.rows_written for r in results) == 600
    assert sum(r.already_archived for r in results) > 0 or sum(r.lost_races for r in results) > 0
