"""The `kafeed` command tree: one sub-app per command group (run through kafeed.cli.main)."""

from __future__ import annotations

from typing import Annotated

import typer

from kafeed import __version__
from kafeed.cli import (
    acl,
    archive,
    broker,
    demo,
    federate,
    infer,
    mirror,
    monitor,
    plan,
    prepare,
    report,
    route,
    tasks,
    topic,
    train,
)
from kafeed.cli.common import setup_logging
from kafeed.cli.ingest import ingest_command

# Help and usage errors are plain click text: typer's rich path (rich.markdown, and its
# HTML escaping of every default, which loads it even with rich_markup_mode=None) would
# double the time of every `--help`. kafeed's own output still uses rich.
if hasattr(typer, "core") and hasattr(typer.core, "HAS_RICH"):
    typer.core.HAS_RICH = False

app = typer.Typer(
    name="kafeed",
    help="Feed a training job from Apache Kafka.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    rich_markup_mode=None,
)
app.add_typer(broker.app, name="broker")
app.add_typer(topic.app, name="topic")
app.add_typer(tasks.app, name="tasks")
app.add_typer(acl.app, name="acl")
app.add_typer(archive.app, name="archive")
app.add_typer(mirror.app, name="mirror")
app.add_typer(federate.app, name="federate")
app.command()(demo.demo)
app.command("ingest")(ingest_command)
app.command("prepare")(prepare.prepare)
app.command("route")(route.route)
app.command("infer")(infer.infer)
app.command("monitor")(monitor.monitor)
app.command("report")(report.report)
app.command("train")(train.train)
app.command("lineage")(train.lineage)
app.command("plan")(plan.plan)
app.command("replay")(archive.replay)


def version_line() -> str:
    """kafeed's version and those of what it runs on: Kafka, librdkafka, PyTorch."""
    from kafeed.choices import KAFKA_VERSION
    from kafeed.extras import installed_version
    from kafeed.kafka.types import client_version, libversion

    torch = installed_version("torch") or "not installed (pip install 'kafeed[torch]')"
    return (f"kafeed {__version__} (Kafka {KAFKA_VERSION}, librdkafka {libversion()[0]}, "
            f"confluent-kafka {client_version}, torch {torch})")


def _version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show the traceback of an error "
                                        "(env: KAFEED_DEBUG=1).")] = False,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version.")] = False,
) -> None:
    setup_logging(verbose)


def usage_error_types() -> tuple[type[BaseException], ...]:
    """click's exceptions: typer vendors its own copy of click in recent versions."""
    types: list[type[BaseException]] = [typer.TyperException] if hasattr(typer, "TyperException") else []
    try:
        import click

        types.append(click.ClickException)
    except ImportError:  # pragma: no cover - typer without a separate click
        pass
    return tuple(types)
