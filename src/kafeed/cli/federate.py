"""`kafeed federate`: federated training rounds (coordinator, sites, their topics and ACLs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kafeed.cli.common import (
    JsonOpt,
    MetricsPortOpt,
    console,
    directory_to_write,
    exit_stopped,
    out,
    print_json,
    start_metrics,
)
from kafeed.signals import install

app = typer.Typer(help="Federated training: sites train where their data is; updates meet in the "
                  "training cluster once each (docs/federated.md).", no_args_is_help=True,
                  rich_markup_mode=None)

FederateConfigOpt = Annotated[Path, typer.Option(
    "--config", help="The job's TOML file: [training], [[sites]], rounds, model, quorum, "
    "deadline (docs/federated.md).", show_default=False)]
RESUME = "Run it again: it resumes from what the training cluster and the site's ledger hold."


def _line(event: str, info: dict[str, Any]) -> None:
    from rich.text import Text

    fields = " ".join(f"{k}={v}" for k, v in info.items())
    console.print(Text(f"{event:<9} {fields}"), soft_wrap=True, highlight=False)


@app.command()
def setup(
    config: FederateConfigOpt,
    site_user: Annotated[list[str] | None, typer.Option(
        "--site-user", help="SITE=USER: grant SCRAM user USER the site's role on the training "
        "cluster (write its own update topic, read the global model); repeatable.",
        show_default=False)] = None,
    json_out: JsonOpt = False,
) -> None:
    """Create the job's topics on the training cluster, and grant the sites' roles."""
    from rich.text import Text

    from kafeed.errors import ConfigError
    from kafeed.federate.config import load_federation
    from kafeed.federate.setup import create_topics, grant_sites

    settings = load_federation(config)
    users: dict[str, str] = {}
    for pair in site_user or []:
        site, sep, user = pair.partition("=")
        if not sep or not user:
            raise ConfigError(f"--site-user {pair!r} is not SITE=USER.",
                              hint="For example --site-user site-a=alice.")
        settings.site(site)
        users[site] = user
    report = create_topics(settings)
    granted = grant_sites(settings, users) if users else []
    if json_out:
        print_json({"created": report.created, "existing": report.existing,
                    "granted": [b.describe() for b in granted]})
        return
    out.print(Text(f"Topics of job {settings.job}: {len(report.created)} created, "
                   f"{len(report.existing)} there already ({', '.join(report.created + report.existing)})."))
    for binding in granted:
        out.print(Text(f"  granted {binding.describe()}"))


@app.command()
def coordinator(config: FederateConfigOpt, json_out: JsonOpt = False,
                metrics_port: MetricsPortOpt = None) -> None:
    """Run the rounds on the training cluster until the last global version is published."""
    from kafeed.federate.config import load_federation
    from kafeed.federate.coordinator import Coordinator

    stop = install()
    settings = load_federation(config)
    start_metrics(metrics_port)
    summary = Coordinator(settings, progress=None if json_out else _line, stop=stop.event).run()
    if json_out:
        print_json(summary.as_dict())
    else:
        _coordinator_summary(summary.as_dict())
    exit_stopped(stop, RESUME)


def _coordinator_summary(s: dict[str, Any]) -> None:
    from rich.table import Table
    from rich.text import Text

    table = Table("round", "sites", "samples", "late folded", "dropped", "duplicates", "rejected",
                  "seconds", title=f"job {s['job']}")
    for r in s["rounds"]:
        c = r["counts"]
        table.add_row(str(r["round"]), ", ".join(x["site"] for x in r["contributors"]) or "-",
                      f"{r['samples']:,}",
                      str(c["late_folded"]), str(c["late_dropped"]), str(c["duplicate"]), str(c["rejected"]),
                      f"{r['round_seconds']:.1f}")
    out.print(table)
    resumed = "" if s["resumed_at"] is None else f" (resumed at version {s['resumed_at']})"
    out.print(Text(f"Global model: version {s['final_version']}{resumed}."))


@app.command()
def site(config: FederateConfigOpt,
         name: Annotated[str, typer.Option("--site", help="This site's name in the config.",
                                           show_default=False)],
         json_out: JsonOpt = False, metrics_port: MetricsPortOpt = None) -> None:
    """Train this site's updates, round after round, until the last global version."""
    from rich.text import Text

    from kafeed.federate.config import load_federation
    from kafeed.federate.site import SiteRunner

    stop = install()
    settings = load_federation(config)
    settings.site(name)
    start_metrics(metrics_port)
    summary = SiteRunner(settings, name, progress=None if json_out else _line, stop=stop.event).run()
    if json_out:
        print_json(summary.as_dict())
    else:
        out.print(Text(f"Site {name}: trained rounds {summary.rounds_trained or 'none'}, "
                       f"{summary.samples:,} windows; sent again after a restart: "
                       f"{summary.resent or 'none'}; final global version {summary.final_version}."))
    exit_stopped(stop, RESUME)


@app.command()
def demo(
    work_dir: Annotated[Path | None, typer.Option(
        "--work-dir", help="Where the brokers, the job file, the site logs and ledgers go "
        "[default: a new temporary directory].", show_default=False, callback=directory_to_write)] = None,
    rounds: Annotated[int, typer.Option("--rounds", min=1, max=50, help="Rounds to run.")] = 3,
    secure: Annotated[bool, typer.Option("--secure", help="Secure aggregation: the coordinator "
                                         "sees only the sum of the masked updates.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Three sites and a coordinator on one machine: two local brokers, the bundled corpus split
    over the sites, the rounds, and the final model's lineage."""
    import tempfile

    from rich.text import Text

    from kafeed.federate.demo import run_demo

    work = work_dir or Path(tempfile.mkdtemp(prefix="kafeed-federated-"))
    work.mkdir(parents=True, exist_ok=True)
    say = (lambda text: None) if json_out else (lambda text: console.print(Text(text)))
    result = run_demo(work, rounds=rounds, secure=secure, say=say,
                      progress=(lambda e, i: None) if json_out else _line)
    if json_out:
        print_json(result)
        return
    _coordinator_summary(result["summary"])
    out.print(Text(f"Lineage of version {result['lineage']['version']} (from the sites' ledgers):"))
    for r in result["lineage"]["rounds"]:
        for s in r["sites"]:
            parts = (s["ledger"] or {}).get("partitions", {})
            where = "; ".join(f"{k} [{p['start']}, {p['next']})" for k, p in parts.items())
            windows = s["ledger"]["samples"] if s["ledger"] else s["samples"]
            out.print(Text(f"  round {r['round']}: {s['site']} (its round {s['round']}, "
                           f"{windows} windows) trained on {where}"))
    out.print(Text(f"Job file, site logs and ledgers: {work}"))
