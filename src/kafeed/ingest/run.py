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
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafeed.config import ConnectionSettings
from kafeed.errors import IngestError
from kafeed.ingest import readers, sql
from kafeed.ingest.batches import Batch, Item, Position, raw_bytes
from kafeed.ingest.mapping import Mapped, Mapper, Rejected
from kafeed.ingest.options import IngestOptions, IngestProgress, IngestSummary
from kafeed.ingest.preflight import prepare_topics
from kafeed.ingest.producer import TxnWriter
from kafeed.ingest.progress import JobProgress, job_id_for, read_latest
from kafeed.ingest.sources import Source, discover
from kafeed.kafka import dead_letter_headers, fit_value
from kafeed.schema.avro import format_headers
from kafeed.signals import stop_request
from kafeed.telemetry import metrics as m

log = logging.getLogger("kafeed")

ProgressCallback = Callable[[IngestProgress], None]
_ROW_KINDS = ("csv", "parquet", "sql")
_NO_FIELDS = Rejected("unknown", "no fields")


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


class _Tally:
    """Counts of the open transaction, folded into the run's totals on commit."""

    def __init__(self) -> None:
        self.records = 0
        self.produced = 0
        self.dead = 0
        self.value_bytes = 0
        self.kinds: Counter[str] = Counter()

    def fold(self, other: _Tally) -> None:
        self.records += other.records
        self.produced += other.produced
        self.dead += other.dead
        self.value_bytes += other.value_bytes
        self.kinds.update(other.kinds)


class _Interrupted(BaseException):
    """A stop signal arrived while the reader was blocked waiting for input.

    A BaseException, like KeyboardInterrupt, so a reader's ``except Exception``
    (a database driver's errors) does not turn it into a read failure.
    """


class _ReadGate:
    """Lets a SIGINT/SIGTERM interrupt a read that blocks (stdin waiting for input).

    A blocked ``read`` is retried after a signal (PEP 475), so a stop request alone
    would wait for the next line. While :meth:`next` reads, the process's stop
    handler raises :class:`_Interrupted` instead. Only the read is interrupted: the
    batch it was assembling was never produced and the progress marker still points
    before it, so committing the open transaction then is exact.
    """

    def __init__(self) -> None:
        self._open = False
        self._remove = stop_request().on_signal(self._on_signal)

    def _on_signal(self, signum: int) -> None:
        if self._open:
            self._open = False
            raise _Interrupted(signum)

    def next(self, batches: Iterator[Batch]) -> Batch | None:
        """The next batch, None at the end; :class:`_Interrupted` when a signal cut the read short.

        Only a read on the main thread opens the gate: the handler raises in the main
        thread, so a run on another thread (a task worker's) stops at ``stop_event`` instead.
        """
        self._open = threading.current_thread() is threading.main_thread()
        try:
            return next(batches, None)
        finally:
            self._open = False

    def close(self) -> None:
        self._open = False
        self._remove()


def _where_key(source: Source) -> str:
    """The metadata key (and dead-letter header) naming a record's place in its source."""
    return "kafeed.row" if source.kind in _ROW_KINDS else "kafeed.line"


def _dlq_headers(rejected: Rejected, source: Source, where: int, job: str) -> list[tuple[str, bytes]]:
    return dead_letter_headers(kind=rejected.kind, reason=rejected.reason, stage="ingest", extra=[
        ("kafeed.source", source.name.encode("utf-8", "replace")),
        (_where_key(source), str(where).encode()), ("kafeed.job", job.encode())])


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
    txns = _Transactions(writer, progress, options, target.topic)
    batch_writer = _BatchWriter(writer, options, target, progress.job)
    writer.begin()
    gate = _ReadGate()
    reading = _SourceBatches(srcs, progress, options, gate, stop_event)
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


class _Transactions:
    """The open transaction's counts, the committed ones', and when the next commit is due.

    A commit writes the progress marker with the job's totals including the open transaction;
    only once the broker took it do its counts join the run's (and the metrics).
    """

    def __init__(self, writer: TxnWriter, progress: JobProgress, options: IngestOptions, topic: str) -> None:
        self.writer = writer
        self.progress = progress
        self.options = options
        self.topic = topic
        self.committed = _Tally()
        self.open = _Tally()
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
        _count_committed(txn, self.topic)
        self.committed.fold(txn)
        self.open = _Tally()
        gc.collect(1)
        self.count += 1
        self._opened = time.monotonic()

    def figures(self, bytes_read: int, total_bytes: int | None) -> IngestProgress:
        run, txn = self.committed, self.open
        return IngestProgress(
            records=run.records + txn.records, produced=run.produced + txn.produced,
            dead_lettered=run.dead + txn.dead, bytes_read=bytes_read, total_bytes=total_bytes,
            value_bytes=run.value_bytes + txn.value_bytes)


