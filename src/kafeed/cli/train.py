"""`kafeed train` and `kafeed lineage`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kafeed.choices import ModelKind
from kafeed.cli.archive import CatalogOpt, WarehouseOpt, catalog_settings
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
from kafeed.train.defaults import DEFAULT_LR, DEFAULT_TOPIC
from kafeed.train.defaults import TRAIN_DEFAULTS as _D

if TYPE_CHECKING:
    from kafeed.train.options import TrainOptions
    from kafeed.train.startup import Startup


def train(
    model: Annotated[ModelKind, typer.Option(help="gpt (from scratch) or classifier "
                                             "(fine-tune).")] = _D["model"],
    topic: Annotated[str | None, typer.Option(help=f"Input topic (default: {DEFAULT_TOPIC['gpt']} for gpt, "
                                              f"{DEFAULT_TOPIC['classifier']} for classifier).",
                                              show_default=False)] = None,
    mix: Annotated[str | None, typer.Option(help="Read a mixture instead of --topic: TOPIC=WEIGHT,... at "
                                            "those token proportions, e.g. web=0.6,code=0.3,books=0.1 "
                                            "(gpt).", show_default=False)] = _D["mix"],
    steps: Annotated[int, typer.Option(help="Optimizer steps (fewer if a bounded topic "
                                       "ends).")] = _D["steps"],
    batch_size: Annotated[int, typer.Option(help="Windows (gpt) or samples per step.")] = _D["batch_size"],
    seq_len: Annotated[int, typer.Option(help="Tokens per window (gpt).")] = _D["seq_len"],
    lr: Annotated[float | None, typer.Option(help=f"Peak learning rate (default: {DEFAULT_LR['gpt']:g} gpt, "
                                             f"{DEFAULT_LR['classifier']:g} classifier).",
                                             show_default=False)] = None,
    d_model: Annotated[int, typer.Option(help="GPT width (a multiple of --n-heads).")] = _D["d_model"],
    n_layers: Annotated[int, typer.Option(help="GPT layers.")] = _D["n_layers"],
    n_heads: Annotated[int, typer.Option(help="GPT attention heads.")] = _D["n_heads"],
    tokenizer: Annotated[str, typer.Option(help="The tokenizer prepare used: bytes, minilm or a "
                                           "tokenizer.json path.")] = _D["tokenizer"],
    num_workers: Annotated[int, typer.Option(help="DataLoader workers per rank.")] = _D["num_workers"],
    shuffle_buffer: Annotated[int, typer.Option(help="Records in the shuffle buffer "
                                                "(0: off).")] = _D["shuffle_buffer"],
    seed: Annotated[int, typer.Option(help="Seed of model init, shuffle and dropout.")] = _D["seed"],
    stream: Annotated[bool, typer.Option(help="Keep reading new records (no end).")] = _D["stream"],
    checkpoint_dir: Annotated[Path, typer.Option(help="Where checkpoints go.",
                                                 callback=directory_to_write)] = _D["checkpoint_dir"],
    checkpoint_every: Annotated[int, typer.Option(help="Steps between checkpoints (0: only at the "
                                                  "end).")] = _D["checkpoint_every"],
    keep: Annotated[int, typer.Option(help="Checkpoints kept.")] = _D["keep"],
    resume: Annotated[bool, typer.Option(help="Continue from the newest valid checkpoint.")] = _D["resume"],
    group: Annotated[str, typer.Option(help="Consumer group the offsets are mirrored to.")] = _D["group"],
    run_dir: Annotated[Path | None, typer.Option(
        help="Record metrics.jsonl here for `kafeed report`.", show_default=False,
        callback=directory_to_write)] = _D["run_dir"],
    log_every: Annotated[int, typer.Option(help="Steps between progress lines.")] = _D["log_every"],
    num_labels: Annotated[int, typer.Option(help="Classes (classifier).")] = _D["num_labels"],
    pretrained: Annotated[bool, typer.Option(help="Start the classifier from the bundled MiniLM "
                                             "weights when installed.")] = _D["pretrained"],
    eval_every: Annotated[int, typer.Option(
        help="Also checkpoint every N steps and submit an evaluate task for every checkpoint "
        "(0: none); run them with `kafeed tasks worker --kind evaluate`.")] = _D["eval_every"],
    eval_records: Annotated[int, typer.Option(help="Held-out records an evaluate task reads at "
                                              "most.")] = _D["eval_records"],
    tasks_prefix: Annotated[str, typer.Option(help="Task queue prefix the evaluate tasks go "
                                              "to.")] = _D["tasks_prefix"],
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
    """Train a reference model on kafeed's loader, with exact checkpoints and lineage."""
    from rich.table import Table

    # First: a SIGTERM while torch imports (seconds) is a stop request, not a kill.
    stop = install()
    from pydantic import ValidationError

    from kafeed.formats import load_formats
    from kafeed.loader.mixing import parse_mix
    from kafeed.train.options import TrainOptions

    weights = parse_mix(mix) if mix is not None else None
    try:
        # topic and lr: None lets the model's own default apply
        options = TrainOptions.model_validate(dict(
            model=model, topic=topic, mix=weights, steps=steps, batch_size=batch_size, seq_len=seq_len, lr=lr,
            d_model=d_model, n_layers=n_layers, n_heads=n_heads, tokenizer=tokenizer,
            num_workers=num_workers, shuffle_buffer=shuffle_buffer, seed=seed, stream=stream,
            checkpoint_dir=checkpoint_dir, checkpoint_every=checkpoint_every, keep=keep,
            resume=resume, group=group, run_dir=run_dir, log_every=log_every,
            num_labels=num_labels, pretrained=pretrained, eval_every=eval_every,
            eval_records=eval_records, tasks_prefix=tasks_prefix,
            formats=load_formats(config, **format_flags(value_format, text_field, id_field, label_field,
                                                        meta_field)),
        ))
    except ValidationError as exc:
        raise invalid_settings(exc, what="train options",
                               hint="See `kafeed train --help` for each option's range.") from None
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if metrics_port is not None and not 0 <= metrics_port <= 65535 - local_rank:
        raise ConfigError(f"Invalid train options: metrics_port: got {metrics_port}, should be between "
                          f"0 and {65535 - local_rank} (0: any free port).",
                          hint="Pick a free port for --metrics-port, or leave it off.")
    conn = connection(bootstrap, config)
    if metrics_port is not None:
        # Under torchrun each local rank serves its own port: PORT + LOCAL_RANK (0: any free port).
        start_metrics(metrics_port + local_rank if metrics_port else 0)
    # Before torch loads: checks, tokenizer, and the loader's consumer already fetching.
    from kafeed.train.startup import start

    startup = start(options, conn)
    summary = run_training(options, conn, startup)
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 speaks for the job
        if json_out:
            print_json(summary)
        else:
            table = Table(title=f"kafeed train --model {model}", show_header=False, title_justify="left")
            for key, value in summary.items():
                table.add_row(key, str(value))
            out.print(table)
    if summary["stopped_by_signal"]:
        exit_stopped(stop, "Rerun the same command with --resume to continue from the checkpoint.")


