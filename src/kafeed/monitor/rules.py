"""The alert rules: a :class:`Snapshot` and the ``[alerts]`` settings in, conditions out."""

from __future__ import annotations

from kafeed.monitor.alerts import AlertSettings, Condition
from kafeed.monitor.snapshot import Snapshot


def conditions(snapshot: Snapshot, settings: AlertSettings) -> list[Condition]:
    """One condition per (rule, subject) the settings enable, active or not."""
    out: list[Condition] = []
    if settings.broker_down:
        expected = settings.expected_brokers or snapshot.brokers_expected
        up = snapshot.brokers_up
        missing = ", ".join(str(b) for b in snapshot.missing_brokers) or "unknown ids"
        out.append(Condition(
            "broker_down", "cluster", up < expected,
            f"{up} of {expected} brokers up (missing: {missing})" if up < expected
            else f"all {expected} brokers up",
            value=up, threshold=expected))
    for view in snapshot.groups:
        group = view.lag.group
        if settings.group_not_ok_intervals > 0:
            worst = view.lag.worst
            where = "" if worst is None else f"; worst {worst.topic}-{worst.partition} {worst.status}"
            out.append(Condition("group_status", group, view.lag.status != "OK",
                                 f"group {group} is {view.lag.status}{where}"))
        if settings.max_partition_lag is not None:
            top = max((p.lag for p in view.lag.partitions), default=0)
            out.append(Condition("lag", group, top > settings.max_partition_lag,
                                 f"group {group} max partition lag {top} "
                                 f"(threshold {settings.max_partition_lag})",
                                 value=top, threshold=settings.max_partition_lag))
    if settings.max_producer_error_rate is not None and snapshot.producer_error_rate is not None:
        rate = snapshot.producer_error_rate
        out.append(Condition("producer_errors", "pipeline", rate > settings.max_producer_error_rate,
                             f"produce errors {rate:.3g}/s (threshold {settings.max_producer_error_rate}/s)",
                             value=rate, threshold=settings.max_producer_error_rate))
    if settings.max_disk_used_ratio is not None:
        for disk in snapshot.disk:
            ratio = disk.used_ratio
            if ratio is None:
                continue
            out.append(Condition("disk", f"broker {disk.broker} {disk.log_dir}",
                                 ratio > settings.max_disk_used_ratio,
                                 f"broker {disk.broker} log dir {disk.log_dir} filesystem "
                                 f"{ratio:.0%} full (threshold {settings.max_disk_used_ratio:.0%})",
                                 value=round(ratio, 4), threshold=settings.max_disk_used_ratio))
    for q in snapshot.queues:
        subject = f"{q['prefix']}.{q['kind']}"
        if settings.max_task_wait_s is not None:
            age = q["oldest_waiting_s"] or 0.0
            out.append(Condition("task_wait", subject, age > settings.max_task_wait_s,
                                 f"the oldest of {q['queued']} queued {q['kind']} task(s) has waited "
                                 f"{age:,.0f} s (threshold {settings.max_task_wait_s:g} s)",
                                 value=round(age, 1), threshold=settings.max_task_wait_s))
        if settings.tasks_parked:
            out.append(Condition("tasks_parked", subject, q["parked"] > 0,
                                 f"{q['parked']} {q['kind']} task(s) parked; `kafeed tasks retry` "
                                 "puts them back", value=q["parked"], threshold=0))
    return out
