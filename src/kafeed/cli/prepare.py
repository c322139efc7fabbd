"""`kafeed prepare`: raw samples → tokenized documents, exactly once, until stopped or caught up."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

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
from kafeed.errors import TooManyDeadLetters
from kafeed.signals import install

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

    from kafeed.prepare import PrepareStats



def _progress_line(stats: PrepareStats) -> Text:
    from rich.text import Text

    return Text.assemble(
        ("prepare ", "bold"),
        f"{stats.records_in:,} in · {stats.documents_out:,} out · "
        f"{stats.filtered_total:,} filtered · {stats.duplicates:,} dup · {stats.dead_lettered:,} dlq · ",
        (f"{stats.records_per_s:,.0f} rec/s · {stats.tokens_per_s:,.0f} tok/s", "cyan"),
    )


def _summary(stats: PrepareStats) -> Table:
    from rich.table import Table

    table = Table(title="kafeed prepare", show_header=False, title_justify="left")
    table.add_row("records in", f"{stats.records_in:,}")
    table.add_row("documents out", f"{stats.documents_out:,}")
    table.add_row("tokens out", f"{stats.tokens_out:,}")
    for name, n in sorted(stats.filtered.items()):
        table.add_row(f"filtered: {name}", f"{n:,}")
    table.add_row("duplicates", f"{stats.duplicates:,}")
    if stats.near_duplicates:
        table.add_row("near-duplicates", f"{stats.near_duplicates:,}")
    for rule, n in stats.by_rule.items():
        table.add_row(f"rule: {rule}", f"{n:,}")
    if stats.by_rule:
        for topic, n in sorted(stats.records_out.items()):
            if not topic.startswith("__kafeed"):  # global dedup's repartition topic
                table.add_row(f"topic: {topic}", f"{n:,}")
        table.add_row("dropped by a rule", f"{stats.dropped:,}")
    for kind, n in sorted(stats.dead_letter_kinds.items()):
        table.add_row(f"dead-lettered: {kind}", f"{n:,}")
    balance = "[green]balanced[/green]" if stats.balanced else "[red]UNBALANCED[/red]"
    dropped = " + dropped" if stats.by_rule else ""
    table.add_row(f"in = out + filtered + dup + near-dup{dropped} + dlq", balance)
    table.add_row("batches (aborted)", f"{stats.batches:,} ({stats.aborted_batches})")
    table.add_row("throughput", f"{stats.records_per_s:,.0f} records/s, {stats.tokens_per_s:,.0f} tokens/s "
                  f"over {stats.busy_s:.1f}s busy ({stats.elapsed_s:.1f}s total)")
    return table


def prepare(
    input: Annotated[str | None, typer.Option(
        "--input", "-i", help="Raw topic, or a comma-separated list of topics and glob patterns "
        "('site-*.raw'), matched against the cluster's topics at start (default: raw).",
        show_default=False)] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Tokens topic (default: tokens).",
                                               show_default=False)] = None,
    rules: Annotated[Path | None, typer.Option(
        "--rules", "-r", help="Route each document to the topic of the first rule it matches, as "
        "`kafeed route` does (docs/route.md); --output is then not used.", show_default=False,
        callback=existing_file)] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Consumer group; processes with "
                                              "the same group share the input (default: kafeed-prepare).",
                                              show_default=False)] = None,
    tokenizer: Annotated[str | None, typer.Option(
        "--tokenizer", help="'bytes' (offline fallback), 'minilm', or a tokenizer.json path "
        "[default: bytes].", show_default=False)] = None,
    dlq: Annotated[str | None, typer.Option(
        help="Dead-letter topic (default: <input>.dlq for one input topic, <group>.dlq for a list "
        "or a pattern).", show_default=False)] = None,
    instance: Annotated[str | None, typer.Option(
        help="Worker name for the transactional.id (default: <hostname>-<free local slot>).",
        show_default=False)] = None,
    batch_size: Annotated[int | None, typer.Option(help="Records per transaction (default: 2000).",
                                                   show_default=False)] = None,
    no_dedup: Annotated[bool, typer.Option("--no-dedup", help="Switch exact dedup off.")] = False,
    dedup_scope: Annotated[str | None, typer.Option(
        "--dedup-scope", help="'global': re-key by content hash so copies meet across ids and "
        "partitions; 'partition': within each input partition only [default: global].",
        show_default=False)] = None,
    dedup_max_entries: Annotated[int | None, typer.Option(
        "--dedup-max-entries", help="Remember at most about this many hashes per state partition "
        "(the oldest half goes first) [default: no limit].", show_default=False)] = None,
    dedup_max_memory_mb: Annotated[float | None, typer.Option(
        "--dedup-max-memory-mb", help="Memory budget of the dedup state per state partition, in MiB "
        "[default: no limit].", show_default=False)] = None,
    dedup_horizon: Annotated[str | None, typer.Option(
        "--dedup-horizon", help="Forget hashes older than this, e.g. 90d, 12h [default: never].",
        show_default=False)] = None,
    near_dedup: Annotated[bool, typer.Option(
        "--near-dedup", help="Also drop near-duplicates (MinHash-LSH over word shingles; see "
        "docs/prepare.md).")] = False,
    no_filters: Annotated[bool, typer.Option("--no-filters", help="Switch quality filters off.")] = False,
    value_format: ValueFormatOpt = None,
    text_field: TextFieldOpt = None,
    id_field: IdFieldOpt = None,
    label_field: LabelFieldOpt = None,
    meta_field: MetaFieldOpt = None,
    reprocess: Annotated[bool, typer.Option(
        "--reprocess", help="Run a new --group over an input whose documents the output already "
        "holds, writing them again (refused otherwise).")] = False,
    until_caught_up: UntilCaughtUpOpt = False,
    max_dlq_ratio: Annotated[float | None, typer.Option(
        help="Fail (exit 1) when more than this share of the records read is dead-lettered "
        "[default: fail only when all are].", show_default=False)] = None,
    workers: WorkersOpt = "1",
    min_workers: MinWorkersOpt = 1,
    max_workers: MaxWorkersOpt = 4,
    scale_cooldown: CooldownOpt = 15.0,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    metrics_port: MetricsPortOpt = None,
) -> None:
    """Normalize, filter, dedup and tokenize raw samples into documents, exactly once.

    Runs until SIGTERM/Ctrl-C (which finish or abort the open transaction, then exit
    143/130) or, with --until-caught-up, until the input is drained.
    """
    from kafeed.prepare import load_prepare_settings, resolve_on_cluster, run_prepare
    from kafeed.prepare.overlap import check_new_group
    from kafeed.route import load_rules

    stop = install()  # first: a signal during start-up is remembered, not fatal
    ruleset = load_rules(rules) if rules is not None else None
    overrides: dict[str, Any] = {
        "input": input, "output": output, "group": group, "dlq": dlq, "instance": instance,
        "tokenizer": {"name": tokenizer}, "kafka": {"batch_size": batch_size},
        "max_dlq_ratio": max_dlq_ratio,
        "formats": {"override": format_flags(value_format, text_field, id_field, label_field, meta_field)},
    }
    overrides["dedup"] = {"scope": dedup_scope, "max_entries": dedup_max_entries,
                          "max_memory_mb": dedup_max_memory_mb, "horizon": dedup_horizon,
                          "near": True if near_dedup else None}
    if no_dedup:
        overrides["dedup"]["enabled"] = False
    if no_filters:
        overrides["filters"] = {"enabled": False}
    settings = load_prepare_settings(config, **overrides)
    settings.outputs(ruleset)  # a rule that writes to prepare's own topics fails here, before workers start
    conn = connection(bootstrap, config)
    # Before workers start: a pattern that matches nothing fails here, and they share the topics.
    settings = resolve_on_cluster(settings, conn, rules=ruleset)
    if not reprocess:
        check_new_group(settings, conn, rules=ruleset)
    if supervise(workers, min_workers, max_workers, scale_cooldown, topic=settings.input,
                 group=settings.group, bootstrap=bootstrap, config=config,
                 until_caught_up=until_caught_up, json_out=json_out):
        return
    start_metrics(metrics_port)

    with live_line("prepare: starting", _progress_line, json_out=json_out) as progress:
        stats = run_prepare(settings, conn, until_caught_up=until_caught_up, stop_event=stop.event,
                            on_progress=progress, rules=ruleset)
    if json_out:
        print_json(stats.as_dict())
    else:
        out.print(_summary(stats))
    exit_stopped(stop, GROUP_RESUME)
    TooManyDeadLetters.check(stage="prepare", records_in=stats.records_in,
                             dead_lettered=stats.dead_lettered, max_ratio=settings.max_dlq_ratio,
                             dlq_topic=settings.dlq_topic)