def run_training(options: TrainOptions, conn: Any, startup: Startup) -> dict[str, Any]:
    def progress(line: str) -> None:
        console.print(line, highlight=False, markup=False, soft_wrap=True)

    if options.model == "gpt":
        from kafeed.train.gpt import train_gpt

        result, describe = train_gpt(options, conn, progress=progress, startup=startup)
    else:
        from kafeed.train.classifier import train_classifier

        result, describe = train_classifier(options, conn, progress=progress, startup=startup)
    return {
        "steps": result.steps,
        "resumed_from": result.resumed_from,
        "first_loss": None if result.first_loss is None else round(result.first_loss, 4),
        "final_loss": None if result.final_loss is None else round(result.final_loss, 4),
        "tokens_trained": result.tokens,
        "tokens_per_s": round(result.tokens_per_second, 1),
        "data_wait_share": round(result.data_wait_share, 4),
        "seconds": round(result.seconds, 2),
        "checkpoint": result.checkpoint,
        "stopped_by_signal": result.stopped_by_signal,
        **describe,
    }


def lineage(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint directory, step-*.pt or step-*.json.")],
    archive: Annotated[str | None, typer.Option(
        "--archive", help="The topic's archive table (NAMESPACE.TABLE): list the ids of the documents "
        "trained on.", show_default=False)] = None,
    warehouse: WarehouseOpt = None,
    catalog: CatalogOpt = None,
    sites: Annotated[bool, typer.Option(
        "--sites", help="Read the trained token records from the cluster and name the site record "
        "(site, topic, partition, offset) each mirrored document came from.")] = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Which offset ranges of which partitions (and how many documents) a checkpoint trained on;
    with --archive, which documents (their ids, from the table); with --sites, which site records."""
    from rich.table import Table

    from kafeed.train.lineage import archived_documents, checkpoint_lineage

    info = checkpoint_lineage(checkpoint)
    if archive is not None:
        info["archive"] = archived_documents(info, archive, catalog_settings(warehouse, catalog))
    if sites:
        from kafeed.mirror.lineage import ranges_of, site_lineage

        info["sites"] = site_lineage(connection(bootstrap, config), ranges_of(info["partitions"])).as_dict()
    if json_out:
        print_json(info)
        return
    out.print(f"[bold]{info['checkpoint']}[/bold] (step {info['step']}, topic {info['topic']}, "
              f"tokenizer {info['tokenizer']})")
    out.print(f"documents trained on: {info['documents']:,} "
              f"(+{info['documents_partly_trained']} partly)")
    table = Table("partition", "offset ranges [start, end)", "next")
    for key, entry in info["partitions"].items():
        shown = ", ".join(f"[{a}, {b})" for a, b in entry["ranges"][:6])
        if len(entry["ranges"]) > 6:
            shown += f" … ({len(entry['ranges'])} ranges)"
        table.add_row(key, shown or "-", str(entry["next"]))
    out.print(table)
    if "source_tokens" in info:
        out.print("tokens per mixture source: "
                  + ", ".join(f"{name} {count:,}" for name, count in info["source_tokens"].items()))
    if "archive" in info:
        ids = info["archive"]["document_ids"]
        out.print(f"document ids from {info['archive']['table']}: {len(ids):,}")
        for doc_id in ids:
            out.print(doc_id, markup=False, highlight=False)
    if "sites" in info:
        per_site = ", ".join(f"{site} {n:,}" for site, n in info["sites"]["sites"].items()) or "none"
        out.print(f"documents per site: {per_site} ({info['sites']['without_origin']:,} not mirrored)",
                  markup=False, highlight=False)
        for doc in info["sites"]["documents"]:
            out.print(f"{doc['id']}  {doc['site']}/{doc['topic']}[{doc['partition']}]@{doc['offset']}",
                      markup=False, highlight=False)
