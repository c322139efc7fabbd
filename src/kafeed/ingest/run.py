"""``ingest()``: sources → ``TrainingSample`` records in a topic, exactly once, resumably.

Each transaction holds whole read batches: their records, their dead letters,
and one progress marker saying where the next batch starts. A run killed at
any point leaves either a committed transaction (its marker is the resume
point) or an open one, which the next run's ``init_transactions`` aborts. A stop
request (``stop_event``, or SIGINT/SIGTERM once :mod:`kafeed.signals` is installed)
ends the run at a batch boundary with a commit, as does a source that breaks mid-read.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafeed.config import ConnectionSettings
from kafeed.errors import IngestError
from kafeed.ingest import sql
from kafeed.ingest.batch_writer import BatchWriter
from kafeed.ingest.options import IngestOptions, IngestProgress, IngestSummary
from kafeed.ingest.preflight import prepare_topics
from kafeed.ingest.producer import TxnWriter
from kafeed.ingest.progress import JobProgress, job_id_for, read_latest
from kafeed.ingest.reading import ReadGate, SourceBatches
from kafeed.ingest.sources import Source, discover
from kafeed.ingest.transactions import Transactions

log = logging.getLogger("kafeed")

ProgressCallback = Callable[[IngestProgress], None]


@dataclass(frozen=True)
class _Target:
    """Where a run writes and how large a record may be there, fixed before reading starts."""

    topic: str
    dlq_topic: str
    max_message_bytes: int
    dlq_max_message_bytes: int


@dataclass(frozen=True)
class _Start:
    """How a run began, for its summary."""

    t0: float
    resumed: bool
    skipped: int


def ingest(
    sources: Sequence[str | Path], *, topic: str, settings: ConnectionSettings,
    options: IngestOptions | None = None, on_progress: ProgressCallback | None = None,
    stop_event: threading.Event | None = None,
) -> IngestSummary:
    """Ingest ``sources`` into ``topic``; see docs/ingest.md for guarantees and the marker format.

    When ``stop_event`` is set the run stops at the next batch boundary, commits what it
    read and returns a summary with ``stopped=True``; running the same call again resumes.
    """
    options = options or IngestOptions()
    stop_event = stop_event or threading.Event()
    t0 = time.monotonic()
    args = [str(s) for s in sources]
    srcs = discover(args, sql=options.sql, dsn=options.dsn)
    if options.sql and options.dsn:
        sql.check(options.dsn, options.sql)
    limit, dlq_limit = prepare_topics(settings, topic, timeout=options.preflight_timeout_s)
    job = job_id_for(topic, args, options)
    target = _Target(topic=topic, dlq_topic=f"{topic}.dlq", max_message_bytes=limit,
                     dlq_max_message_bytes=dlq_limit)
    writer = TxnWriter(settings, transactional_id=f"kafeed-ingest.{job}", topic=topic,
                       dlq_topic=target.dlq_topic, options=options, max_message_bytes=limit)
    try:
        writer.init()
        identities = [s.identity for s in srcs]
        progress = None if options.restart else read_latest(settings, job)
        resumed = progress is not None
        if progress is not None:
            progress.check_sources(identities)
            if progress.finished:
                log.info("job %s already finished; nothing to do", job)
                return _already_complete(progress, options, target, t0)
        else:
            progress = JobProgress(job=job, sources=identities)
        start = _Start(t0=t0, resumed=resumed, skipped=sum(progress.totals.values()))
        # Each read batch keeps ~10k fresh dicts and tuples alive, which makes the cyclic GC
        # rescan them over and over (~0.7 µs per record, measured). The hot path makes no
        # cycles, so the collector pauses for the run and a young-generation pass runs
        # at each commit instead.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return _run(writer, srcs, progress, options, target, start, on_progress=on_progress,
                        stop_event=stop_event)
        finally:
            if gc_was_enabled:
                gc.enable()
    finally:
        writer.close()


def _already_complete(progress: JobProgress, options: IngestOptions, target: _Target,
                      t0: float) -> IngestSummary:
    """The summary of a run that found its job finished: nothing read, everything skipped."""
    return IngestSummary(
        job_id=progress.job, topic=target.topic, dlq_topic=target.dlq_topic, format=options.format,
        records_in=0, produced=0, dead_lettered=0, dead_letter_kinds={}, per_partition={},
        bytes_serialized=0, bytes_compressed=None, seconds=time.monotonic() - t0, transactions=0,
        resumed=True, already_complete=True, skipped_committed=sum(progress.totals.values()),
        job_totals=dict(progress.totals))


def _run(
    writer: TxnWriter, srcs: list[Source], progress: JobProgress, options: IngestOptions, target: _Target,
    start: _Start, *, on_progress: ProgressCallback | None, stop_event: threading.Event,
) -> IngestSummary:
    """Read every source left into transactions; commit the last one and sum the run up."""
    t_loop = time.monotonic()
    txns = Transactions(writer, progress, options, target.topic)
    batch_writer = BatchWriter(writer, options, progress.job, max_message_bytes=target.max_message_bytes,
                               dlq_max_message_bytes=target.dlq_max_message_bytes)
    writer.begin()
    gate = ReadGate()
    reading = SourceBatches(srcs, progress, options, gate, stop_event)
    try:
        for index, src, items, pos in reading:
            batch_writer.write(src, items, txns.open)
            progress.index, progress.offset, progress.record = index, pos.offset, pos.record
            writer.poll()
            if txns.due():
                txns.commit()
                writer.begin()
            if on_progress is not None:
                on_progress(txns.figures(reading.bytes_read(src, pos), reading.total_bytes))
    except IngestError:
        # A source broke mid-read (a truncated archive): keep the whole batches read before it.
        txns.commit()
        raise
    finally:
        gate.close()
    txns.commit(finished=not reading.stopped)
    return _summary(writer, txns, options, target, start, t_loop=t_loop, stopped=reading.stopped)


def _summary(writer: TxnWriter, txns: Transactions, options: IngestOptions, target: _Target,
             start: _Start, *, t_loop: float, stopped: bool) -> IngestSummary:
    run, progress = txns.committed, txns.progress
    produce_seconds = time.monotonic() - t_loop
    per_partition, wire_bytes = writer.final_stats(run.produced)
    return IngestSummary(
        job_id=progress.job, topic=target.topic, dlq_topic=target.dlq_topic, format=options.format,
        records_in=run.records, produced=run.produced, dead_lettered=run.dead,
        dead_letter_kinds=dict(run.kinds), per_partition=per_partition, bytes_serialized=run.value_bytes,
        bytes_compressed=wire_bytes, seconds=time.monotonic() - start.t0, transactions=txns.count,
        resumed=start.resumed, already_complete=False, produce_seconds=produce_seconds,
        skipped_committed=start.skipped, job_totals=dict(progress.totals), stopped=stopped)
