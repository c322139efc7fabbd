"""The monitor's poll/alert loop on a scripted cluster: no broker, no sleeping."""

from __future__ import annotations

import threading

import pytest

from kafeed.errors import BrokerUnavailable, KafeedError
from kafeed.monitor.alerts import AlertSettings
from kafeed.monitor.disk import DiskUsage
from kafeed.monitor.health import BrokerInfo, ClusterHealth
from kafeed.monitor.lag import GroupLag, PartitionLag
from kafeed.monitor.loop import Poll, Watch
from kafeed.monitor.snapshot import GroupView, Snapshot
from kafeed.monitor.watch import MonitorOptions
from kafeed.telemetry import metrics as m


def snapshot(t: float, *, brokers: int = 1, lag: int = 0) -> Snapshot:
    health = ClusterHealth([BrokerInfo(i, "h", 9092) for i in range(1, brokers + 1)], 1, 1, 0, 0, 0)
    part = PartitionLag("t", 0, 90, 90 + lag, lag, "OK", 1.0)
    group = GroupView(GroupLag("g", "OK", lag, [part]), "STABLE", 1, {})  # type: ignore[arg-type]
    return Snapshot(t, "h:9092", health, 1, [], {}, [group], [DiskUsage(1, "/d", 10, 50, 100)])


class Cluster:
    """Answers each poll from a script: a snapshot, or an error to raise."""

    def __init__(self, *script: Snapshot | KafeedError) -> None:
        self.options = MonitorOptions(interval_s=7.0)
        self.script = list(script)
        self.polls = 0

    def poll(self) -> Snapshot:
        step = self.script[min(self.polls, len(self.script) - 1)]
        self.polls += 1
        if isinstance(step, KafeedError):
            raise step
        return step


SETTINGS = AlertSettings(max_partition_lag=100, expected_brokers=1)


def run(cluster: Cluster, polls: int) -> list[Poll]:
    cluster.options = MonitorOptions(interval_s=0.001)  # the loop's waits, not the test's time
    seen: list[Poll] = []
    stop = threading.Event()
    Watch(cluster, SETTINGS).run(seen.append, stop=stop, polls=polls)
    return seen


def test_each_poll_is_evaluated_exported_and_handed_over() -> None:
    cluster = Cluster(snapshot(1.0), snapshot(2.0, lag=500), snapshot(3.0, lag=500), snapshot(4.0))
    polls = run(cluster, 4)
    assert cluster.polls == 4 and [p.time for p in polls] == [1.0, 2.0, 3.0, 4.0]
    assert all(p.error is None and p.snapshot is not None for p in polls)
    assert [[(e.rule, e.status) for e in p.events] for p in polls] == [
        [], [("lag", "firing")], [], [("lag", "resolved")]]  # fires once, resolves once
    assert [c.rule for c in polls[2].firing] == ["lag"] and polls[3].firing == []
    assert m.REGISTRY.get_sample_value("kafeed_brokers_up") == 1.0


def test_an_unreachable_cluster_is_a_poll_that_fires_broker_down_and_keeps_other_alerts() -> None:
    down = BrokerUnavailable("nothing at h:9092")
    cluster = Cluster(snapshot(1.0, lag=500), down, down, snapshot(4.0, lag=500))
    polls = run(cluster, 4)
    assert polls[1].snapshot is None and polls[1].error is down
    assert [(e.rule, e.status) for e in polls[1].events] == [("broker_down", "firing")]
    assert "no broker answers: nothing at h:9092" in polls[1].events[0].message
    assert polls[2].events == []  # still down: no second alert
    assert {c.rule for c in polls[2].firing} == {"broker_down", "lag"}  # lag kept while blind
    assert [(e.rule, e.status) for e in polls[3].events] == [("broker_down", "resolved")]
    assert m.REGISTRY.get_sample_value("kafeed_brokers_up") == 1.0


def test_other_errors_change_no_alert() -> None:
    polls = run(Cluster(snapshot(1.0, lag=500), KafeedError("the admin call timed out")), 2)
    assert str(polls[1].error) == "the admin call timed out" and polls[1].events == []
    assert [c.rule for c in polls[1].firing] == ["lag"]


def test_a_set_stop_event_ends_the_loop_after_the_poll_in_progress() -> None:
    stop = threading.Event()
    stop.set()
    seen: list[Poll] = []
    Watch(Cluster(snapshot(1.0)), SETTINGS).run(seen.append, stop=stop)
    assert len(seen) == 1


def test_sample_polls_an_interval_apart_and_keeps_every_event() -> None:
    slept: list[float] = []
    cluster = Cluster(snapshot(1.0), snapshot(2.0, lag=500), snapshot(3.0))
    poll = Watch(cluster, SETTINGS).sample(3, sleep=slept.append)
    assert slept == [7.0, 7.0] and poll.time == 3.0 and poll.snapshot is not None
    assert [(e.rule, e.status) for e in poll.events] == [("lag", "firing"), ("lag", "resolved")]
    with pytest.raises(BrokerUnavailable):  # one look at a cluster that is not there shows nothing
        Watch(Cluster(BrokerUnavailable("gone")), SETTINGS).sample(1)
    with pytest.raises(ValueError, match="samples"):
        Watch(Cluster(snapshot(1.0)), SETTINGS).sample(0)
