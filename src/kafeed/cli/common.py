"""What every command shares: connection options, output, error reporting."""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer
from rich.console import Console

from kafeed.errors import ConfigError
from kafeed.signals import StopRequest

if TYPE_CHECKING:
    from kafeed.config import ConnectionSettings

console = Console(stderr=True)
# Piped, stdout is read by scripts: a line is never wrapped at 80 columns (a topic name of
# 100 characters is one line). In a terminal, rich wraps prose at the window's width.
out = Console(soft_wrap=not sys.stdout.isatty())

BootstrapOpt = Annotated[
    str | None,
    typer.Option("--bootstrap", "-b", help="Kafka bootstrap servers (host:port,...). "
                 "Env: KAFEED_BOOTSTRAP.", show_default=False),
]
def _kind_of(path: Path) -> str:
    """"dir", "file" (anything else that exists), "missing", or why it cannot be looked at."""
    try:
        if path.is_dir():
            return "dir"
        return "file" if path.exists() else "missing"
    except OSError as exc:
        return str(exc.strerror or exc).lower()


def existing_file(value: Path | None) -> Path | None:
    """Option callback: an input file must exist, be a file and be readable (its content is
    checked by whatever reads it)."""
    if value is not None:
        kind = _kind_of(value)
        if kind == "missing":
            raise typer.BadParameter(f"{value} does not exist.")
        if kind == "dir":
            raise typer.BadParameter(f"{value} is a directory, not a file.")
        if kind != "file":
            raise typer.BadParameter(f"{value} cannot be read: {kind}.")
        if not os.access(value, os.R_OK):
            raise typer.BadParameter(f"{value} is not readable.")
    return value


def existing_files(value: list[Path] | None) -> list[Path] | None:
    """:func:`existing_file` for an option given more than once."""
    for path in value or []:
        existing_file(path)
    return value


def existing_directory(value: Path | None) -> Path | None:
    """Option callback: an input directory must exist and be one."""
    if value is not None:
        kind = _kind_of(value)
        if kind == "missing":
            raise typer.BadParameter(f"{value} does not exist.")
        if kind != "dir":
            raise typer.BadParameter(f"{value} is not a directory." if kind == "file"
                                     else f"{value} cannot be read: {kind}.")
    return value


def directory_to_write(value: Path | None) -> Path | None:
    """Option callback: a directory kafeed creates or writes into must be one, or be creatable:
    refused at the start when it, or the nearest part of it that exists, is a file (rather
    than when the first write fails, minutes into a run)."""
    from kafeed.config import directory_problem

    problem = None if value is None else directory_problem(value)
    if problem is not None:
        raise typer.BadParameter(f"{problem}.")
    return value


ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="TOML settings file. Env: KAFEED_CONFIG.", show_default=False,
                 callback=existing_file),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
DataDirOpt = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Local cluster directory [default: $KAFEED_HOME/clusters/default].",
                 show_default=False, callback=directory_to_write),
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
                 "(0: any free port) [default: off].", show_default=False),
]


def start_metrics(port: int | None) -> None:
    """Serve the kafeed metrics when ``--metrics-port`` was given (off by default)."""
    if port is not None:
        from kafeed.telemetry.metrics import serve_metrics

        if not 0 <= port <= 65535:
            raise ConfigError(f"Invalid options: metrics_port: got {port}, should be between 0 and 65535 "
                              "(0: any free port).",
                              hint="Pick a free port for --metrics-port, or leave it off.")

        try:
            bound = serve_metrics(port)
        except OSError as exc:  # port taken or not ours to bind: a usage error, not a crash
            raise ConfigError(f"Cannot serve metrics on port {port}: {exc.strerror or exc}.",
                              hint="Pick a free port for --metrics-port, or leave it off.") from None
        console.print(f"Serving metrics on http://127.0.0.1:{bound}/metrics", highlight=False)


#: An integer option beyond a signed 64-bit number is a typo: nothing kafeed passes on
#: (to Kafka, to librdkafka, to the OS) could hold it.
MAX_INT = 2**63 - 1


class _Finite(click.ParamType):
    """A float or int option as click reads it, then refused when it is NaN, infinite, or
    an integer no 64-bit field holds: the one check every number option of every command
    gets where it enters (:func:`check_numbers`), so a new option cannot miss it."""

    def __init__(self, inner: click.ParamType) -> None:
        self.inner = inner
        self.name = inner.name

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = self.inner.convert(value, param, ctx)
        if isinstance(number, float) and not math.isfinite(number):
            self.fail(f"got {value}, should be a finite number.", param, ctx)
        if isinstance(number, int) and not -MAX_INT <= number <= MAX_INT:
            self.fail(f"got {value}, should be at most {MAX_INT:,} in size.", param, ctx)
        return number


def check_numbers(command: click.Command) -> click.Command:
    """Give every float and int parameter of ``command`` and its subcommands the
    :class:`_Finite` check; returns ``command``."""
    for param in command.params:
        if type(param.type) in (click.types.FloatParamType, click.types.IntParamType):
            param.type = _Finite(param.type)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            check_numbers(sub)
    return command


def bad_value(exc: click.BadParameter) -> tuple[str, str]:
    """A value click or an option callback refused, as kafeed prints every bad value: one
    line, ``--option: what is wrong``, and where to look (message, hint)."""
    param = exc.param
    if isinstance(param, click.Option):
        name = param.opts[0]
    elif param is not None:
        name = param.human_readable_name
    else:
        name = "value"
    command = exc.ctx.command_path if exc.ctx is not None else "kafeed"
    return f"{name}: {exc.message.rstrip('.')}.", f"See `{command} --help`."


# The value format of the input topics for one run (docs/formats.md); the settings file's
# [formats] table declares it per topic, and these flags apply to every input topic of the run.
ValueFormatOpt = Annotated[
    str | None,
    typer.Option("--value-format", help="What the input topics hold: kafeed (TrainingSample records, "
                 "the default), json or text [default: the settings file's [formats] table].",
                 show_default=False, click_type=click.Choice(["kafeed", "json", "text"])),
]
TextFieldOpt = Annotated[str | None, typer.Option(
    "--text-field", help="JSON field (a path: after.body) holding the text [default: text].",
    show_default=False)]
IdFieldOpt = Annotated[str | None, typer.Option(
    "--id-field", help="JSON field holding the id; records without one get <topic>/<partition>@<offset> "
    "[default: id].", show_default=False)]
LabelFieldOpt = Annotated[str | None, typer.Option(
    "--label-field", help="JSON field holding the label(s) [default: none].", show_default=False)]
MetaFieldOpt = Annotated[list[str] | None, typer.Option(
    "--meta-field", help="JSON field copied into metadata (repeatable).", show_default=False)]


def format_flags(value_format: str | None, text_field: str | None, id_field: str | None,
                 label_field: str | None, meta_field: list[str] | None) -> dict[str, Any]:
    """The value format flags as kafeed.formats.load_formats takes them (None: not given)."""
    return {"format": value_format, "text_field": text_field, "id_field": id_field,
            "label_field": label_field, "meta_fields": tuple(meta_field) if meta_field else None}
