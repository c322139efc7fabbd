"""`kafeed ingest`: files, directories, globs, SQL or stdin → TrainingSample records, exactly once."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kafeed.choices import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_LINGER_MS,
    Compression,
    RawFormat,
    StdinFormat,
    TextMode,
)
from kafeed.cli.common import (
    BootstrapOpt,
    ConfigOpt,
    JsonOpt,
    MetricsPortOpt,
    connection,
    console,
    exit_stopped,
    print_json,
    start_metrics,
)
from kafeed.errors import TooManyDeadLetters, invalid_settings
from kafeed.signals import install
from kafeed.units import human_bytes

if TYPE_CHECKING:
    from rich.progress import TaskID

    from kafeed.ingest import IngestProgress, IngestSummary

_TUNABLES = ("compression", "linger_ms", "batch_bytes", "batch_messages", "read_batch",
             "commit_records", "commit_interval_ms", "format", "text_field", "id_field", "max_dlq_ratio")
_RESUME = "Re-run the same command: it resumes after the last committed batch."


class _Bar:
    """A rich progress bar on stderr: records/s, MB/s read, ETA when the total size is known."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.progress = Progress(
            TextColumn("[bold]ingest[/bold]"), BarColumn(), TextColumn("{task.fields[records]} records"),
            TextColumn("{task.fields[rps]} rec/s"), TextColumn("{task.fields[mbps]} MB/s"),
            TextColumn("dlq {task.fields[dlq]}"), TimeElapsedColumn(), TimeRemainingColumn(),
            console=console, transient=True,
        )
        self.task: TaskID | None = None
        self.t0 = time.monotonic()
        self.last = 0.0

    def __enter__(self) -> _Bar:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def __call__(self, p: IngestProgress) -> None:
        now = time.monotonic()
        if now - self.last < 0.2:
            return
        self.last = now
        elapsed = max(now - self.t0, 1e-6)
        fields: dict[str, Any] = {
            "records": f"{p.records:,}", "rps": f"{p.records / elapsed:,.0f}",
            "mbps": f"{p.value_bytes / elapsed / 1e6:.1f}", "dlq": f"{p.dead_lettered:,}"}
        if self.task is None:
            self.task = self.progress.add_task("ingest", total=p.total_bytes, **fields)
        self.progress.update(self.task, completed=p.bytes_read, **fields)


def _print_summary(s: IngestSummary) -> None:
    from rich.table import Table

    if s.already_complete:
        console.print(f"Nothing to do: job [bold]{s.job_id}[/bold] already finished "
                      f"({s.job_totals.get('produced', 0):,} records, "
                      f"{s.job_totals.get('dead_lettered', 0):,} dead-lettered). "
                      "Use --restart to ingest the same sources again.", highlight=False)
        return
    table = Table(title=f"ingest → {s.topic} ({s.format})", show_header=False, title_justify="left")
    table.add_row("job", s.job_id + (" (resumed)" if s.resumed else "")
                  + (" (stopped before the end: re-run to resume)" if s.stopped else ""))
    if s.resumed:
        table.add_row("already committed before this run", f"{s.skipped_committed:,}")
    table.add_row("records read", f"{s.records_in:,}")
    table.add_row("produced", f"{s.produced:,}")
    dlq = ", ".join(f"{k} {v}" for k, v in sorted(s.dead_letter_kinds.items()))
    table.add_row(f"dead-lettered → {s.dlq_topic}", f"{s.dead_lettered:,}" + (f" ({dlq})" if dlq else ""))
    table.add_row("bytes serialized (before compression)", human_bytes(s.bytes_serialized))
    table.add_row("bytes sent (after compression, librdkafka wire bytes)", human_bytes(s.bytes_compressed))
    table.add_row("per partition", ", ".join(f"{p}: {n:,}" for p, n in s.per_partition.items()) or "-")
    table.add_row("seconds", f"{s.seconds:.2f} ({s.records_per_s:,.0f} records/s, {s.transactions} txns)")
    console.print(table)


