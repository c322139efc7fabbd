"""`kafeed train` and `kafeed lineage`."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

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
from kafeed.train.defaults import TRAIN_OPTIONS

if TYPE_CHECKING:
    from kafeed.train.options import TrainOptions
    from kafeed.train.startup import Startup


def _run(options: dict[str, Any], *, value_format: str | None, text_field: str | None,
         id_field: str | None, label_field: str | None, meta_field: list[str] | None, bootstrap: str | None,
         config: Path | None, json_out: bool, metrics_port: int | None) -> None:
    """Train a reference model on kafeed's loader, with exact checkpoints and lineage."""
    from rich.table import Table

    # First: a SIGTERM while torch imports (seconds) is a stop request, not a kill.
    stop = install()
    from pydantic import ValidationError

    from kafeed.formats import load_formats
    from kafeed.train.options import TrainOptions

    try:
        # topic and lr: None lets the model's own default apply; mix is parsed by the model
        formats = load_formats(config, **format_flags(value_format, text_field, id_field, label_field,
                                                      meta_field))
        validated = TrainOptions.model_validate({**options, "formats": formats})
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

    startup = start(validated, conn)
    summary = run_training(validated, conn, startup)
    if os.environ.get("RANK", "0") == "0":  # under torchrun, rank 0 speaks for the job
        if json_out:
            print_json(summary)
        else:
            table = Table(title=f"kafeed train --model {validated.model}", show_header=False,
                          title_justify="left")
            for key, value in summary.items():
                table.add_row(key, str(value))
            out.print(table)
    if summary["stopped_by_signal"]:
        exit_stopped(stop, "Rerun the same command with --resume to continue from the checkpoint.")


def _command() -> Callable[..., None]:
    """``kafeed train``: one option per command-line entry of TRAIN_OPTIONS (its type, default
    and help; a directory is checked as it is read), then the connection and output options."""
    params = []
    for name, option in TRAIN_OPTIONS.items():
        if not option.cli:
            continue
        cli_type = option.cli_type if option.by_model is None else option.cli_type | None
        directory = cli_type in (Path, Path | None)
        info = typer.Option(help=option.help, show_default=option.show_default,
                            callback=directory_to_write if directory else None)
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                        annotation=Annotated[cli_type, info],
                                        default=None if option.by_model is not None else option.default))
    shared = {"value_format": (ValueFormatOpt, None), "text_field": (TextFieldOpt, None),
              "id_field": (IdFieldOpt, None), "label_field": (LabelFieldOpt, None),
              "meta_field": (MetaFieldOpt, None), "bootstrap": (BootstrapOpt, None),
              "config": (ConfigOpt, None), "json_out": (JsonOpt, False),
              "metrics_port": (MetricsPortOpt, None)}
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
               for name, (annotation, default) in shared.items()]

    def train(**values: Any) -> None:
        _run({name: values.pop(name) for name in list(values) if name in TRAIN_OPTIONS}, **values)

    train.__doc__ = _run.__doc__
    train.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
    train.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
    return train


train = _command()


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


def _shown_ranges(ranges: list[list[int]]) -> str:
    shown = ", ".join(f"[{a}, {b})" for a, b in ranges[:6])
    if len(ranges) > 6:
        shown += f" … ({len(ranges)} ranges)"
    return shown or "-"


def lineage(
    checkpoint: Annotated[Path, typer.Argument(
        help="A checkpoint directory, step-*.pt or step-*.json of kafeed train; a Hugging Face "
             "checkpoint-N folder of KafeedTrainer; a Lightning .ckpt of KafeedDataModule; a "
             "federated job's TOML file (its global model, see --version).")],
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
    version: Annotated[int | None, typer.Option(
        "--version", help="Of a federated job: the global version to follow [default: the newest].",
        show_default=False)] = None,
    ledger: Annotated[list[str] | None, typer.Option(
        "--ledger", help="Of a federated job: SITE=DIR, where that site's state (its ledger) is, when "
        "not under the job's state_dir; repeatable.", show_default=False)] = None,
    json_out: JsonOpt = False,
) -> None:
    """Which offset ranges of which partitions (and how many documents) a checkpoint trained on;
    with --archive, which documents (their ids, from the table); with --sites, which site records.
    Of a federated job's global model: the rounds and sites it holds, and each update's data
    offsets from the sites' ledgers that can be read here."""
    from rich.table import Table

    from kafeed.train.lineage import archived_documents, checkpoint_lineage

    if checkpoint.suffix == ".toml":
        _federated_lineage(checkpoint, version, ledger or [], json_out)
        return

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
        table.add_row(key, _shown_ranges(entry["ranges"]), str(entry["next"]))
    out.print(table)
    if "ranks" in info:
        ranks = Table("rank", "partition", "offset ranges [start, end)")
        for rank in info["ranks"]:
            for key, entry in rank["partitions"].items():
                ranks.add_row(str(rank["rank"]), key, _shown_ranges(entry["ranges"]))
        out.print(f"every rank's share ({len(info['ranks'])} ranks):")
        out.print(ranks)
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


def _federated_lineage(job: Path, version: int | None, ledgers: list[str], json_out: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    from kafeed.errors import ConfigError
    from kafeed.federate.config import load_federation
    from kafeed.federate.lineage import global_lineage

    folders = {}
    for pair in ledgers:
        site, sep, folder = pair.partition("=")
        if not sep or not folder:
            raise ConfigError(f"--ledger {pair!r} is not SITE=DIR.",
                              hint="For example --ledger site-a=/srv/fl/site-a.")
        folders[site] = Path(folder)
    settings = load_federation(job)
    for site in folders:
        settings.site(site)
    info = global_lineage(settings, version, folders)
    if json_out:
        print_json(info)
        return
    out.print(Text(f"job {info['job']}: global version {info['version']} (newest {info['newest']})"))
    table = Table("round", "site", "of round", "samples", "data offsets [start, end) at the site")
    for r in info["rounds"]:
        for site in r["sites"]:
            parts = site["ledger"]["partitions"] if site["ledger"] is not None else None
            where = "ledger not readable here" if parts is None else "; ".join(
                f"{key} {_shown_ranges(part['ranges'])}" for key, part in parts.items())
            table.add_row(str(r["round"]), site["site"], str(site["round"]), f"{site['samples']:,}",
                          Text(where))
    out.print(table)
