"""What a client's authentication or TLS failure is remembered as: librdkafka's text without
its place and timing suffixes, never a credential."""

from __future__ import annotations

import pytest

from kafeed.config import ConnectionSettings
from kafeed.kafka.clients import _note_security_errors, security_failure


class _Err:
    def __init__(self, name: str, text: str) -> None:
        self._name, self._text = name, text

    def name(self) -> str:
        return self._name

    def str(self) -> str:
        return self._text


class _Closed:
    def poll(self, timeout: float) -> None:
        raise RuntimeError("closed")


@pytest.mark.parametrize("suffix", [
    " (after 3ms in state AUTH_REQ)",
    " (after 12ms in state AUTH_REQ, 1 identical error(s) suppressed)",
    "",
])
def test_the_failure_is_kept_without_place_and_timing(suffix: str) -> None:
    connection = ConnectionSettings(bootstrap="127.0.0.1:1")
    why = "SASL authentication error: Authentication failed during authentication"
    _note_security_errors(connection.bootstrap)(
        _Err("_AUTHENTICATION", f"sasl_ssl://127.0.0.1:1/bootstrap: {why}{suffix}"))
    assert security_failure(_Closed(), connection) == why
    assert security_failure(_Closed(), connection) is None  # told once


def test_other_errors_are_not_kept() -> None:
    connection = ConnectionSettings(bootstrap="127.0.0.1:2")
    _note_security_errors(connection.bootstrap)(_Err("_TRANSPORT", "Connection refused"))
    assert security_failure(_Closed(), connection) is None
