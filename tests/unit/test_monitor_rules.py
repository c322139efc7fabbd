"""Alert rules on synthetic snapshots, and LogDirsCommand output parsing."""

from __future__ import annotations

from kafeed.monitor.alerts import AlertSettings
from kafeed.monitor.disk import DiskUsage, parse_log_dirs
from kafeed.monitor.health import BrokerInfo, ClusterHealth, partition_problems
from kafeed.monitor.lag import GroupLag, PartitionLag
from kafeed.monitor.rules import conditions
from kafeed.monitor.snapshot import GroupView, Snapshot


def snapshot(*, brokers: int = 3, expected: int = 3, lag: int = 10, status: str = "OK",
             disk_free: int = 50, error_rate: float | None = None) -> Snapshot:
    health = ClusterHealth([BrokerInfo(i, "h", 9092) for i in range(1, brokers + 1)], 1, 3, 0, 0, 0)
    part = PartitionLag("t", 0, 90, 90 + lag, lag, "OK" if status == "OK" else "STOP", 1.0)
    group = GroupView(GroupLag("g", status, lag, [part]), "EMPTY", 0, {})  # type: ignore[arg-type]
    return Snapshot(0.0, "h:9092", health, expected, [], {}, [group],
                    [DiskUsage(1, "/d", 10, disk_free, 100)], error_rate)


def active(snap: Snapshot, settings: AlertSettings) -> set[tuple[str, str]]:
    return {(c.rule, c.subject) for c in conditions(snap, settings) if c.active}


def test_healthy_snapshot_has_no_active_condition() -> None:
    settings = AlertSettings(max_partition_lag=100, max_producer_error_rate=1.0)
    assert active(snapshot(error_rate=0.0), settings) == set()


def test_each_rule_fires_on_its_own_condition() -> None:
    settings = AlertSettings(max_partition_lag=100, max_producer_error_rate=1.0, max_disk_used_ratio=0.8)
    assert active(snapshot(brokers=2), settings) == {("broker_down", "cluster")}
    assert active(snapshot(lag=101), settings) == {("lag", "g")}
    assert active(snapshot(status="ERR"), settings) == {("group_status", "g")}
    assert active(snapshot(error_rate=2.5), settings) == {("producer_errors", "pipeline")}
    assert active(snapshot(disk_free=10), settings) == {("disk", "broker 1 /d")}  # 90% used


def queue(*, queued: int = 0, parked: int = 0, oldest: float | None = None) -> dict[str, object]:
    return {"prefix": "tasks", "kind": "evaluate", "queued": queued, "in_flight": 0, "done": 5,
            "failed": 0, "parked": parked, "cancelled": 0, "oldest_waiting_s": oldest}


def test_task_queue_rules_fire_on_an_old_waiting_task_and_on_parked_tasks() -> None:
    from dataclasses import replace

    settings = AlertSettings(max_task_wait_s=600)
    calm = replace(snapshot(), queues=[queue(queued=3, oldest=599.0)])
    assert active(calm, settings) == set()
    stuck = replace(snapshot(), queues=[queue(queued=3, oldest=601.0)])
    assert active(stuck, settings) == {("task_wait", "tasks.evaluate")}
    parked = replace(snapshot(), queues=[queue(parked=1)])
    assert active(parked, settings) == {("tasks_parked", "tasks.evaluate")}
    off = AlertSettings(max_task_wait_s=None, tasks_parked=False)
    assert conditions(replace(snapshot(), queues=[queue(queued=1, parked=1, oldest=1e6)]), off) == [
        c for c in conditions(snapshot(), off)]


def test_expected_brokers_setting_wins() -> None:
    assert active(snapshot(brokers=3, expected=3), AlertSettings(expected_brokers=4)) == {
        ("broker_down", "cluster")}


def test_disabled_rules_yield_no_condition() -> None:
    settings = AlertSettings(broker_down=False, group_not_ok_intervals=0, max_disk_used_ratio=None)
    assert conditions(snapshot(brokers=1, status="ERR", disk_free=0, error_rate=9.0), settings) == []


def test_partition_problems() -> None:
    assert partition_problems(1, [1, 2, 3], [1, 2, 3], 2) == []
    assert partition_problems(1, [1, 2, 3], [1, 3], 2) == ["under_replicated"]
    assert partition_problems(1, [1, 2, 3], [1], 2) == ["under_replicated", "under_min_isr"]
    assert partition_problems(-1, [2], [], 1) == ["offline", "under_replicated", "under_min_isr"]


def test_parse_log_dirs_output() -> None:
    text = (
        "Querying brokers for log directories information\n"
        "Received log directory information from brokers 1,2\n"
        '{"brokers":[{"broker":1,"logDirs":[{"partitions":[{"partition":"a-0","size":100,'
        '"offsetLag":0,"isFuture":false},{"partition":"a-1","size":50,"offsetLag":0,"isFuture":false}],'
        '"error":null,"logDir":"/nonexistent/kafka-1"}]},{"broker":2,"logDirs":[{"partitions":[],'
        '"error":null,"logDir":"/nonexistent/kafka-2"}]}],"version":1}\n'
    )
    usage = parse_log_dirs(text)
    assert [(u.broker, u.log_dir, u.used_bytes, u.free_bytes) for u in usage] == [
        (1, "/nonexistent/kafka-1", 150, None), (2, "/nonexistent/kafka-2", 0, None)]
    assert usage[0].used_ratio is None
