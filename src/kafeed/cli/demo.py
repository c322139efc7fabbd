"""`kafeed demo`: the main job end to end on a local cluster."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kafeed.cli.common import (
    DataDirOpt,
    JsonOpt,
    console,
    directory_to_write,
    existing_files,
    out,
    print_json,
)

if TYPE_CHECKING:
    from kafeed.demo import DemoOptions


def demo(
    data_dir: DataDirOpt = None,
    port: Annotated[int | None, typer.Option(help="Client port when the local cluster is first "
                                             "created [default: 9092].", show_default=False)] = None,
    data: Annotated[list[Path] | None, typer.Option(help="Your own files (txt, jsonl, csv, parquet) "
                                                    "instead of the bundled corpus; repeatable.",
                                                    show_default=False, callback=existing_files)] = None,
    steps: Annotated[int, typer.Option(help="Training steps.")] = 300,
    runs_dir: Annotated[Path, typer.Option(help="Where each run's checkpoints and metrics go.",
                                           callback=directory_to_write)] = Path(
        "runs/demo"),
    sites: Annotated[bool, typer.Option(
        "--sites", help="Two site clusters mirrored into the training cluster (MirrorMaker 2), a "
        "mixture weighting the sites, lineage back to the site records (docs/federation.md).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Start (or reuse) a local broker; ingest, prepare and train on a corpus; summarize."""
    from pydantic import ValidationError
    from rich.markup import escape

    from kafeed.demo import DemoOptions, run_demo
    from kafeed.errors import invalid_settings

    try:
        options = DemoOptions(data_dir=data_dir, port=port, data=tuple(data or ()), steps=steps,
                              runs_dir=runs_dir)
    except ValidationError as exc:
        raise invalid_settings(exc, what="demo options") from None
    if sites:
        _sites_demo(options, json_out)
        return
    summary = run_demo(options, say=lambda line: console.print(line, highlight=False, markup=False))
    if json_out:
        print_json(summary)
        return
    s = summary
    lines = [
        "[bold]kafeed demo: summary[/bold]",
        f"  cluster            {s['bootstrap']}",
        f"  ingest             {s['records_ingested']:,} records "
        f"({s['ingest_dead_lettered']:,} dead-lettered)",
        f"  prepare            {s['prepare_records_in']:,} in = {s['documents_out']:,} out + "
        f"{s['filtered']:,} filtered + {s['duplicates']:,} duplicates + "
        f"{s['prepare_dead_lettered']:,} dead-lettered "
        + ("[green](balanced)[/green]" if s["prepare_balanced"] else "[red](UNBALANCED)[/red]"),
        f"  filtered by        {', '.join(f'{k} {v:,}' for k, v in s['filtered_by'].items()) or '-'}",
        f"  tokens             {s['tokens_out']:,} prepared, {s['tokens_trained']:,} trained on",
        f"  training           {s['steps']} steps, loss {s['first_loss']} -> {s['final_loss']}, "
        f"{s['tokens_per_s']:,.0f} tokens/s, data-wait {s['data_wait_share']:.1%}",
        f"  checkpoint         {escape(str(s['checkpoint']))}",
        f"  lineage            {s['lineage_documents']:,} documents trained on:",
        *(f"    {k}: {v}" for k, v in s["lineage_partitions"].items()),
        f"  took               {s['seconds']}s",
        "",
        f"Charts of this run:  kafeed report {escape(str(s['run_dir']))}",
        f"Lineage in full:     kafeed lineage {escape(str(s['checkpoint']))}",
        "Stop the cluster:    kafeed broker stop"
        + (f" --data-dir {escape(str(data_dir))}" if data_dir else ""),
    ]
    for line in lines:
        out.print(line, highlight=False, soft_wrap=True)


def _sites_demo(options: DemoOptions, json_out: bool) -> None:
    from kafeed.demo_sites import run_sites_demo

    summary = run_sites_demo(options, say=lambda line: console.print(line, highlight=False, markup=False))
    if json_out:
        print_json(summary)
        return
    s = summary
    for line in [
        "kafeed demo --sites: summary",
        f"  training cluster   {s['bootstrap']}",
        *(f"  {name:<18} {bootstrap}: {s['ingested'][name]:,} records ingested, "
          f"{s['documents_out'][name]:,} documents prepared" for name, bootstrap in s["sites"].items()),
        f"  mirrored           up to {s['mirrored_offsets']:,} offsets, exactly once",
        f"  training           {s['steps']} steps on "
        + ", ".join(f"{t} {w:.0%}" for t, w in s["mix"].items()) + f", final loss {s['final_loss']}",
        f"  lineage            {s['lineage_documents']:,} documents: "
        + ", ".join(f"{site} {n:,}" for site, n in s["documents_per_site"].items()),
        f"  took               {s['seconds']}s",
        "",
        f"Site records in full: kafeed lineage {s['checkpoint']} --sites -b {s['bootstrap']}",
    ]:
        out.print(line, highlight=False, markup=False, soft_wrap=True)
