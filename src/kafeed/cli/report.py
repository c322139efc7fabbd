"""`kafeed report RUN_DIR`: a run's recorded metrics as PNG charts and one HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafeed.cli.common import JsonOpt, directory_to_write, existing_directory, out, print_json


def report(
    run_dir: Annotated[Path, typer.Argument(help="Directory holding metrics.jsonl.",
                                            callback=existing_directory)],
    out_dir: Annotated[Path | None, typer.Option(
        "--out", help="Where to write the PNGs and report.html [default: RUN_DIR].",
        show_default=False, callback=directory_to_write)] = None,
    json_out: JsonOpt = False,
) -> None:
    """Render RUN_DIR/metrics.jsonl: throughput, data wait, lag, loss, latency; and the
    held-out evaluation of each checkpoint from RUN_DIR/evaluations.jsonl."""
    from kafeed.monitor.report import render_report

    result = render_report(run_dir, out_dir=out_dir)
    if json_out:
        print_json({"html": str(result.html), "charts": [str(p) for p in result.charts],
                    "missing": result.missing,
                    "evaluations": [{k: e.get(k) for k in ("step", "loss", "perplexity", "accuracy",
                                                           "train_loss", "held_out_records")}
                                    for e in result.evaluations]})
        return
    out.print(f"Wrote {result.html} with {len(result.charts)} chart(s)", highlight=False, markup=False)
    if result.missing:
        out.print(f"No data for: {', '.join(result.missing)}", style="dim", highlight=False, markup=False)
