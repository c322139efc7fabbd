"""`kafeed demo`: the main job end to end on a local cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafeed.cli.common import DataDirOpt, JsonOpt, console, out, print_json
from kafeed.demo import DemoOptions, run_demo


def demo(
    data_dir: DataDirOpt = None,
    port: Annotated[int | None, typer.Option(help="Client port when the demo cluster is "
                                             "first created [default: 9092].",
                                             show_default=False)] = None,
    records: Annotated[int, typer.Option(help="Records to produce and consume.")] = 5000,
    data: Annotated[Path | None, typer.Option(help="Text file to use instead of the bundled "
                                              "corpus.", show_default=False)] = None,
    json_out: JsonOpt = False,
) -> None:
    """Start (or reuse) a local broker and run the pipeline end to end."""
    summary = run_demo(DemoOptions(data_dir=data_dir, port=port, records=records, data=data),
                       console=console)
    if json_out:
        print_json(summary)
    else:
        out.print("[bold]kafeed demo summary[/bold]")
        for key, value in summary.items():
            out.print(f"  {key:<22} {value}")
