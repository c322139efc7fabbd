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
from pathlib import Path

from kafeed.config import ConnectionSettings
from kafeed.errors import IngestError
from kafeed.ingest import readers, sql
from kafeed.ingest.mapping import Mapper
from kafeed.ingest.options import IngestOptions, IngestProgress, IngestSummary
from kafeed.ingest.preflight import prepare_topics
from kafeed.ingest.producer import TxnWriter
from kafeed.ingest.progress import JobProgress, job_id_for, read_latest
from kafeed.ingest.readers import Batch, Item, Position
from kafeed.ingest.sources import Source, discover
from kafeed.kafka import dead_letter_headers, fit_value
from kafeed.schema.avro import format_headers
from kafeed.signals import stop_request
from kafeed.telemetry import metrics as m

log = logging.getLogger("kafeed")

ProgressCallback = Callable[[IngestProgress], None]
_ROW_KINDS = ("csv", "parquet", "sql")


class _Tally:
    """Counts of the open transaction, folded into the run's totals on commit."""

    def __init__(self) -> None:
        self.produced = 0
        self.dead = 0
        self.value_bytes = 0
        self.kinds: Counter[str] = Counter()

    def fold(self, other: _Tally) -> None:
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
        """The next batch, None at the end; :class:`_Interrupted` when a signal cut the read short."""
        self._open = True
        try:
            return next(batches, None)
        finally:
            self._open = False

    def close(self) -> None:
        self._open = False
        self._remove()


def _dlq_headers(kind: str, reason: str, source: Source, where: int, job: str) -> list[tuple[str, bytes]]:
    where_key = "kafeed.row" if source.kind in _ROW_KINDS else "kafeed.line"
    return dead_letter_headers(kind=kind, reason=reason, stage="ingest", extra=[
        ("kafeed.source", source.name.encode("utf-8", "replace")), (where_key, str(where).encode()),
        ("kafeed.job", job.encode())])


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
    dlq_topic = f"{topic}.dlq"
    writer = TxnWriter(settings, transactional_id=f"kafeed-{job}", topic=topic, dlq_topic=dlq_topic,
                       options=options, max_message_bytes=limit)
    try:
        writer.init()
        identities = [s.identity for s in srcs]
        progress = None if options.restart else read_latest(settings, job)
        resumed = progress is not None
        if progress is not None:
            progress.check_sources(identities)
            if progress.finished:
                log.info("job %s already finished; nothing to do", job)
                return IngestSummary(
                    job_id=job, topic=topic, dlq_topic=dlq_topic, format=options.format, records_in=0,
                    produced=0, dead_lettered=0, dead_letter_kinds={}, per_partition={},
                    bytes_serialized=0, bytes_compressed=None, seconds=time.monotonic() - t0,
                    transactions=0, resumed=True, already_complete=True,
                    skipped_committed=sum(progress.totals.values()), job_totals=dict(progress.totals))
        else:
            progress = JobProgress(job=job, sources=identities)
        skipped = sum(progress.totals.values())
        # Each read batch keeps ~10k fresh dicts and tuples alive, which makes the cyclic GC
        # rescan them over and over (~0.7 µs per record, measured). The hot path makes no
        # cycles, so the collector pauses for the run and a young-generation pass runs
        # at each commit instead.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        try:
            return _run(writer, srcs, progress, options, topic=topic, dlq_topic=dlq_topic, limit=limit,
                        dlq_limit=dlq_limit, t0=t0, resumed=resumed, skipped=skipped,
                        on_progress=on_progress, stop_event=stop_event)
        finally:
            if gc_was_enabled:
                gc.enable()
    finally:
        writer.close()