def ingest_command(
    sources: Annotated[list[str] | None, typer.Argument(
        help="Files (.jsonl .json .csv .parquet .txt; all but .parquet also as .gz .zst .bz2 .xz), "
        "directories, globs, or - for stdin.",
        show_default=False)] = None,
    topic: Annotated[str, typer.Option("--topic", "-t", help="Destination topic (must exist).")] = "raw",
    sql: Annotated[str | None, typer.Option(help='A query, e.g. "SELECT id, text FROM docs ORDER BY id".',
                                            show_default=False)] = None,
    dsn: Annotated[str | None, typer.Option(help="sqlite:///f.db or postgresql://user@host/db.",
                                            show_default=False)] = None,
    text_field: Annotated[str | None, typer.Option(help="Field holding the text [default: text].",
                                                   show_default=False)] = None,
    id_field: Annotated[str | None, typer.Option(
        help="Field holding the document id [default: id]; absent → sha256 of the text.",
        show_default=False)] = None,
    label_field: Annotated[str | None, typer.Option(
        help="Field with a number or list of numbers → target_values.", show_default=False)] = None,
    meta_field: Annotated[list[str] | None, typer.Option(
        help="Extra field copied into metadata (repeatable).", show_default=False)] = None,
    text_mode: Annotated[TextMode, typer.Option(help="How .txt files split into documents.")] = "line",
    stdin_format: Annotated[StdinFormat, typer.Option(help="What - (stdin) carries.")] = "jsonl",
    fmt: Annotated[RawFormat | None, typer.Option("--format", help="Raw value format [default: protobuf].",
                                                  show_default=False)] = None,
    compression: Annotated[Compression | None, typer.Option(
        help="Producer compression [default: zstd].", show_default=False)] = None,
    linger_ms: Annotated[int | None, typer.Option(
        help=f"linger.ms [default: {DEFAULT_LINGER_MS}, measured].", show_default=False)] = None,
    batch_bytes: Annotated[int | None, typer.Option(
        help=f"batch.size [default: {DEFAULT_BATCH_BYTES}].", show_default=False)] = None,
    commit_records: Annotated[int | None, typer.Option(
        help="Commit a transaction + progress marker every N records [default: 50000].",
        show_default=False)] = None,
    commit_interval_ms: Annotated[int | None, typer.Option(
        help="... or every M ms [default: 2000].", show_default=False)] = None,
    job_id: Annotated[str | None, typer.Option(
        help="Name the job (and its transactional id) instead of hashing topic + sources + mapping.",
        show_default=False)] = None,
    restart: Annotated[bool, typer.Option(
        help="Ignore the job's committed progress and ingest everything again.")] = False,
    max_dlq_ratio: Annotated[float | None, typer.Option(
        help="Fail (exit 1) when more than this share of the records read is dead-lettered "
        "[default: fail only when all are].", show_default=False)] = None,
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    metrics_port: MetricsPortOpt = None,
) -> None:
    """Ingest sources into a topic: idempotent, transactional, resumable; bad input → <topic>.dlq.

    SIGINT/SIGTERM commit the batches read so far and exit 130/143; the same command resumes.
    """
    from kafeed.config import read_settings_file
    from kafeed.ingest import IngestOptions, ingest

    stop = install()  # first: a signal during start-up is remembered, not fatal
    settings = connection(bootstrap, config)
    values: dict[str, Any] = {k: v for k, v in read_settings_file(config).get("ingest", {}).items()
                              if k in _TUNABLES}
    given = {"text_field": text_field, "id_field": id_field, "format": fmt, "compression": compression,
             "linger_ms": linger_ms, "batch_bytes": batch_bytes, "commit_records": commit_records,
             "commit_interval_ms": commit_interval_ms, "max_dlq_ratio": max_dlq_ratio}
    values.update({k: v for k, v in given.items() if v is not None})
    try:
        options = IngestOptions(label_field=label_field, meta_fields=tuple(meta_field or ()),
                                text_mode=text_mode, stdin_format=stdin_format, job_id=job_id,
                                restart=restart, sql=sql, dsn=dsn, **values)
    except ValueError as exc:
        raise invalid_settings(exc, what="ingest options") from None
    start_metrics(metrics_port)
    if no_progress or not console.is_terminal:
        summary = ingest(sources or [], topic=topic, settings=settings, options=options,
                         stop_event=stop.event)
    else:
        with _Bar() as bar:
            summary = ingest(sources or [], topic=topic, settings=settings, options=options, on_progress=bar,
                             stop_event=stop.event)
    if json_out:
        print_json(summary.as_dict())
    else:
        _print_summary(summary)
    exit_stopped(stop, _RESUME)
    TooManyDeadLetters.check(stage="ingest", records_in=summary.records_in,
                             dead_lettered=summary.dead_lettered, max_ratio=options.max_dlq_ratio,
                             dlq_topic=summary.dlq_topic)