class _SourceBatches:
    """The read batches of every source left, from the job's resume point on.

    Iterating yields ``(source index, source, items, position)``; the caller moves the job's
    position past a batch once it wrote it. A source read to its end moves it to the next
    source. A stop request (``stop_event`` or a signal during a read) ends the iteration
    early with ``stopped`` set.
    """

    def __init__(self, srcs: list[Source], progress: JobProgress, options: IngestOptions,
                 gate: _ReadGate, stop_event: threading.Event) -> None:
        self.srcs = srcs
        self.progress = progress
        self.options = options
        self.gate = gate
        self.stop_event = stop_event
        self.stopped = False
        self.total_bytes = None if any(s.size is None for s in srcs) else sum(s.size or 0 for s in srcs)
        self._done_bytes = sum(s.size or 0 for s in srcs[:progress.index])

    def __iter__(self) -> Iterator[tuple[int, Source, list[Item], Position]]:
        progress = self.progress
        for index in range(progress.index, len(self.srcs)):
            src = self.srcs[index]
            start = Position(progress.offset, progress.record) if index == progress.index else Position()
            for items, pos in self._batches(src, start):
                yield index, src, items, pos
            if self.stopped:
                return
            self._done_bytes += src.size or 0
            progress.index, progress.offset, progress.record = index + 1, 0, 0

    def _batches(self, src: Source, start: Position) -> Iterator[Batch]:
        batches = readers.read_source(src, self.options, start)
        while not self.stop_event.is_set():
            try:
                batch = self.gate.next(batches)
            except _Interrupted:
                break
            except OSError as exc:
                raise IngestError(f"Reading {src.name} failed: {exc}.",
                                  hint="Fix the source and re-run the same command: it resumes.") from exc
            if batch is None:
                return
            yield batch
        self.stopped = True

    def bytes_read(self, src: Source, pos: Position) -> int:
        """Source bytes read so far, for progress (row sources count only when finished)."""
        if src.kind in ("parquet", "sql"):
            return self._done_bytes
        return self._done_bytes + (pos.offset if pos.source_bytes is None else pos.source_bytes)


class _BatchWriter:
    """Maps one read batch and produces it: good records to the topic, the rest to its DLQ."""

    def __init__(self, writer: TxnWriter, options: IngestOptions, target: _Target, job: str) -> None:
        self.writer = writer
        # Room for key, headers and batch framing around the value (conservative: checked uncompressed).
        self.mapper = Mapper(options, max_value_bytes=target.max_message_bytes - 512 - options.id_hash_chars)
        self.dlq_limit = target.dlq_max_message_bytes
        self.headers = format_headers(options.format) or None
        self.job = job

    def write(self, src: Source, items: list[Item], txn: _Tally) -> None:
        """The hot loop: one mapping call per record, one produce loop per batch."""
        self.mapper.context(src.name, _where_key(src), int(time.time() * 1000))
        map_row = self.mapper.map_row
        good: list[Mapped] = []
        append = good.append
        nbytes = 0
        for item in items:
            rejected = item.reject
            if rejected is None and item.fields is not None:
                try:
                    result = map_row(item.fields, item.where)
                except Exception as exc:  # a row shape nobody foresaw must not stop the run
                    log.warning("unexpected error mapping %s:%d: %r", src.name, item.where, exc)
                    result = Rejected("unexpected", f"{type(exc).__name__}: {exc}"[:300])
                if not isinstance(result, Rejected):
                    append(result)
                    nbytes += len(result[1])
                    continue
                rejected = result
            self._dead_letter(src, item, rejected or _NO_FIELDS, txn)
        self.writer.produce_all(good, self.headers)
        txn.records += len(items)
        txn.produced += len(good)
        txn.value_bytes += nbytes

    def _dead_letter(self, src: Source, item: Item, rejected: Rejected, txn: _Tally) -> None:
        headers = _dlq_headers(rejected, src, item.where, self.job)
        value = fit_value(raw_bytes(item), headers, self.dlq_limit) or b""
        self.writer.dead_letter(f"{src.name}:{item.where}".encode("utf-8", "replace"), value, headers)
        txn.dead += 1
        txn.kinds[rejected.kind] += 1


def _summary(writer: TxnWriter, txns: _Transactions, options: IngestOptions, target: _Target,
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


def _count_committed(txn: _Tally, topic: str) -> None:
    """Metrics count a transaction once it commits, so they match what read_committed consumers see."""
    m.RECORDS_OUT.labels(stage="ingest", topic=topic).inc(txn.produced)
    m.BYTES_OUT.labels(stage="ingest", topic=topic).inc(txn.value_bytes)
    for kind, n in txn.kinds.items():
        m.DEAD_LETTERED.labels(stage="ingest", reason=kind).inc(n)
