"""`kafeed infer`: a classifier checkpoint serving a topic, one prediction per record, exactly once."""

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
    console,
    existing_directory,
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
    scale_settings,
    supervise,
)
from kafeed.errors import ConfigError, TooManyDeadLetters
from kafeed.signals import install

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

    from kafeed.infer import InferStats



def _progress_line(stats: InferStats) -> Text:
    from rich.text import Text

    return Text.assemble(("infer ", "bold"), f"{stats.records_in:,} in · {stats.predictions:,} predicted · "
                         f"{stats.dead_lettered:,} dlq · ", (f"{stats.records_per_s:,.0f} rec/s", "cyan"))


def _summary(stats: InferStats) -> Table:
    from rich.table import Table

    table = Table(title="kafeed infer", show_header=False, title_justify="left")
    table.add_row("records in", f"{stats.records_in:,}")
    table.add_row("predictions", f"{stats.predictions:,}")
    for checkpoint, n in stats.by_checkpoint.items():
        table.add_row(f"by {checkpoint}", f"{n:,}")
    for kind, n in sorted(stats.dead_letter_kinds.items()):
        table.add_row(f"dead-lettered: {kind}", f"{n:,}")
    table.add_row("model switches", f"{stats.model_switches}")
    table.add_row("batches (aborted)", f"{stats.batches:,} ({stats.aborted_batches})")
    table.add_row("throughput", f"{stats.records_per_s:,.0f} records/s over {stats.busy_s:.1f}s busy")
    return table


def infer(
    checkpoint: Annotated[Path | None, typer.Option(
        "--checkpoint", help="Classifier checkpoint: a step-*.pt file or a checkpoint directory (its newest) "
        "[default: the newest in --follow].", show_default=False)] = None,
    input: Annotated[str | None, typer.Option("--input", "-i", help="Topic of TrainingSample records "
                                              "(default: raw).", show_default=False)] = None,
    output: Annotated[str | None, typer.Option("--output", "-o", help="Predictions topic "
                                               "(default: predictions).", show_default=False)] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Consumer group (default: kafeed-infer).",
                                              show_default=False)] = None,
    dlq: Annotated[str | None, typer.Option(help="Dead-letter topic (default: <input>.dlq).",
                                            show_default=False)] = None,
    instance: Annotated[str | None, typer.Option(help="Worker name for the transactional.id.",
                                                 show_default=False)] = None,
    batch_size: Annotated[int | None, typer.Option(help="Records per forward pass and transaction "
                                                   "(default: 32).", show_default=False)] = None,
    max_wait_ms: Annotated[int | None, typer.Option(help="Close a batch after this long even when not full "
                                                    "(default: 100).", show_default=False)] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cpu).",
                                               show_default=False)] = None,
    follow: Annotated[Path | None, typer.Option(
        help="Checkpoint directory to watch: switch to a newer checkpoint between batches.",
        show_default=False, callback=existing_directory)] = None,
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
    """Serve a classifier trained by `kafeed train --model classifier` on a topic, exactly once.

    Writes one JSON prediction per input record (docs/infer.md); undecodable records go
    to the dead-letter topic. Runs until SIGTERM/Ctrl-C or, with --until-caught-up, until drained.
    """
    from kafeed.formats import load_formats
    from kafeed.infer import check_checkpoint, infer_settings

    stop = install()
    settings = infer_settings(input=input, output=output, group=group, dlq=dlq, instance=instance,
                              batch_size=batch_size, max_wait_ms=max_wait_ms, device=device, follow=follow,
                              formats=load_formats(config, **format_flags(value_format, text_field, id_field,
                                                                          label_field, meta_field)))
    scale_settings(workers, min_workers, max_workers, scale_cooldown)  # bad bounds: before the checkpoint
    source = checkpoint or follow
    if source is None:
        raise ConfigError("Pass --checkpoint (or --follow with a checkpoint directory).",
                          hint="A classifier checkpoint is what `kafeed train --model classifier` writes.")
    check_checkpoint(source)  # its kind, before torch loads (and before any worker starts)
    if supervise(workers, min_workers, max_workers, scale_cooldown, topic=settings.input,
                 group=settings.group, bootstrap=bootstrap, config=config,
                 until_caught_up=until_caught_up, json_out=json_out):
        return
    conn = connection(bootstrap, config)
    start_metrics(metrics_port)
    from kafeed.infer import run_infer  # torch comes in with the model

    with live_line("infer: loading the model", _progress_line, json_out=json_out) as progress:
        stats = run_infer(settings, source, conn, until_caught_up=until_caught_up, stop_event=stop.event,
                          on_progress=progress,
                          on_switch=lambda s: console.print(f"infer: now serving {s.checkpoint_id}",
                                                            highlight=False, markup=False))
    if json_out:
        print_json(stats.as_dict())
    else:
        out.print(_summary(stats))
    exit_stopped(stop, GROUP_RESUME)
    TooManyDeadLetters.check(stage="infer", records_in=stats.records_in, dead_lettered=stats.dead_lettered,
                             max_ratio=None, dlq_topic=settings.dlq_topic)
