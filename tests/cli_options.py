"""Every option of the command line that takes a path or a number, read from the click tree.

The bad-input property test (tests/unit/test_cli_option_values.py) feeds each of them
values a user could type by mistake. The options come from ``typer.main.get_command``, so
an option added to any command is covered without touching the test.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click

from kafeed.cli.main import main

NUMBER_TYPES = (click.types.IntParamType, click.types.FloatParamType)


@dataclass(frozen=True)
class Slot:
    """One option (or argument) of one command: ``kafeed PATH... --opt VALUE``."""

    command: tuple[str, ...]
    name: str
    flag: str | None  # None for an argument
    kind: str  # "number" or "path"

    @property
    def id(self) -> str:
        return f"{' '.join(self.command)} {self.flag or self.name}"


def commands() -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every runnable command: leaves, and groups that run without a subcommand."""
    import typer

    from kafeed.cli.main import app

    def walk(cmd: click.Command, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
        if isinstance(cmd, click.Group):
            if path and cmd.invoke_without_command:
                yield path, cmd
            for name, sub in sorted(cmd.commands.items()):
                yield from walk(sub, (*path, name))
        else:
            yield path, cmd

    yield from walk(typer.main.get_command(app), ())


def _kind(param: click.Parameter) -> str | None:
    if isinstance(param.type, NUMBER_TYPES):
        return "number"
    if isinstance(param.type, click.Path):
        return "path"
    return None


def slots() -> list[Slot]:
    out = []
    for path, cmd in commands():
        for param in cmd.params:
            kind = _kind(param)
            if kind is None:
                continue
            flag = None if isinstance(param, click.Argument) else param.opts[0]
            out.append(Slot(path, str(param.name), flag, kind))
    return out


def base_args(path: tuple[str, ...], cmd: click.Command, tmp: Path, closed: str, *,
              skip: str) -> list[str]:
    """The command with what it requires filled in, its cluster an address nobody listens on,
    and every place it could write under ``tmp``; ``skip`` is the option under test."""
    fill = {
        "rules": str(tmp / "routes_ok.toml"), "run_dir": str(tmp / "run"), "checkpoint": str(tmp / "ck"),
        "gpus": "8", "tokens_per_gpu_s": "1000", "bytes_per_token": "2", "name": "t", "kind": "k",
        "keys": "key-1", "role": "ingest", "principal": "User:x", "sql": "SELECT 1",
        "config": str(tmp / "sites.toml"),  # a required --config (kafeed mirror): a missing file
    }
    where = {
        "bootstrap": closed, "warehouse": str(tmp / "wh"), "data_dir": str(tmp / "cluster"),
        "checkpoint_dir": str(tmp / "ck"), "runs_dir": str(tmp / "runs"), "kafka_home": str(tmp / "kh"),
    }
    args: list[str] = list(path)
    for param in cmd.params:
        if param.name == skip or param.name is None:
            continue
        if isinstance(param, click.Argument):
            if param.required:
                args.append(fill[param.name])
            continue
        if param.required or param.name in where:
            args += [param.opts[0], fill.get(param.name) or where[param.name]]
        elif param.name == "once":  # `monitor`: one poll, then exit
            args.append(param.opts[0])
    return args


def prepare_tmp(tmp: Path) -> None:
    """The files ``base_args`` names."""
    (tmp / "routes_ok.toml").write_text('[[rule]]\nto = "a"\n')
    (tmp / "run").mkdir(exist_ok=True)
    (tmp / "ck").mkdir(exist_ok=True)
    (tmp / "cluster").mkdir(exist_ok=True)


class Hang(BaseException):
    """A command that did not return within its time: it reached work a bad value should stop.
    Not an ``Exception``, so that the CLI's error boundary does not turn it into a message."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(_sig: int, _frame: FrameType | None) -> None:
        raise Hang(f"no answer within {seconds:g}s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_cli(args: list[str], *, seconds: float = 20.0) -> tuple[int, str]:
    """``kafeed ARGS`` in this process: its exit code and what it printed (both streams)."""
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer), time_limit(seconds):
        code = main(args)
    return code, buffer.getvalue()


def isolated_env(tmp: Path) -> dict[str, str]:
    """No java or mvn on PATH (a broker never starts), kafeed's home under ``tmp``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFEED_")}
    (tmp / "bin").mkdir(exist_ok=True)
    env.update(PATH=str(tmp / "bin"), KAFEED_HOME=str(tmp / "home"), KAFEED_KAFKA_HOME=str(tmp / "kh"))
    return env
