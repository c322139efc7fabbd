"""`kafeed archive`: a topic into an Iceberg table exactly once; its status; compaction."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from kafeed.cli.common import (
    BootstrapOpt,
    ConfigOpt,
    IdFieldOpt,
    JsonOpt,
    LabelFieldOpt,
    MetaFieldOpt,
    MetricsPortOpt,
    TextFieldOpt,
    ValueFormatOpt,
    connection,
    console,
    directory_to_write,
    exit_stopped,
    format_flags,
    out,
    print_json,
    start_metrics,
)
from kafeed.errors import ConfigError, invalid_settings
from kafeed.signals import install

if TYPE_CHECKING:
    from kafeed.archive import CatalogSettings
    from kafeed.archive.run_stats import ArchiveStats
    from kafeed.archive.status import ArchiveStatus

_RESUME = "Re-run the same command: the sink resumes from the table's positions."

app = typer.Typer(help="Archive a topic into an Apache Iceberg table, exactly once (docs/archive.md).",
                  invoke_without_command=True, no_args_is_help=True, rich_markup_mode=None)

TableOpt = Annotated[str | None, typer.Option("--table", help="Iceberg table, NAMESPACE.TABLE.",
                                              show_default=False)]
WarehouseOpt = Annotated[Path | None, typer.Option(
    "--warehouse", help="Directory of the local SQLite catalog and its data files "
    "[default: ~/.cache/kafeed/warehouse].", show_default=False, callback=directory_to_write)]
CatalogOpt = Annotated[str | None, typer.Option(
    "--catalog", help="A named pyiceberg catalog (.pyiceberg.yaml or PYICEBERG_CATALOG__NAME__* "
    "variables: REST, Glue, Hive, SQL) instead of the local one.", show_default=False)]


def catalog_settings(warehouse: Path | None, catalog: str | None) -> CatalogSettings:
    """The catalog that --warehouse / --catalog name (every command that opens a table)."""
    from pydantic import ValidationError

    from kafeed.archive import CatalogSettings

    fields: dict[str, Any] = {"name": catalog}
    if warehouse is not None:
        fields["warehouse"] = warehouse
    try:
        return CatalogSettings(**fields)
    except ValidationError as exc:
        raise invalid_settings(exc, what="catalog options") from None


def _need_table(table: str | None) -> str:
    if not table:
        raise ConfigError("Missing --table NAMESPACE.TABLE.", hint="Name the Iceberg table to use.")
    return table


def _summary(stats: ArchiveStats, topic: str, table: str) -> None:
    from rich.table import Table

    t = Table(title=f"kafeed archive {topic} → {table}", show_header=False, title_justify="left")
    t.add_row("records read", f"{stats.records_in:,}")
    t.add_row("rows written", f"{stats.rows_written:,}")
    t.add_row("already archived (skipped)", f"{stats.already_archived:,}")
    t.add_row("commits (lost races)", f"{stats.commits:,} ({stats.lost_races})")
    secs = max(stats.elapsed_s, 1e-9)
    t.add_row("throughput", f"{stats.records_in / secs:,.0f} records/s, "
              f"{stats.value_bytes / secs / 1e6:,.1f} MB/s over {stats.elapsed_s:.1f}s")
    t.add_row("positions", ", ".join(f"{p}:{o}" for p, o in sorted(stats.positions.items())) or "-")
    out.print(t)


@app.callback()
def archive(
    ctx: typer.Context,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Topic to archive.",
                                              show_default=False)] = None,
    table: TableOpt = None,
    kind: Annotated[Literal["tokens", "samples", "raw"], typer.Option(
        help="Record type: tokens (TokenizedDocument), samples (TrainingSample) or raw bytes.")] = "tokens",
    warehouse: WarehouseOpt = None,
    catalog: CatalogOpt = None,
    group: Annotated[str | None, typer.Option(
        help="Consumer group that divides partitions between sinks [default: kafeed-archive.<table>].",
        show_default=False)] = None,
    instance: Annotated[str | None, typer.Option(
        help="Static group member name: a restarted sink with the same name takes its partitions "
        "back at once [default: dynamic membership].", show_default=False)] = None,
    flush_interval: Annotated[float, typer.Option(
        help="Commit at least this often (seconds) while records arrive.")] = 60.0,
    target_file_mb: Annotated[float, typer.Option(help="Commit when this many MB are buffered.")] = 128.0,
    until_caught_up: Annotated[bool, typer.Option(
        "--until-caught-up", help="Stop once every partition of the topic, whichever sink holds it, "
        "is archived to its end.")] = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    metrics_port: MetricsPortOpt = None,
    value_format: ValueFormatOpt = None,
    text_field: TextFieldOpt = None,
    id_field: IdFieldOpt = None,
    label_field: LabelFieldOpt = None,
    meta_field: MetaFieldOpt = None,
) -> None:
    """Archive --topic into --table until stopped (or caught up); `status` and `compact` below.

    Positions live in the table's snapshot summaries: a restart, a crash, or a second sink
    in the same group never writes a record twice or loses one.
    """
    if ctx.invoked_subcommand is not None:
        return
    from pydantic import ValidationError

    from kafeed.archive import ArchiveSettings
    from kafeed.archive.sink import ArchiveSink
    from kafeed.formats import load_formats

    stop = install()  # first: a signal during start-up is remembered, not fatal
    if not topic:
        raise ConfigError("Missing --topic.", hint="Name the topic to archive.")
    try:
        settings = ArchiveSettings(
            topic=topic, table=_need_table(table), kind=kind, catalog=catalog_settings(warehouse, catalog),
            group=group, instance=instance, flush_interval_s=flush_interval,
            target_file_bytes=int(target_file_mb * 1024 * 1024),
            formats=load_formats(config, **format_flags(value_format, text_field, id_field, label_field,
                                                        meta_field)))
    except ValidationError as exc:
        raise invalid_settings(exc, what="archive options") from None
    conn = connection(bootstrap, config)
    start_metrics(metrics_port)
    sink = ArchiveSink(settings, conn, stop_event=stop.event)
    sink.open()
    console.print(f"kafeed archive: archiving {topic} into {settings.table}", highlight=False)
    stats = sink.run(until_caught_up=until_caught_up)
    if json_out:
        print_json(stats.as_dict())
    else:
        _summary(stats, topic, settings.table)
    exit_stopped(stop, _RESUME)


def _status_table(status: ArchiveStatus) -> None:
    from rich.table import Table

    from kafeed.units import human_bytes

    t = Table(title=f"{status.table}: topic {status.topic} ({status.rows:,} rows, {status.files} files, "
              f"{human_bytes(status.bytes)}, {status.snapshots} snapshots)", title_justify="left")
    for col in ("partition", "archived up to", "log start", "high watermark", "lag", "rows", "files"):
        t.add_column(col, justify="right")

    def show(v: int | None) -> str:
        return "-" if v is None else f"{v:,}"

    for p in status.partitions:
        t.add_row(str(p.partition), show(p.archived_up_to), show(p.log_start), show(p.high_watermark),
                  show(p.lag), f"{p.rows:,}", str(p.files))
    out.print(t)


@app.command()
def status(
    table: TableOpt = None,
    warehouse: WarehouseOpt = None,
    catalog: CatalogOpt = None,
    offline: Annotated[bool, typer.Option("--offline", help="The table only; do not ask the cluster.")]
    = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Per partition: archived up to, the topic's log start and high watermark, rows, files."""
    from kafeed.archive.status import archive_status

    name = _need_table(table)
    result = archive_status(name, catalog_settings(warehouse, catalog),
                            None if offline else connection(bootstrap, config))
    if json_out:
        print_json(result.as_dict())
    else:
        _status_table(result)


