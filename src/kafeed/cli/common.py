"""What every command shares: connection options, output, error reporting."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from kafeed.errors import ConfigError
from kafeed.signals import StopRequest

if TYPE_CHECKING:
    from kafeed.config import ConnectionSettings

console = Console(stderr=True)
out = Console()

BootstrapOpt = Annotated[
    str | None,
    typer.Option("--bootstrap", "-b", help="Kafka bootstrap servers (host:port,...). "
                 "Env: KAFEED_BOOTSTRAP.", show_default=False),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="TOML settings file. Env: KAFEED_CONFIG.", show_default=False),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Local cluster directory [default: $KAFEED_HOME/clusters/default].",
                 show_default=False),
]


def connection(bootstrap: str | None, config: Path | None) -> ConnectionSettings:
    from kafeed.config import load_connection

    return load_connection(bootstrap=bootstrap, config_file=config)


def report_error(message: str, hint: str | None = None) -> None:
    """``error: message`` and the hint on stderr, user text printed as is (never as markup)."""
    from rich.text import Text

    console.print(Text.assemble(("error: ", "bold red"), " ".join(message.split())), soft_wrap=True)
    if hint:
        console.print(Text(" ".join(hint.split()), style="dim"), soft_wrap=True)


# How a stopped stage in a consumer group goes on (prepare, route, infer).
GROUP_RESUME = "Re-run the same command: the group resumes from its committed offsets."


def exit_stopped(stop: StopRequest, resume: str) -> None:
    """After a long command returned because of SIGINT/SIGTERM: say so, exit 130 or 143."""
    from rich.text import Text

    if stop.requested:
        console.print(Text(f"Stopped by {stop.name}: the work committed so far is kept. {resume}"))
        raise typer.Exit(stop.exit_code)


def print_json(data: Any) -> None:
    out.print_json(json.dumps(data, default=str))


def setup_logging(verbose: bool) -> None:
    level = logging.DEBUG if verbose else getattr(
        logging, os.environ.get("KAFEED_LOG_LEVEL", "WARNING").upper(), logging.WARNING)
    from rich.logging import RichHandler

    handler = RichHandler(console=console, show_path=False, show_time=False)
    lib = logging.getLogger("kafeed")
    lib.handlers[:] = [handler]
    lib.setLevel(level)
    lib.propagate = False
    # librdkafka's own chatter (connection refused while a node boots) only when verbose.
    logging.getLogger("kafeed.librdkafka").setLevel(logging.DEBUG if verbose else logging.CRITICAL)


MetricsPortOpt = Annotated[
    int | None,
    typer.Option("--metrics-port", help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics "
                 "[default: off].", show_default=False),
]


def start_metrics(port: int | None) -> None:
    """Serve the kafeed metrics when ``--metrics-port`` was given (off by default)."""
    if port is not None:
        from kafeed.telemetry.metrics import serve_metrics

        try:
            bound = serve_metrics(port)
        except OSError as exc:  # port taken or not ours to bind: a usage error, not a crash
            raise ConfigError(f"Cannot serve metrics on port {port}: {exc.strerror or exc}.",
                              hint="Pick a free port for --metrics-port, or leave it off.") from None
        console.print(f"Serving metrics on http://127.0.0.1:{bound}/metrics", highlight=False)
