"""Output that scripts read is never reshaped: piped, every printed line stays one line.

rich wraps at 80 columns when stdout is not a terminal; a topic name of 120 characters came
out as two lines of `kafeed topic list | wc -l`. Every command prints through one console
(kafeed.cli.common.out), so the property is checked there, in a child process whose stdout
is a pipe, for every kind of line the commands print.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LONG = "site-a." + "x" * 140
LINES = {
    "a name (topic list)": f"out.print(Text({LONG!r}))",
    "markup text (summaries)": f"out.print('[bold]kafeed[/bold] ' + {LONG!r} + ' ' + {LONG!r})",
    "words (messages)": "out.print(' '.join(['word'] * 60), highlight=False)",
    "a config line (topic describe)": f"out.print(Text('  cleanup.policy = ' + {LONG!r}))",
}


@pytest.mark.parametrize("statement", LINES.values(), ids=LINES.keys())
def test_a_piped_line_is_one_line(statement: str) -> None:
    code = f"from rich.text import Text\nfrom kafeed.cli.common import out\n{statement}\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={"PATH": "/usr/bin:/bin", "COLUMNS": "80", "TERM": "xterm"})
    assert len(done.stdout.splitlines()) == 1, done.stdout


def test_json_is_one_document_however_long_its_strings() -> None:
    code = f"from kafeed.cli.common import print_json\nprint_json([{LONG!r}, {{'n': {LONG!r}}}])\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [LONG, {"n": LONG}]
