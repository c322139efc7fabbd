"""The alert state machine fires once and resolves once; webhook failures never raise."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from kafeed.errors import ConfigError
from kafeed.monitor.alerts import AlertEngine, AlertSettings, Condition, load_alert_settings, post_webhook
from tests.webhook import webhook_server


def cond(active: bool, rule: Any = "broker_down", subject: str = "cluster") -> Condition:
    return Condition(rule, subject, active, "msg", value=1.0, threshold=2.0)


def test_fires_once_and_resolves_once() -> None:
    engine = AlertEngine(AlertSettings())
    seen = []
    for active in (False, True, True, True, False, False, True):
        seen.append([e.status for e in engine.evaluate([cond(active)], now=0)])
    assert seen == [[], ["firing"], [], [], ["resolved"], [], ["firing"]]
    assert [c.subject for c in engine.firing] == ["cluster"]


def test_group_status_needs_n_consecutive_intervals() -> None:
    engine = AlertEngine(AlertSettings(group_not_ok_intervals=3))
    pattern = [True, True, False, True, True, True, True]
    fired = [bool(engine.evaluate([cond(a, "group_status", "g")], now=0)) for a in pattern]
    assert fired == [False, False, False, False, False, True, False]


def test_subject_that_disappears_resolves() -> None:
    engine = AlertEngine(AlertSettings())
    engine.evaluate([cond(True, "lag", "g1")], now=0)
    events = engine.evaluate([], now=1)
    assert [(e.rule, e.subject, e.status) for e in events] == [("lag", "g1", "resolved")]
    assert engine.firing == []


def test_partial_poll_keeps_other_alerts() -> None:
    engine = AlertEngine(AlertSettings())
    engine.evaluate([cond(True, "lag", "g1")], now=0)
    events = engine.evaluate([cond(True, "broker_down", "cluster")], now=1, resolve_missing=False)
    assert [(e.rule, e.status) for e in events] == [("broker_down", "firing")]
    assert sorted(c.rule for c in engine.firing) == ["broker_down", "lag"]


def test_settings_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "kafeed.toml"
    path.write_text('[alerts]\nwebhook_url = "http://127.0.0.1:1/x"\nmax_partition_lag = 50\n'
                    "expected_brokers = 3\n")
    settings = load_alert_settings(path)
    assert (settings.max_partition_lag, settings.expected_brokers) == (50, 3)
    with pytest.raises(ValidationError):  # frozen
        settings.max_partition_lag = 1  # type: ignore[misc]
    path.write_text("[alerts]\nmax_lagg = 5\n")
    with pytest.raises(ConfigError, match="max_lagg"):
        load_alert_settings(path)


@pytest.fixture
def hook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    with webhook_server("/hook") as server:
        yield server


def test_webhook_receives_firing_and_resolved(hook: tuple[str, list[dict[str, Any]]]) -> None:
    url, received = hook
    engine = AlertEngine(AlertSettings(webhook_url=url))
    engine.evaluate([cond(True)], now=1)
    engine.evaluate([cond(True)], now=2)
    engine.evaluate([cond(False)], now=3)
    assert [(r["rule"], r["status"], r["source"]) for r in received] == [
        ("broker_down", "firing", "kafeed"), ("broker_down", "resolved", "kafeed")]


def test_webhook_failure_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    import socket

    logger = logging.getLogger("kafeed")  # the CLI may have turned propagation off
    logger.addHandler(caplog.handler)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    engine = AlertEngine(AlertSettings(webhook_url=f"http://127.0.0.1:{port}/x", webhook_timeout_s=0.5))
    events = engine.evaluate([cond(True)], now=0)
    assert [e.status for e in events] == ["firing"]
    assert post_webhook("file:///etc/passwd", {}) is False
    logger.removeHandler(caplog.handler)
    assert "webhook" in caplog.text