def _run(
    writer: TxnWriter, srcs: list[Source], progress: JobProgress, options: IngestOptions, *,
    topic: str, dlq_topic: str, limit: int, dlq_limit: int, t0: float, resumed: bool, skipped: int,
    on_progress: ProgressCallback | None, stop_event: threading.Event,
) -> IngestSummary:
    job = progress.job
    t_loop = time.monotonic()
    # Room for key, headers and batch framing around the value (conservative: checked uncompressed).
    mapper = Mapper(options, max_value_bytes=limit - 512 - options.id_hash_chars)
    fmt_headers = format_headers(options.format) or None
    total_bytes = None if any(s.size is None for s in srcs) else sum(s.size or 0 for s in srcs)
    done_bytes = sum(s.size or 0 for s in srcs[:progress.index])
    run, txn = _Tally(), _Tally()
    records_in = transactions = 0
    since_commit, last_commit = 0, time.monotonic()

    def commit(finished: bool = False) -> None:
        nonlocal transactions, since_commit, last_commit, txn
        progress.finished = finished
        progress.totals = {"produced": progress.totals["produced"] + txn.produced,
                           "dead_lettered": progress.totals["dead_lettered"] + txn.dead}
        try:
            writer.commit(job, progress.state_dict())
        except BaseException:
            progress.totals = {"produced": progress.totals["produced"] - txn.produced,
                               "dead_lettered": progress.totals["dead_lettered"] - txn.dead}
            raise
        _count_committed(txn, topic)
        run.fold(txn)
        txn = _Tally()
        gc.collect(1)
        transactions += 1
        since_commit, last_commit = 0, time.monotonic()

    writer.begin()
    stopped = False
    gate = _ReadGate()
    try:
        for index in range(progress.index, len(srcs)):
            src = srcs[index]
            start = Position(progress.offset, progress.record) if index == progress.index else Position()
            where_key = "kafeed.row" if src.kind in _ROW_KINDS else "kafeed.line"
            name = src.name
            batches = readers.read_source(src, options, start)
            while True:
                if stop_event.is_set():
                    stopped = True
                    break
                try:
                    batch = gate.next(batches)
                except _Interrupted:
                    stopped = True
                    break
                except OSError as exc:
                    raise IngestError(f"Reading {src.name} failed: {exc}.",
                                      hint="Fix the source and re-run the same command: it resumes.") from exc
                if batch is None:
                    break
                items, pos = batch
                ts = int(time.time() * 1000)
                mapper.context(name, where_key, ts)
                produced, nbytes = _produce_batch(writer, mapper, items, name, where_key, ts, fmt_headers,
                                                  src, job, dlq_limit, txn)
                txn.produced += produced
                txn.value_bytes += nbytes
                records_in += len(items)
                since_commit += len(items)
                progress.index, progress.offset, progress.record = index, pos.offset, pos.record
                writer.poll()
                if (since_commit >= options.commit_records
                        or (time.monotonic() - last_commit) * 1000 >= options.commit_interval_ms):
                    commit()
                    writer.begin()
                if on_progress is not None:
                    read = pos.offset if pos.source_bytes is None else pos.source_bytes
                    on_progress(IngestProgress(
                        records=records_in, produced=run.produced + txn.produced,
                        dead_lettered=run.dead + txn.dead,
                        bytes_read=done_bytes + (read if src.kind not in ("parquet", "sql") else 0),
                        total_bytes=total_bytes, value_bytes=run.value_bytes + txn.value_bytes))
            if stopped:
                break
            done_bytes += src.size or 0
            progress.index, progress.offset, progress.record = index + 1, 0, 0
    except IngestError:
        # A source broke mid-read (a truncated archive): keep the whole batches read before it.
        commit()
        raise
    finally:
        gate.close()
    commit(finished=not stopped)
    produce_seconds = time.monotonic() - t_loop
    per_partition, wire_bytes = writer.final_stats(run.produced)
    return IngestSummary(
        job_id=job, topic=topic, dlq_topic=dlq_topic, format=options.format, records_in=records_in,
        produced=run.produced, dead_lettered=run.dead, dead_letter_kinds=dict(run.kinds),
        per_partition=per_partition, bytes_serialized=run.value_bytes, bytes_compressed=wire_bytes,
        seconds=time.monotonic() - t0,
        transactions=transactions, resumed=resumed, already_complete=False,
        produce_seconds=produce_seconds, skipped_committed=skipped, job_totals=dict(progress.totals),
        stopped=stopped)


def _count_committed(txn: _Tally, topic: str) -> None:
    """Metrics count a transaction once it commits, so they match what read_committed consumers see."""
    m.RECORDS_OUT.labels(stage="ingest", topic=topic).inc(txn.produced)
    m.BYTES_OUT.labels(stage="ingest", topic=topic).inc(txn.value_bytes)
    for kind, n in txn.kinds.items():
        m.DEAD_LETTERED.labels(stage="ingest", reason=kind).inc(n)


def _produce_batch(
    writer: TxnWriter, mapper: Mapper, items: list[Item], name: str, where_key: str, ts: int,
    headers: list[tuple[str, bytes]] | None, src: Source, job: str, dlq_limit: int, txn: _Tally,
) -> tuple[int, int]:
    """Map and produce one read batch (the hot loop); returns (records produced, value bytes)."""
    mapit = mapper.map_row
    good: list[tuple[bytes, bytes]] = []
    append = good.append
    nbytes = 0
    for item in items:
        fields, reject = item[1], item[3]
        if reject is None and fields is not None:
            try:
                key, value = mapit(fields, item[0])
            except Exception as exc:  # a row shape nobody foresaw must not stop the run
                log.warning("unexpected error mapping %s:%d: %r", name, item[0], exc)
                key, value = "unexpected", f"{type(exc).__name__}: {exc}"[:300]
            if type(value) is bytes:
                append((key, value))  # type: ignore[arg-type]
                nbytes += len(value)
                continue
            reject = (key, value)  # type: ignore[assignment]
        _dead_letter(writer, item, reject or ("unknown", "no fields"), src, job, dlq_limit, txn)
    writer.produce_all(good, headers)
    return len(good), nbytes


def _dead_letter(writer: TxnWriter, item: Item, reject: tuple[str, str], src: Source, job: str,
                 dlq_limit: int, txn: _Tally) -> None:
    kind, reason = reject
    headers = _dlq_headers(kind, reason, src, item[0], job)
    value = fit_value(readers.raw_bytes(item), headers, dlq_limit) or b""
    writer.dead_letter(f"{src.name}:{item[0]}".encode("utf-8", "replace"), value, headers)
    txn.dead += 1
    txn.kinds[kind] += 1
