"""Running the command line in-process, as the bad-input tests do."""

from __future__ import annotations

import pytest

from kafeed.cli.main import main


def usage_error(args: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run ``kafeed ARGS``; assert exit 2 with one ``error:`` line (plus a hint) and no
    traceback; return that line."""
    rc = main(args)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, err
    assert lines[0].startswith("error: ") and len(lines) <= 2 and "Traceback" not in err
    return lines[0]
