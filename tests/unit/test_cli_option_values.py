"""Every option that takes a path or a number, of every command, given what a user might type.

The options are read from the click tree (tests/cli_options.py), so a new one is covered
without touching this file. Whatever the value, the outcome is never "a bug in kafeed" nor
a traceback: a value that cannot be right is one usage/config error with exit 2, a value
that may be fine goes on to what the command does (here: find no broker, exit 1, or
finish). No broker is needed: the bootstrap is a closed port, java and mvn are off PATH
(no cluster starts) and everything a command writes goes under a temporary directory.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafeed.cli.common import directory_to_write, existing_directory, existing_file, existing_files
from kafeed.signals import stop_request
from kafeed.telemetry.metrics import stop_metrics_servers
from tests.cli_options import Slot, base_args, commands, isolated_env, prepare_tmp, run_cli, slots

SLOTS = slots()
COMMANDS = dict(commands())
NOT_NUMBERS = ["nan", "inf", "-inf", "NaN", "abc", "", "1,5", "0x10", "1e", "--"]
NUMBERS = ["-1", "0", "1e300", "-1e300", "1e-300", "99999999999999999999999", "2.5", "1"]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


CLOSED = f"127.0.0.1:{_closed_port()}"


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("options")
    prepare_tmp(root)
    (root / "a dir").mkdir()
    with pytest.MonkeyPatch.context() as mp:
        for key in [k for k in os.environ if k.startswith("KAFEED_")]:
            mp.delenv(key)
        for key, value in isolated_env(root).items():
            mp.setenv(key, value)
        mp.chdir(root)  # defaults relative to the working directory (runs/, checkpoints/) land here
        yield root


def _param(slot: Slot) -> click.Parameter:
    return next(p for p in COMMANDS[slot.command].params if p.name == slot.name)


def _run(slot: Slot, value: str, tmp: Path) -> tuple[int, str]:
    args = base_args(slot.command, COMMANDS[slot.command], tmp, CLOSED, skip=slot.name)
    args += [slot.flag, value] if slot.flag else [value]
    try:
        code, text = run_cli(args)
    finally:
        stop_request().uninstall()
        stop_request().reset()
        stop_metrics_servers()
    assert "bug in kafeed" not in text and "Traceback" not in text, (args, text)
    assert code in (0, 1, 2), (args, code, text)
    if code == 2:
        errors = [line for line in text.splitlines() if line.startswith(("error:", "Error:"))]
        assert len(errors) == 1, (args, text)
    return code, text


def _must_refuse(slot: Slot, what: str) -> bool:
    """Whether the option's declared check refuses ``what`` ("file", "dir", "missing")."""
    callback = _param(slot).callback
    refused = {existing_file: {"dir", "missing"}, existing_files: {"dir", "missing"},
               existing_directory: {"file", "missing"}, directory_to_write: {"file"}}
    return what in refused.get(callback, set())  # type: ignore[call-overload]


NUMBER_SLOTS = [s for s in SLOTS if s.kind == "number"]
PATH_SLOTS = [s for s in SLOTS if s.kind == "path"]


def test_the_tree_has_the_options_this_file_is_about() -> None:
    # A refactor that hid the options from the click tree would make every test here vacuous.
    ids = {s.id for s in SLOTS}
    assert {"train --lr", "tasks worker --lease", "topic create --throughput-mbps", "route --rules",
            "train --run-dir", "plan --bytes-per-token", "archive compact --target-file-mb"} <= ids
    assert len(NUMBER_SLOTS) > 60 and len(PATH_SLOTS) > 30


@pytest.mark.parametrize("slot", NUMBER_SLOTS, ids=[s.id for s in NUMBER_SLOTS])
def test_a_number_option_refuses_what_is_no_number(slot: Slot, tmp: Path) -> None:
    for value in ("nan", "inf", "abc"):
        code, text = _run(slot, value, tmp)
        assert code == 2, (slot.id, value, text)
    for value in ("-1", "0", "1e300"):
        _run(slot, value, tmp)


@pytest.mark.parametrize("slot", PATH_SLOTS, ids=[s.id for s in PATH_SLOTS])
def test_a_path_option_refuses_the_wrong_kind_of_path(slot: Slot, tmp: Path) -> None:
    binary = tmp / "binary"
    binary.write_bytes(bytes(range(256)) * 4)
    empty = tmp / "empty"  # fine for most file options (an empty TOML or JSON lines file)
    empty.write_bytes(b"")
    for what, value in (("file", binary), ("dir", tmp / "a dir"), ("missing", tmp / "no" / "such"),
                        ("file", empty)):
        code, text = _run(slot, str(value), tmp)
        if _must_refuse(slot, what):
            assert code == 2, (slot.id, what, text)


def test_a_run_dir_that_is_a_file_is_refused_before_any_work(tmp: Path) -> None:
    (tmp / "a file").write_text("x")
    code, text = run_cli(["train", "--run-dir", str(tmp / "a file" / "sub"), "-b", CLOSED])
    assert code == 2 and "is a file" in text, text
    code, text = run_cli(["train", "--run-dir", str(tmp / "a file"), "-b", CLOSED])
    assert code == 2 and "is a file, not a directory" in text, text


numbers = st.one_of(
    st.sampled_from(NOT_NUMBERS + NUMBERS),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.text(alphabet="0123456789.-+eE", max_size=8),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slot=st.sampled_from(NUMBER_SLOTS), value=numbers)
def test_any_number_to_any_number_option(slot: Slot, value: str, tmp: Path) -> None:
    code, text = _run(slot, value, tmp)
    if value.strip().lower() in ("nan", "inf", "-inf", "+inf", "infinity", "-infinity"):
        assert code == 2, (slot.id, value, text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(slot=st.sampled_from(PATH_SLOTS), content=st.binary(max_size=600),
       shape=st.sampled_from(["file", "dir", "missing", "under a file"]))
def test_any_bytes_or_path_to_any_path_option(slot: Slot, content: bytes, shape: str, tmp: Path) -> None:
    target = tmp / "given"
    if target.is_dir():
        for child in target.iterdir():
            child.unlink()
        target.rmdir()
    elif target.exists():
        target.unlink()
    if shape in ("file", "under a file"):
        target.write_bytes(content)
    elif shape == "dir":
        target.mkdir()
        (target / "x").write_bytes(content)
    value = target / "inside" if shape == "under a file" else target
    code, text = _run(slot, str(value), tmp)
    if _must_refuse(slot, "file" if shape == "under a file" else shape) and shape != "under a file":
        assert code == 2, (slot.id, shape, text)
