"""The monitor's loop: poll the cluster, evaluate the alert rules, export the gauges, repeat.

:class:`Watch` does all of it and hands each :class:`Poll` to a callback; a front end only
decides what to show (``kafeed monitor`` prints JSON or updates its dashboard). A cluster
that does not answer is one more poll: it fires ``broker_down`` (when that rule is on),
keeps the other alerts as they were, and the loop goes on.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from kafeed.errors import BrokerUnavailable, KafeedError
from kafeed.monitor.alerts import AlertEngine, AlertEvent, AlertSettings, Condition
from kafeed.monitor.export import export_snapshot, export_unreachable
from kafeed.monitor.rules import conditions
from kafeed.monitor.snapshot import Snapshot
from kafeed.monitor.watch import MonitorOptions


class Poller(Protocol):
    """What :class:`Watch` needs of :class:`~kafeed.monitor.watch.ClusterMonitor`."""

    options: MonitorOptions

    def poll(self) -> Snapshot: ...


@dataclass(frozen=True)
class Poll:
    """One poll: its snapshot, or the error that took its place (exactly one is set); the
    alert transitions it caused, and the alerts firing after it."""

    time: float
    snapshot: Snapshot | None
    error: KafeedError | None
    events: list[AlertEvent]
    firing: list[Condition]


class Watch:
    """Polls ``monitor`` and runs the ``[alerts]`` rules over each snapshot."""

    def __init__(self, monitor: Poller, alerts: AlertSettings, *, engine: AlertEngine | None = None) -> None:
        self.monitor = monitor
        self.alerts = alerts
        self.engine = engine or AlertEngine(alerts)

    def poll(self) -> Poll:
        """One poll; a cluster that cannot be read raises (a :class:`KafeedError`)."""
        snap = self.monitor.poll()
        events = self.engine.evaluate(conditions(snap, self.alerts), now=snap.time)
        firing = self.engine.firing
        export_snapshot(snap, firing)
        return Poll(snap.time, snap, None, events, firing)

    def poll_or_error(self) -> Poll:
        """One poll that survives an unreachable cluster: the error is the poll's result."""
        try:
            return self.poll()
        except KafeedError as exc:
            events: list[AlertEvent] = []
            if isinstance(exc, BrokerUnavailable):
                down = Condition("broker_down", "cluster", True, f"no broker answers: {exc.message}",
                                 value=0, threshold=self.alerts.expected_brokers)
                # Nothing else is known this poll: keep the other alerts as they were.
                events = self.engine.evaluate([down] if self.alerts.broker_down else [],
                                              resolve_missing=False)
                export_unreachable(self.engine.firing)
            return Poll(time.time(), None, exc, events, self.engine.firing)

    def sample(self, samples: int = 1, *, sleep: Callable[[float], None] = time.sleep) -> Poll:
        """``samples`` polls an interval apart (the lag rules need a window); the last one, with
        the events of them all. An unreachable cluster raises: one look has nothing to show."""
        if samples < 1:
            raise ValueError(f"samples must be at least 1, got {samples}")
        events: list[AlertEvent] = []
        for i in range(samples):
            if i:
                sleep(self.monitor.options.interval_s)
            last = self.poll()
            events += last.events
        return Poll(last.time, last.snapshot, None, events, last.firing)

    def run(self, on_poll: Callable[[Poll], None], *, stop: threading.Event | None = None,
            polls: int | None = None) -> None:
        """Poll an interval apart and hand each :class:`Poll` to ``on_poll``, until ``stop`` is
        set or ``polls`` polls were made (default: neither, so until the process is stopped)."""
        stop = stop or threading.Event()
        done = 0
        while True:
            on_poll(self.poll_or_error())
            done += 1
            if (polls is not None and done >= polls) or stop.wait(self.monitor.options.interval_s):
                return
