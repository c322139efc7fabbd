"""Worker processes of one consumer group, started and stopped from the lag trend.

Each worker is the same command run with a fixed single worker; they share the group,
so Kafka spreads the input's partitions over them, and each claims its own instance
slot (hence its own ``transactional.id``). A worker is stopped with SIGTERM, which
finishes or aborts its open transaction before it leaves the group: nothing is lost
or doubled by a change of size. A worker gets the same SIGTERM when the supervisor dies,
however it dies. Decisions are printed with their reason.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from kafeed.config import ConnectionSettings
from kafeed.kafka import KafkaClients
from kafeed.monitor.groups import GroupOffsetReader
from kafeed.monitor.lag import LagTracker
from kafeed.scale.policy import ScalePolicy, ScaleSettings
from kafeed.signals import ends_with_this_process
from kafeed.topics import TopicAdmin

log = logging.getLogger("kafeed")

STOP_TIMEOUT_S = 60.0


class Supervisor:
    """Keeps between ``min_workers`` and ``max_workers`` copies of ``command`` running."""

    def __init__(self, command: Sequence[str], *, topic: str | Sequence[str], group: str,
                 settings: ScaleSettings, connection: ConnectionSettings, say: Callable[[str], None] = print,
                 env: dict[str, str] | None = None) -> None:
        self.command = list(command)
        self.topics = (topic,) if isinstance(topic, str) else tuple(topic)  # the workers' inputs
        self.group = group
        self.settings = settings
        self.connection = connection
        self.say = say
        self.env = env
        self.workers: list[subprocess.Popen[bytes]] = []
        self.peak = 0
        self.changes: list[tuple[int, int, str]] = []  # (from, to, reason)

    def _start(self) -> None:
        # A worker gets SIGTERM when the supervisor dies, however it dies (it then finishes or
        # aborts its transaction, as when it is scaled down), so none outlives it.
        self.workers.append(subprocess.Popen(self.command, env=self.env,
                                             preexec_fn=ends_with_this_process(signal.SIGTERM)))
        self.peak = max(self.peak, len(self.workers))

    def _stop_one(self) -> None:
        proc = self.workers.pop()  # the newest: the oldest keep their partitions
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()  # its open transaction is aborted by the next owner's fencing
            proc.wait()

    def _resize(self, target: int, reason: str) -> None:
        before = len(self.workers)
        self.say(f"scale: {before} -> {target} workers ({reason})")
        self.changes.append((before, target, reason))
        while len(self.workers) < target:
            self._start()
        while len(self.workers) > target:
            self._stop_one()

    def _reap(self) -> None:
        """A worker that exited on its own (a crash) is replaced at the next decision."""
        for proc in list(self.workers):
            code = proc.poll()
            if code is not None:
                self.workers.remove(proc)
                self.say(f"scale: a worker exited with code {code}")

    def run(self, stop_event: threading.Event, *, until_caught_up: bool = False) -> int:
        """Supervise until ``stop_event`` (or until drained at ``min_workers``); the peak worker count."""
        from kafeed.kafka.types import TopicPartition

        s = self.settings
        topic_admin = TopicAdmin(self.connection)
        tps = [(topic, p) for topic in self.topics
               for p in range(len(topic_admin.describe(topic, sizes=False).partitions))]
        partitions = len(tps)
        policy = ScalePolicy(s)
        tracker = LagTracker(window=s.window, allowed_lag=s.allowed_lag)
        clients = KafkaClients(self.connection)
        admin = clients.admin()
        reader = GroupOffsetReader(self.connection, admin)
        watermarks = clients.read_committed_consumer({"group.id": f"{self.group}-scale"})
        drained_since: float | None = None
        try:
            self._resize(s.min_workers, "start")
            while not stop_event.wait(s.interval_s):
                self._reap()
                now = time.monotonic()
                committed = reader.committed(self.group, tps)
                if committed is None:
                    continue
                for topic, p in tps:
                    high = watermarks.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                    tracker.observe(self.group, topic, p, offset=committed.get((topic, p), 0),
                                    high_watermark=high, now=now, active=True)
                lag = tracker.evaluate(self.group, now=now)
                decision = policy.decide(now, len(self.workers), partitions, lag)
                if decision.workers != len(self.workers):
                    self._resize(decision.workers, decision.reason)
                if until_caught_up:
                    drained = lag.total_lag <= s.allowed_lag and len(self.workers) <= s.min_workers
                    drained_since = (drained_since or now) if drained else None
                    if drained_since is not None and now - drained_since >= s.interval_s * s.window:
                        break
        finally:
            while self.workers:
                self._stop_one()
            watermarks.close()
            reader.close()
        return self.peak
