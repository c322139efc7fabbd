"""An ingest run's transactions: the open one's counts, the committed ones', and when to commit.

A commit writes the progress marker with the job's totals including the open transaction;
only once the broker took it do its counts join the run's and the metrics.
"""

from __future__ import annotations

import gc
import time
from collections import Counter

from kafeed.ingest.options import IngestOptions, IngestProgress
from kafeed.ingest.producer import TxnWriter
from kafeed.ingest.progress import JobProgress
from kafeed.telemetry import metrics as m


class Tally:
    """Counts of the open transaction, folded into the run's totals on commit."""

    def __init__(self) -> None:
        self.records = 0
        self.produced = 0
        self.dead = 0
        self.value_bytes = 0
        self.kinds: Counter[str] = Counter()

    def fold(self, other: Tally) -> None:
        self.records += other.records
        self.produced += other.produced
        self.dead += other.dead
        self.value_bytes += other.value_bytes
        self.kinds.update(other.kinds)


class Transactions:
    """The open transaction's counts, the committed ones', and when the next commit is due.

    A commit writes the progress marker with the job's totals including the open transaction;
    only once the broker took it do its counts join the run's (and the metrics).
    """

    def __init__(self, writer: TxnWriter, progress: JobProgress, options: IngestOptions, topic: str) -> None:
        self.writer = writer
        self.progress = progress
        self.options = options
        self.topic = topic
        self.committed = Tally()
        self.open = Tally()
        self.count = 0
        self._opened = time.monotonic()

    def due(self) -> bool:
        return (self.open.records >= self.options.commit_records
                or (time.monotonic() - self._opened) * 1000 >= self.options.commit_interval_ms)

    def commit(self, *, finished: bool = False) -> None:
        progress, txn = self.progress, self.open
        before = progress.totals
        progress.finished = finished
        progress.totals = {"produced": before["produced"] + txn.produced,
                           "dead_lettered": before["dead_lettered"] + txn.dead}
        try:
            self.writer.commit(progress.job, progress.state_dict())
        except BaseException:
            progress.totals = before
            raise
        count_committed(txn, self.topic)
        self.committed.fold(txn)
        self.open = Tally()
        gc.collect(1)
        self.count += 1
        self._opened = time.monotonic()

    def figures(self, bytes_read: int, total_bytes: int | None) -> IngestProgress:
        run, txn = self.committed, self.open
        return IngestProgress(
            records=run.records + txn.records, produced=run.produced + txn.produced,
            dead_lettered=run.dead + txn.dead, bytes_read=bytes_read, total_bytes=total_bytes,
            value_bytes=run.value_bytes + txn.value_bytes)


def count_committed(txn: Tally, topic: str) -> None:
    """Metrics count a transaction once it commits, so they match what read_committed consumers see."""
    m.RECORDS_OUT.labels(stage="ingest", topic=topic).inc(txn.produced)
    m.BYTES_OUT.labels(stage="ingest", topic=topic).inc(txn.value_bytes)
    for kind, n in txn.kinds.items():
        m.DEAD_LETTERED.labels(stage="ingest", reason=kind).inc(n)
