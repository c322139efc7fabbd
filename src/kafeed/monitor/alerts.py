"""Alert rules from the ``[alerts]`` table, a fire-once / resolve-once state machine, webhooks.

Each rule turns a monitor snapshot into conditions, one per subject (a group,
a broker, a log dir). :class:`AlertEngine` remembers which (rule, subject)
pairs fire: a condition that holds for ``for_intervals`` consecutive polls
fires once; when it stops holding, it resolves once. Both transitions are
logged and, when ``webhook_url`` is set, POSTed as JSON; a webhook that fails
is logged, never raised, so alerting cannot stop monitoring.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kafeed.config import read_settings_file
from kafeed.errors import invalid_settings

log = logging.getLogger("kafeed")

RuleName = Literal["group_status", "lag", "producer_errors", "broker_down", "disk", "task_wait",
                   "tasks_parked"]


class AlertSettings(BaseModel):
    """The ``[alerts]`` table. A threshold left unset (or 0 intervals) turns its rule off."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    webhook_url: str | None = None
    webhook_timeout_s: float = Field(default=3.0, gt=0, le=60)
    #: consumer group status not OK (WARN or ERR) for this many consecutive polls
    group_not_ok_intervals: int = Field(default=3, ge=0)
    #: lag of any one partition of a group above this many messages
    max_partition_lag: int | None = Field(default=None, ge=0)
    #: kafeed_produce_errors_total rising faster than this many errors per second
    max_producer_error_rate: float | None = Field(default=None, ge=0)
    broker_down: bool = True
    #: brokers the cluster should have; default: the local cluster's node count, else the first poll
    expected_brokers: int | None = Field(default=None, ge=1)
    #: share of a log dir's filesystem in use (0..1)
    max_disk_used_ratio: float | None = Field(default=0.9, gt=0, le=1)
    #: a task kind whose oldest waiting task (not finished, not held by a worker) is older
    max_task_wait_s: float | None = Field(default=600.0, ge=0)
    #: any task of a kind parked (until `kafeed tasks retry` or a new prefix)
    tasks_parked: bool = True


def load_alert_settings(config_file: Path | None = None) -> AlertSettings:
    """Read ``[alerts]`` from the settings file (``--config`` / ``$KAFEED_CONFIG``); defaults if none."""
    table = read_settings_file(config_file).get("alerts", {})
    try:
        return AlertSettings(**table)
    except ValidationError as exc:
        raise invalid_settings(exc, what="[alerts] settings",
                               hint="See docs/monitor.md for the [alerts] keys.") from None


@dataclass(frozen=True)
class Condition:
    """One rule's verdict on one subject at one poll."""

    rule: RuleName
    subject: str
    active: bool
    message: str
    value: float | None = None
    threshold: float | None = None


@dataclass(frozen=True)
class AlertEvent:
    rule: str
    subject: str
    status: Literal["firing", "resolved"]
    message: str
    value: float | None
    threshold: float | None
    time: float

    def as_dict(self) -> dict[str, Any]:
        return {"source": "kafeed", **asdict(self)}


class AlertEngine:
    """Turns conditions into firing / resolved events, each exactly once per episode."""

    def __init__(self, settings: AlertSettings) -> None:
        self.settings = settings
        self._pending: dict[tuple[str, str], int] = {}
        self._firing: dict[tuple[str, str], Condition] = {}
        self.sent: list[AlertEvent] = []  # every event, for --json output and tests

    def _needed(self, rule: str) -> int:
        return max(1, self.settings.group_not_ok_intervals) if rule == "group_status" else 1

    @property
    def firing(self) -> list[Condition]:
        return [self._firing[k] for k in sorted(self._firing)]

    def evaluate(self, conditions: list[Condition], *, now: float | None = None,
                 resolve_missing: bool = True) -> list[AlertEvent]:
        """Feed one poll's conditions; return (and dispatch) the transitions they cause.

        A firing subject missing from ``conditions`` (a deleted group) resolves,
        unless ``resolve_missing`` is False (a poll that saw only part of the cluster).
        """
        now = time.time() if now is None else now
        events: list[AlertEvent] = []
        seen: set[tuple[str, str]] = set()
        for cond in conditions:
            key: tuple[str, str] = (cond.rule, cond.subject)
            seen.add(key)
            if cond.active:
                self._pending[key] = self._pending.get(key, 0) + 1
                if key not in self._firing and self._pending[key] >= self._needed(cond.rule):
                    self._firing[key] = cond
                    events.append(self._event(cond, "firing", now))
                elif key in self._firing:
                    self._firing[key] = cond  # keep the latest value for display
            else:
                self._pending.pop(key, None)
                if key in self._firing:
                    del self._firing[key]
                    events.append(self._event(cond, "resolved", now))
        for gone in [k for k in self._firing if k not in seen and resolve_missing]:
            old = self._firing.pop(gone)
            self._pending.pop(gone, None)
            events.append(self._event(Condition(old.rule, old.subject, False,
                                                f"{old.subject} is no longer observed"), "resolved", now))
        for stale in [k for k in self._pending if k not in seen and resolve_missing]:
            del self._pending[stale]
        for event in events:
            self._dispatch(event)
        return events

    def _event(self, cond: Condition, status: Literal["firing", "resolved"], now: float) -> AlertEvent:
        return AlertEvent(cond.rule, cond.subject, status, cond.message, cond.value, cond.threshold, now)

    def _dispatch(self, event: AlertEvent) -> None:
        self.sent.append(event)
        if event.status == "firing":
            log.warning("ALERT %s [%s]: %s", event.rule, event.subject, event.message)
        else:
            log.warning("RESOLVED %s [%s]: %s", event.rule, event.subject, event.message)
        if self.settings.webhook_url:
            post_webhook(self.settings.webhook_url, event.as_dict(), timeout=self.settings.webhook_timeout_s)


def post_webhook(url: str, payload: dict[str, Any], *, timeout: float = 3.0) -> bool:
    """POST ``payload`` as JSON; False (and a log line) on any failure."""
    if not url.startswith(("http://", "https://")):
        log.warning("alert webhook %r is not an http(s) URL; not sending", url)
        return False
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), method="POST",
        headers={"Content-Type": "application/json", "User-Agent": "kafeed-monitor"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
        return True
    except (urllib.error.URLError, OSError, ValueError) as exc:
        log.warning("alert webhook %s failed: %s", url, exc)
        return False
