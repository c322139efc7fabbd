"""Every path kafeed is given is checked at the start, the way what uses it will see it.

A settings file must be a regular file of reasonable size (``/dev/zero`` grew to 11 GB, a
FIFO hung); a directory to write must take new entries (``/proc/x`` passed every check and
failed after start-up). One sentence, exit 2, before anything else runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafeed.config import MAX_SETTINGS_BYTES, directory_problem
from tests.cli_support import usage_error


def _fifo(tmp: Path) -> str:
    path = tmp / "fifo.toml"
    os.mkfifo(path)
    return str(path)


def _huge(tmp: Path) -> str:
    path = tmp / "huge.toml"
    with path.open("w") as fh:
        fh.write("# padding\n" * (MAX_SETTINGS_BYTES // 10 + 1))
    return str(path)


SETTINGS_FILES: dict[str, tuple[Callable[[Path], str], str]] = {
    "/dev/zero": (lambda tmp: "/dev/zero", "is not a regular file"),
    "a FIFO": (_fifo, "is not a regular file"),
    "a file over the cap": (_huge, "is larger than 4 MiB"),
}
# Every kind of command that reads a TOML file: --config of a cluster command, KAFEED_CONFIG,
# the mirror's own file.
COMMANDS = {"topic list --config": ["topic", "list", "--config", "{path}"],
            "mirror status --config": ["mirror", "status", "--config", "{path}"],
            "KAFEED_CONFIG": ["topic", "list"]}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
@pytest.mark.parametrize("make", SETTINGS_FILES.values(), ids=SETTINGS_FILES.keys())
def test_a_settings_file_is_a_regular_file_of_settings_size(
        tmp_path: Path, make: tuple[Callable[[Path], str], str], command: list[str],
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path = make[0](tmp_path)
    if "{path}" not in command:
        monkeypatch.setenv("KAFEED_CONFIG", path)
    started = time.monotonic()
    line = usage_error([a.replace("{path}", path) for a in command], capsys)
    assert make[1] in line and path in line
    assert time.monotonic() - started < 10


def _a_file(tmp: Path) -> Path:
    (tmp / "f").write_text("x")
    return tmp / "f"


DIRECTORIES: dict[str, tuple[Callable[[Path], Path], str | None]] = {
    "a new folder": (lambda tmp: tmp / "new" / "run", None),
    "an existing folder": (lambda tmp: tmp, None),
    "a file": (_a_file, "is a file, not a directory"),
    "under a file": (lambda tmp: _a_file(tmp) / "run", "cannot be created: "),
    "in /proc": (lambda tmp: Path("/proc/kafeed-x"), "cannot be created in /proc"),
    "/proc/self": (lambda tmp: Path("/proc/self"), "cannot be written into"),
    "in /sys": (lambda tmp: Path("/sys/kafeed-x"), "cannot be created in /sys"),
}


@pytest.mark.parametrize("case", DIRECTORIES.values(), ids=DIRECTORIES.keys())
def test_a_directory_to_write_takes_new_entries(tmp_path: Path,
                                                case: tuple[Callable[[Path], Path], str | None]) -> None:
    path = case[0](tmp_path)
    problem = directory_problem(path)
    if case[1] is None:
        assert problem is None
        assert not any(p.name.startswith(".kafeed-probe-") for p in tmp_path.rglob("*"))  # the probe is gone
    else:
        assert problem is not None and case[1] in problem


DIRECTORY_OPTIONS = {"train --run-dir": ["train", "--run-dir", "{dir}"],
                     "train --checkpoint-dir": ["train", "--checkpoint-dir", "{dir}"],
                     "archive query --warehouse": ["archive", "query", "SELECT 1", "--warehouse", "{dir}"],
                     "broker status --data-dir": ["broker", "status", "--data-dir", "{dir}"]}


@pytest.mark.parametrize("args", DIRECTORY_OPTIONS.values(), ids=DIRECTORY_OPTIONS.keys())
def test_every_directory_option_refuses_proc_at_once(args: list[str],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    line = usage_error([a.replace("{dir}", "/proc/kafeed-x") for a in args], capsys)
    assert "cannot be created in /proc" in line
    assert time.monotonic() - started < 3
