"""An unreachable or mistyped bootstrap is reported quickly, naming the address and the cause.

No broker needed: a socket bound but not listening refuses connections, a
listening one accepts them, and ``.invalid`` never resolves (RFC 6761).
The bound is generous (10 s) for a busy machine; on an idle one these take
well under a second.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import pytest

from kafeed.cli.main import main
from kafeed.config import ConnectionSettings
from kafeed.connect import check_reachable
from kafeed.errors import BrokerUnavailable

BOUND_S = 10.0


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections (bound, never listening) for the test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("KAFEED_BOOTSTRAP", "KAFEED_CONFIG", "KAFEED_DEBUG"):
        monkeypatch.delenv(var, raising=False)


def _unavailable(bootstrap: str) -> tuple[str, float]:
    t0 = time.monotonic()
    with pytest.raises(BrokerUnavailable) as info:
        check_reachable(ConnectionSettings(bootstrap=bootstrap))
    return info.value.message, time.monotonic() - t0


def test_refused_names_address_and_cause(refused_port: int) -> None:
    message, elapsed = _unavailable(f"127.0.0.1:{refused_port}")
    assert f"127.0.0.1:{refused_port} (connection refused)" in message
    assert elapsed < BOUND_S


def test_unresolvable_host_names_address_and_cause() -> None:
    message, elapsed = _unavailable("nosuchhost.invalid:9092")
    assert "nosuchhost.invalid:9092 (host name" in message and "resolve" in message
    assert elapsed < BOUND_S


def test_every_address_is_named_in_bootstrap_order(refused_port: int) -> None:
    message, _ = _unavailable(f"nosuchhost.invalid:1,127.0.0.1:{refused_port}")
    assert message.index("nosuchhost.invalid:1 (") < message.index(f"127.0.0.1:{refused_port} (")


def test_one_listening_address_is_enough(refused_port: int, listening_port: int) -> None:
    t0 = time.monotonic()
    check_reachable(ConnectionSettings(
        bootstrap=f"nosuchhost.invalid:1,127.0.0.1:{refused_port},127.0.0.1:{listening_port}"))
    assert time.monotonic() - t0 < BOUND_S


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, float]:
    t0 = time.monotonic()
    rc = main(args)
    elapsed = time.monotonic() - t0
    return rc, capsys.readouterr().err, elapsed


def _one_sentence(err: str) -> str:
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("error: ") and len(lines) <= 2, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("command", [["topic", "list"], ["topic", "describe", "t"],
                                     ["topic", "delete", "t"], ["monitor", "--once"]])
def test_cli_refused_exits_1_quickly(command: list[str], refused_port: int,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    rc, err, elapsed = _cli([*command, "-b", f"127.0.0.1:{refused_port}"], capsys)
    assert rc == 1
    assert f"127.0.0.1:{refused_port} (connection refused)" in _one_sentence(err)
    assert elapsed < BOUND_S


def test_cli_unresolvable_exits_1_quickly(capsys: pytest.CaptureFixture[str]) -> None:
    rc, err, elapsed = _cli(["topic", "list", "-b", "nosuchhost.invalid:9092"], capsys)
    assert rc == 1 and "nosuchhost.invalid:9092 (host name" in _one_sentence(err)
    assert elapsed < BOUND_S


@pytest.mark.parametrize(("bootstrap", "says"), [
    ("127.0.0.1:99999", "port between 1 and 65535"),
    ("127.0.0.1:abc", "a number"),
    ("127.0.0.1", "the port is required"),
    ("", "should not be empty"),
    ("   ", "should not be empty"),
])
def test_cli_bad_bootstrap_syntax_exits_2(bootstrap: str, says: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    rc, err, _ = _cli(["topic", "list", "--bootstrap", bootstrap], capsys)
    assert rc == 2 and says in _one_sentence(err)


@pytest.mark.parametrize("value", ["", " "])
def test_cli_empty_environment_bootstrap_exits_2(value: str, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KAFEED_BOOTSTRAP", value)
    rc, err, _ = _cli(["topic", "list"], capsys)
    assert rc == 2 and "should not be empty" in _one_sentence(err)
    assert "KAFEED_BOOTSTRAP" in err
