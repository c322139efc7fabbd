"""`kafeed route`: records → the topic of the first rule they match, exactly once."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kafeed.cli.common import (
    GROUP_RESUME,
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
    existing_file,
    exit_stopped,
    format_flags,
    out,
    print_json,
    start_metrics,
)
from kafeed.cli.live_line import live_line
from kafeed.cli.scaling import (
    CooldownOpt,
    MaxWorkersOpt,
    MinWorkersOpt,
    UntilCaughtUpOpt,
    WorkersOpt,
    supervise,
)
from kafeed.signals import install

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

    from kafeed.route import RouteStats



def _progress_line(stats: RouteStats) -> Text:
    from rich.text import Text

    routed = sum(stats.records_out.values())
    return Text.assemble(("route ", "bold"), f"{stats.records_in:,} in · {routed:,} routed · "
                         f"{stats.dropped:,} dropped · {stats.dead_lettered:,} dlq · ",
                         (f"{stats.records_per_s:,.0f} rec/s", "cyan"))


def _summary(stats: RouteStats) -> Table:
    from rich.table import Table

    table = Table(title="kafeed route", show_header=False, title_justify="left")
    table.add_row("records in", f"{stats.records_in:,}")
    for rule, n in stats.by_rule.items():
        table.add_row(f"rule: {rule}", f"{n:,}")
    for topic, n in sorted(stats.records_out.items()):
        table.add_row(f"topic: {topic}", f"{n:,}")
    table.add_row("dropped", f"{stats.dropped:,}")
    for kind, n in sorted(stats.dead_letter_kinds.items()):
        table.add_row(f"dead-lettered: {kind}", f"{n:,}")
    balance = "[green]balanced[/green]" if stats.balanced else "[red]UNBALANCED[/red]"
    table.add_row("in = routed + dropped + dlq", balance)
    table.add_row("batches (aborted)", f"{stats.batches:,} ({stats.aborted_batches})")
    table.add_row("throughput", f"{stats.records_per_s:,.0f} records/s over {stats.busy_s:.1f}s busy "
                  f"({stats.elapsed_s:.1f}s total)")
    return table


def _tuning(batch_size: int | None, poll_records: int | None) -> dict[str, int] | None:
    given = {"batch_size": batch_size, "poll_records": poll_records}
    return {k: v for k, v in given.items() if v is not None} or None


def route(
    rules: Annotated[Path, typer.Option("--rules", "-r", help="TOML rules file (docs/route.md).",
                                        show_default=False, callback=existing_file)],
    input: Annotated[str | None, typer.Option("--input", "-i", help="Topic to route (default: raw).",
                                              show_default=False)] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Consumer group (default: kafeed-route).",
                                              show_default=False)] = None,
    dlq: Annotated[str | None, typer.Option(help="Dead-letter topic (default: <input>.dlq).",
                                            show_default=False)] = None,
    instance: Annotated[str | None, typer.Option(
        help="Worker name for the transactional.id (default: <hostname>-<free local slot>).",
        show_default=False)] = None,
    batch_size: Annotated[int | None, typer.Option(help="Records per transaction, at most (default: 20000).",
                                                   show_default=False)] = None,
    poll_records: Annotated[int | None, typer.Option(
        help="Records per consume call; a transaction gathers several (default: 2000).",
        show_default=False)] = None,
    create_topics: Annotated[bool, typer.Option(
        "--create-topics",
        help="Create output topics the rules name when missing (default: they must exist).",
    )] = False,
    until_caught_up: UntilCaughtUpOpt = False,
    workers: WorkersOpt = "1",
    min_workers: MinWorkersOpt = 1,
    max_workers: MaxWorkersOpt = 4,
    scale_cooldown: CooldownOpt = 15.0,
    value_format: ValueFormatOpt = None,
    text_field: TextFieldOpt = None,
    id_field: IdFieldOpt = None,
    label_field: LabelFieldOpt = None,
    meta_field: MetaFieldOpt = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    metrics_port: MetricsPortOpt = None,
) -> None:
    """Send each record to the topic of the first rule it matches (or drop it), exactly once.

    Unmatched records go to the rules file's `default` topic, else to the dead-letter topic.
    Runs until SIGTERM/Ctrl-C or, with --until-caught-up, until the input is drained.
    """
    from kafeed.formats import load_formats
    from kafeed.route import load_rules, route_settings, run_route

    stop = install()
    ruleset = load_rules(rules)
    settings = route_settings(input=input, group=group, dlq=dlq, instance=instance,
                              create_topics=create_topics,
                              kafka=_tuning(batch_size, poll_records),
                              formats=load_formats(config, **format_flags(value_format, text_field, id_field,
                                                                          label_field, meta_field)))
    if supervise(workers, min_workers, max_workers, scale_cooldown, topic=settings.input,
                 group=settings.group, bootstrap=bootstrap, config=config,
                 until_caught_up=until_caught_up, json_out=json_out):
        return
    conn = connection(bootstrap, config)
    start_metrics(metrics_port)

    with live_line("route: starting", _progress_line, json_out=json_out) as progress:
        stats = run_route(settings, ruleset, conn, until_caught_up=until_caught_up, stop_event=stop.event,
                          on_progress=progress)
    if json_out:
        print_json(stats.as_dict())
    else:
        out.print(_summary(stats))
    exit_stopped(stop, GROUP_RESUME)