@app.command("compact")
def compact_command(
    table: TableOpt = None,
    warehouse: WarehouseOpt = None,
    catalog: CatalogOpt = None,
    target_file_mb: Annotated[float | None, typer.Option(
        help="Files below this size are small [default: the table's write.target-file-size-bytes].",
        show_default=False)] = None,
    json_out: JsonOpt = False,
) -> None:
    """Rewrite each day whose files are small into one file, sorted by partition and offset."""
    from dataclasses import asdict

    from kafeed.archive.compact import compact

    target = None if target_file_mb is None else int(target_file_mb * 1024 * 1024)
    result = compact(_need_table(table), catalog_settings(warehouse, catalog), target_bytes=target)
    if json_out:
        print_json(asdict(result))
    else:
        out.print(f"Compacted {result.days} day(s): {result.files_before} files → {result.files_after} "
                  f"({result.rows:,} rows rewritten).", highlight=False)


def replay(
    table: TableOpt = None,
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="Existing topic to produce into.",
                                              show_default=False)] = None,
    since: Annotated[datetime | None, typer.Option(help="Only records at or after this time (ISO 8601).",
                                                   show_default=False)] = None,
    until: Annotated[datetime | None, typer.Option(help="Only records before this time (ISO 8601).",
                                                   show_default=False)] = None,
    source: Annotated[str | None, typer.Option(help="Only records of this source.", show_default=False)]
    = None,
    warehouse: WarehouseOpt = None,
    catalog: CatalogOpt = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Produce an archive table's records (or a filtered part) into a topic, byte for byte,
    in one transaction; records an earlier replay already wrote there are left out."""
    from kafeed.archive.replay import replay as run_replay

    if not topic:
        raise ConfigError("Missing --topic.", hint="Name the topic to replay into.")
    result = run_replay(_need_table(table), catalog_settings(warehouse, catalog),
                        connection(bootstrap, config), topic=topic, since=_aware(since),
                        until=_aware(until), source=source)
    if json_out:
        print_json({"records": result.records, "partitions": result.partitions,
                    "already_there": result.already_there})
    else:
        there = (f" ({result.already_there:,} already there from an earlier replay, left out)"
                 if result.already_there else "")
        out.print(f"Replayed {result.records:,} records from {result.partitions} partition(s) into "
                  f"{topic}{there}.", highlight=False, markup=False)


def _aware(moment: datetime | None) -> datetime | None:
    """A time without a zone is UTC (the table's timestamps are)."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


@app.command("query")
def query_command(
    sql: Annotated[str, typer.Argument(help="One SELECT for DuckDB; the table is named by its last "
                                       "part (main.tokens -> tokens) and is all it can read.")],
    table: TableOpt = None,
    warehouse: WarehouseOpt = None,
    catalog: CatalogOpt = None,
    limit: Annotated[int, typer.Option("--limit", min=0, help="Rows to return at most; 0 returns "
                                       "every row.")] = 1000,
    json_out: JsonOpt = False,
) -> None:
    """Query an archive table with DuckDB, confined to the table's own Parquet files."""
    from kafeed.archive.query import query

    answer = query(_need_table(table), catalog_settings(warehouse, catalog), sql, limit=limit or None)
    rows = answer.rows.to_pylist()
    if answer.more:
        console.print(f"The first {limit:,} rows; the query has more (--limit N shows more, "
                      "--limit 0 all of them).", markup=False, highlight=False)
    if json_out:
        print_json(rows)
        return
    from rich.table import Table
    from rich.text import Text

    # Values are data: printed as they are, never as rich markup or highlighted.
    t = Table(show_edge=False, highlight=False)
    for name in answer.rows.column_names:
        t.add_column(Text(name))
    for row in rows:
        t.add_row(*(Text(_cell(v)) for v in row.values()))
    out.print(t)


def _cell(value: object, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"
