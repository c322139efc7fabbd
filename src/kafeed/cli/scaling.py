"""`--workers auto --min-workers 1 --max-workers N`: the options and the supervisor run they start."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from kafeed.errors import ConfigError

if TYPE_CHECKING:
    from kafeed.scale import ScaleSettings

WorkersOpt = Annotated[str, typer.Option(
    "--workers", help="Worker processes in the group: a number, or 'auto' to follow the backlog "
    "between --min-workers and --max-workers (never more than the input's partitions).")]
MinWorkersOpt = Annotated[int, typer.Option("--min-workers", help="Fewest workers with --workers auto.")]
MaxWorkersOpt = Annotated[int, typer.Option("--max-workers", help="Most workers with --workers auto.")]
CooldownOpt = Annotated[float, typer.Option(
    "--scale-cooldown", help="Seconds between two changes of the worker count.")]
# The group stages' drain (prepare, route, infer).
UntilCaughtUpOpt = Annotated[bool, typer.Option(
    "--until-caught-up", help="Stop once every partition of the input, whichever member holds it, "
    "is committed to its end and input is idle.")]

_OWN = {"--workers": True, "--min-workers": True, "--max-workers": True, "--scale-cooldown": True,
        "--until-caught-up": False, "--json": False}


def worker_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` without the supervisor's own options: what each worker runs, with one worker."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _OWN:
            skip = _OWN[name] and "=" not in arg
            continue
        out.append(arg)
    return [sys.executable, "-m", "kafeed.cli.main", *out, "--workers", "1"]


def scale_settings(workers: str, min_workers: int, max_workers: int,
                   cooldown_s: float) -> ScaleSettings | None:
    """The supervisor's settings from the flags, or None for one worker in this process.

    Raises :class:`ConfigError` (one sentence, exit 2) for a bad ``--workers`` or bounds.
    """
    if workers != "auto":
        try:
            count = int(workers)
        except ValueError:
            count = 0
        if count < 1:
            raise ConfigError(f"--workers {workers!r} is neither a positive number nor 'auto'.")
        if count == 1:
            return None
        min_workers = max_workers = count
    from pydantic import ValidationError

    from kafeed.errors import invalid_settings
    from kafeed.scale import ScaleSettings

    try:
        return ScaleSettings(min_workers=min_workers, max_workers=max_workers, cooldown_s=cooldown_s)
    except ValidationError as exc:
        raise invalid_settings(exc, what="worker settings",
                               hint="Give --max-workers >= --min-workers.") from None


def supervise(workers: str, min_workers: int, max_workers: int, cooldown_s: float, *,
              topic: str | Sequence[str], group: str, bootstrap: str | None, config: Path | None,
              until_caught_up: bool, json_out: bool) -> bool:
    """Run the supervisor when more than one worker (or auto) was asked for; False: run in-process."""
    settings = scale_settings(workers, min_workers, max_workers, cooldown_s)
    if settings is None:
        return False
    from kafeed.cli.common import connection, console, exit_stopped, print_json
    from kafeed.scale import Supervisor
    from kafeed.signals import install

    stop = install()
    conn = connection(bootstrap, config)
    supervisor = Supervisor(worker_argv(sys.argv[1:]), topic=topic, group=group, settings=settings,
                            connection=conn,
                            say=lambda line: console.print(line, highlight=False, markup=False))
    peak = supervisor.run(stop.event, until_caught_up=until_caught_up)
    if json_out:
        print_json({"peak_workers": peak, "changes": [
            {"from": a, "to": b, "reason": r} for a, b, r in supervisor.changes]})
    exit_stopped(stop, "Re-run the same command: the group resumes from its committed offsets.")
    return True
