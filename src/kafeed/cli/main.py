"""The `kafeed` command: one sub-app per command group."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kafeed import __version__
from kafeed.cli import broker, demo, monitor, prepare, report, topic, train
from kafeed.cli.common import console, setup_logging
from kafeed.cli.ingest import ingest_command
from kafeed.errors import ConfigError, KafeedError

app = typer.Typer(
    name="kafeed",
    help="Feed a training job from Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(broker.app, name="broker")
app.add_typer(topic.app, name="topic")
app.command()(demo.demo)
app.command("ingest")(ingest_command)
app.command("prepare")(prepare.prepare)
app.command("monitor")(monitor.monitor)
app.command("report")(report.report)
app.command("train")(train.train)
app.command("lineage")(train.lineage)


def _version(value: bool) -> None:
    if value:
        print(f"kafeed {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version.")] = False,
) -> None:
    setup_logging(verbose)


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the app, turning kafeed errors into one clear sentence."""
    try:
        app(args=argv, standalone_mode=False)
    except KafeedError as exc:
        console.print(f"[bold red]error:[/bold red] {exc.message}", highlight=False)
        if exc.hint:
            console.print(f"[dim]{exc.hint}[/dim]", highlight=False)
        return 2 if isinstance(exc, ConfigError) else 1
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except typer.Abort:
        console.print("Aborted.")
        return 130
    except KeyboardInterrupt:
        console.print("Interrupted.")
        return 130
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            return exc.exit_code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())
