"""`kafeed mirror`: site clusters mirrored into the training cluster with MirrorMaker 2."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from kafeed.choices import JitMode
from kafeed.cli.common import JsonOpt, MetricsPortOpt, console, exit_stopped, out, print_json, start_metrics
from kafeed.signals import install

app = typer.Typer(help="Mirror site clusters into the training cluster (MirrorMaker 2, exactly once).",
                  no_args_is_help=True, rich_markup_mode=None)

MirrorConfigOpt = Annotated[Path, typer.Option(
    "--config", help="The mirror's TOML file: [target] and one [[sites]] table per site "
    "(docs/federation.md).", show_default=False)]
SiteOpt = Annotated[list[str] | None, typer.Option(
    "--site", help="Only this site (repeatable) [default: every site in the config].", show_default=False)]

RESUME = "Run it again: MirrorMaker resumes from the offsets committed in the target."


@app.command()
def run(
    config: MirrorConfigOpt,
    site: SiteOpt = None,
    until_caught_up: Annotated[bool, typer.Option(
        "--until-caught-up", help="Exit once the target holds every mirrored partition up to "
        "its end at the site as of the start.")] = False,
    jit: Annotated[JitMode, typer.Option(
        help="full: the JVM's tiered JIT and G1, for a mirror that runs for hours; quick: the "
             "JIT's first tier and the serial collector, for a short run (tests, demos).")] = "full",
    json_out: JsonOpt = False,
    metrics_port: MetricsPortOpt = None,
) -> None:
    """Run a MirrorMaker node until SIGTERM/Ctrl-C (or drained); several nodes share the work."""
    from rich.text import Text

    from kafeed.mirror import load_mirror_settings, run_mirror

    stop = install()
    settings = load_mirror_settings(config).only(site)
    start_metrics(metrics_port)
    aliases = ", ".join(s.alias for s in settings.sites)
    with console.status(f"Mirroring {aliases} into {settings.target.alias}..."):
        result = run_mirror(settings, until_caught_up=until_caught_up, stop_event=stop.event, jit=jit)
    if json_out:
        print_json({"sites": [s.alias for s in settings.sites], "target": settings.target.alias,
                    "caught_up": result.caught_up,
                    "ends": {alias: {f"{t}[{p}]": end for (t, p), end in sorted(ends.items())}
                             for alias, ends in result.ends.items()}})
    elif result.caught_up:
        out.print(Text(f"Caught up: {settings.target.alias} holds every record of {aliases} up to "
                       f"the ends at the start ({result.records:,} offsets)."))
    exit_stopped(stop, RESUME)


@app.command()
def status(config: MirrorConfigOpt, site: SiteOpt = None, json_out: JsonOpt = False) -> None:
    """Per site: reachable, the source task's state, records behind, and the last error."""
    from rich.table import Table
    from rich.text import Text

    from kafeed.mirror import load_mirror_settings, site_progress

    settings = load_mirror_settings(config).only(site)
    target = settings.target.connection()
    rows = [site_progress(s.alias, s.connection(), s.topics, target) for s in settings.sites]
    if json_out:
        print_json({"target": settings.target.alias, "sites": [r.as_dict() for r in rows]})
        return
    table = Table("site", "reachable", "state", "partitions", "behind (records)", "last error")
    for r in rows:
        cells = [r.alias, "yes" if r.reachable else "no", r.state or "-", str(len(r.partitions)),
                 f"{r.behind:,}" if r.reachable else "-", r.last_error or ""]
        table.add_row(*(Text(c) for c in cells))
    out.print(table)
