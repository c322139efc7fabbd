"""`kafeed train` and `kafeed lineage`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from kafeed.choices import ModelKind
from kafeed.cli.common import (
    BootstrapOpt,
    ConfigOpt,
    JsonOpt,
    MetricsPortOpt,
    connection,
    console,
    out,
    print_json,
    start_metrics,
)
from kafeed.train.options import TrainOptions


def train(
    model: Annotated[ModelKind, typer.Option(help="gpt (from scratch) or classifier (fine-tune).")] = "gpt",
    topic: Annotated[str | None, typer.Option(help="Input topic [default: tokens for gpt, raw for "
                                              "classifier].", show_default=False)] = None,
    steps: Annotated[int, typer.Option(help="Optimizer steps (fewer if a bounded topic ends).")] = 300,
    batch_size: Annotated[int, typer.Option(help="Windows (gpt) or samples per step.")] = 8,
    seq_len: Annotated[int, typer.Option(help="Tokens per window (gpt).")] = 128,
    lr: Annotated[float | None, typer.Option(help="Peak learning rate [default: 3e-3 gpt, 5e-5 "
                                             "classifier].", show_default=False)] = None,
    d_model: Annotated[int, typer.Option(help="GPT width.")] = 128,
    n_layers: Annotated[int, typer.Option(help="GPT layers.")] = 2,
    n_heads: Annotated[int, typer.Option(help="GPT attention heads.")] = 4,
    tokenizer: Annotated[str, typer.Option(help="The tokenizer prepare used: bytes, minilm or a "
                                           "tokenizer.json path.")] = "bytes",
    num_workers: Annotated[int, typer.Option(help="DataLoader workers per rank.")] = 0,
    shuffle_buffer: Annotated[int, typer.Option(help="Records in the shuffle buffer (0: off).")] = 256,
    seed: Annotated[int, typer.Option(help="Seed of model init, shuffle and dropout.")] = 0,
    stream: Annotated[bool, typer.Option(help="Keep reading new records (no end).")] = False,
    checkpoint_dir: Annotated[Path, typer.Option(help="Where checkpoints go.")] = Path("checkpoints"),
    checkpoint_every: Annotated[int, typer.Option(help="Steps between checkpoints (0: only at the "
                                                  "end).")] = 50,
    keep: Annotated[int, typer.Option(help="Checkpoints kept.")] = 3,
    resume: Annotated[bool, typer.Option(help="Continue from the newest valid checkpoint.")] = False,
    group: Annotated[str, typer.Option(help="Consumer group the offsets are mirrored to.")] = "kafeed-train",
    run_dir: Annotated[Path | None, typer.Option(help="Record metrics.jsonl here for `kafeed report`.",
                                                 show_default=False)] = None,
    log_every: Annotated[int, typer.Option(help="Steps between progress lines.")] = 10,
    num_labels: Annotated[int, typer.Option(help="Classes (classifier).")] = 2,
    pretrained: Annotated[bool, typer.Option(help="Start the classifier from the bundled MiniLM "
                                             "weights when installed.")] = True,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    metrics_port: MetricsPortOpt = None,
) -> None:
    """Train a reference model on kafeed's loader, with exact checkpoints and lineage."""
    default_lr = 3e-3 if model == "gpt" else 5e-5
    options = TrainOptions(
        model=model, topic=topic or ("tokens" if model == "gpt" else "raw"), steps=steps,
        batch_size=batch_size, seq_len=seq_len, lr=lr or default_lr, d_model=d_model,
        n_layers=n_layers, n_heads=n_heads, tokenizer=tokenizer, num_workers=num_workers,
        shuffle_buffer=shuffle_buffer, seed=seed, stream=stream, checkpoint_dir=checkpoint_dir,
        checkpoint_every=checkpoint_every, keep=keep, resume=resume, group=group, run_dir=run_dir,
        log_every=log_every, num_labels=num_labels, pretrained=pretrained,
    )
    conn = connection(bootstrap, config)
    if metrics_port is not None:
        # Under torchrun each local rank serves its own port: PORT + LOCAL_RANK (0: any free port).
        start_metrics(metrics_port + int(os.environ.get("LOCAL_RANK", "0")) if metrics_port else 0)
    summary = run_training(options, conn)
    if os.environ.get("RANK", "0") != "0":  # under torchrun, rank 0 speaks for the job
        return
    if json_out:
        print_json(summary)
    else:
        table = Table(title=f"kafeed train --model {model}", show_header=False, title_justify="left")
        for key, value in summary.items():
            table.add_row(key, str(value))
        out.print(table)


def run_training(options: TrainOptions, conn: Any) -> dict[str, Any]:
    def progress(line: str) -> None:
        console.print(line, highlight=False)

    if options.model == "gpt":
        from kafeed.train.gpt import train_gpt

        result, describe = train_gpt(options, conn, progress=progress)
    else:
        from kafeed.train.classifier import train_classifier

        result, describe = train_classifier(options, conn, progress=progress)
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
    json_out: JsonOpt = False,
) -> None:
    """Which offset ranges of which partitions (and how many documents) a checkpoint trained on."""
    from kafeed.train.lineage import checkpoint_lineage

    info = checkpoint_lineage(checkpoint)
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
