"""The `kafeed` entry point: the one error boundary between kafeed and its user.

This module imports nothing heavy at its top: the command tree (typer, rich, every command
group, about half a second of imports) loads inside :func:`main`, where a Ctrl-C that
arrives while it is still importing ends as "Interrupted." and exit 130, not as a
``KeyboardInterrupt`` traceback out of some module's import.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

from kafeed.errors import ConfigError, KafeedError


def main(argv: list[str] | None = None) -> int:
    """Run ``kafeed ARGV``; returns the exit code.

    Exit codes (the README's table): 0 done, 1 runtime failure, 2 usage or configuration
    error, 130 interrupted by SIGINT, 143 stopped by SIGTERM. No traceback reaches the user
    unless ``--debug`` (or ``KAFEED_DEBUG=1``) asks for it.
    """
    args = sys.argv[1:] if argv is None else list(argv)
    debug = "--debug" in args or os.environ.get("KAFEED_DEBUG", "") not in ("", "0")
    try:
        return _run(args, debug)
    except KeyboardInterrupt:  # before (or while) the command tree was imported
        sys.stderr.write("Interrupted.\n")
        return 130


@functools.cache
def _command() -> Any:
    """The click tree, built once per process (a tenth of a second: every in-process run
    of the tests would pay it again), every number option checked (cli.common.check_numbers)."""
    import typer

    from kafeed.cli.app import app
    from kafeed.cli.common import check_numbers

    return check_numbers(typer.main.get_command(app))


def _run(args: list[str], debug: bool) -> int:
    import click
    import typer

    from kafeed.cli.app import usage_error_types
    from kafeed.cli.common import bad_value, console, report_error
    from kafeed.extras import missing_extra
    from kafeed.signals import stop_request

    try:
        # Outside standalone mode click returns (not raises) the code of a typer.Exit.
        code = _command().main(args=args, standalone_mode=False, prog_name="kafeed")
    except KafeedError as exc:
        if debug:
            console.print_exception()
        report_error(exc.message, exc.hint)
        return 2 if isinstance(exc, ConfigError) else 1
    except typer.Exit as exc:
        code = exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        code = 130
    except usage_error_types() as exc:
        if isinstance(exc, click.BadParameter) and not isinstance(exc, click.MissingParameter):
            report_error(*bad_value(exc))
            return 2
        param = getattr(exc, "param", None)
        if param is not None and getattr(param, "envvar", None) is None:
            param.show_envvar = False  # else click 8.2 adds "(env var: 'None')" to the hint
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        return int(getattr(exc, "exit_code", 2))
    except Exception as exc:
        if debug:
            console.print_exception()
        missing = missing_extra(exc)
        if missing is not None:
            report_error(missing.message, missing.hint)
            return 2
        report_error(f"Unexpected {type(exc).__name__}: {exc}",
                     "This is a bug in kafeed; run again with --debug for the traceback and report it.")
        return 1
    code = code if isinstance(code, int) else 0
    if code == 130 and not stop_request().requested:
        # typer turns a KeyboardInterrupt inside a command into a silent Exit(130); a
        # command that saw the stop request said so itself (cli.common.exit_stopped).
        console.print("Interrupted.", markup=False, highlight=False)
    return code


def __getattr__(name: str) -> Any:
    # `from kafeed.cli.main import app` (the click tree for docs and tests) still works.
    if name in ("app", "version_line"):
        from kafeed.cli import app as tree

        return getattr(tree, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if __name__ == "__main__":
    sys.exit(main())
