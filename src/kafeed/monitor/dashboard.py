"""The live terminal view of a :class:`Snapshot` (rich renderables, no I/O)."""

from __future__ import annotations

import time

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kafeed.monitor.alerts import Condition
from kafeed.monitor.snapshot import Snapshot
from kafeed.units import human_bytes

_STYLE = {"OK": "green", "WARN": "yellow", "ERR": "bold red", "STALL": "red", "STOP": "bold red",
          "REWIND": "magenta"}


def _rate(value: float | None) -> str:
    return "…" if value is None else f"{value:,.1f}/s"


def render(snapshot: Snapshot, firing: list[Condition] | None = None, *, interval: float = 0.0
           ) -> RenderableType:
    """The whole dashboard: cluster line, partitions, topics, groups, disk, task queues, alerts."""
    h = snapshot.health
    ok_brokers = snapshot.brokers_up >= snapshot.brokers_expected
    head = Text.assemble(
        ("brokers ", "bold"),
        (f"{snapshot.brokers_up}/{snapshot.brokers_expected} up", "green" if ok_brokers else "bold red"),
        (f" (missing {snapshot.missing_brokers})" if snapshot.missing_brokers else "", "red"),
        ("   controller ", "bold"),
        (str(h.controller_id) if h.controller_id is not None else "NONE",
         "green" if h.controller_id is not None else "bold red"),
        ("   partitions ", "bold"), f"{h.partitions_total} ",
        (f"under-replicated {h.under_replicated} ", "red" if h.under_replicated else "dim"),
        (f"offline {h.offline} ", "bold red" if h.offline else "dim"),
        (f"under-min-ISR {h.under_min_isr}", "red" if h.under_min_isr else "dim"),
    )
    parts: list[RenderableType] = [head]

    if h.problems:
        table = Table(title="partition problems", title_justify="left", expand=False)
        for col in ("topic", "partition", "leader", "replicas", "isr", "problems"):
            table.add_column(col)
        for prob in h.problems[:20]:
            table.add_row(prob.topic, str(prob.partition), str(prob.leader), str(prob.replicas),
                          str(prob.isr), Text(", ".join(prob.problems), "red"))
        parts.append(table)

    topics = Table(title="topics", title_justify="left")
    for col in ("topic", "partitions", "end offset", "in"):
        topics.add_column(col, justify="left" if col == "topic" else "right")
    for name, t in snapshot.topics.items():
        topics.add_row(name, str(t["partitions"]), f"{t['high_watermark']:,}", _rate(t["in_rate"]))
    parts.append(topics)

    groups = Table(title="consumer groups (Burrow rules)", title_justify="left")
    for col in ("group", "status", "members", "topic", "partition", "lag", "p.status", "out", "window"):
        groups.add_column(col, justify="right" if col in ("members", "lag", "out", "window") else "left")
    for view in snapshot.groups:
        g = view.lag
        first = True
        for p in g.partitions:
            groups.add_row(
                g.group if first else "", Text(g.status, _STYLE[g.status]) if first else "",
                str(view.members) if first else "", p.topic, str(p.partition), f"{p.lag:,}",
                Text(p.status, _STYLE[p.status]), _rate(view.out_rates.get(p.topic)) if first else "",
                f"{p.complete:.0%}",
            )
            first = False
    parts.append(groups)

    if snapshot.disk:
        disk = Table(title="disk", title_justify="left")
        for col in ("broker", "log dir", "kafka data", "free", "fs used"):
            disk.add_column(col)
        for d in snapshot.disk:
            ratio = d.used_ratio
            disk.add_row(str(d.broker), d.log_dir, human_bytes(d.used_bytes), human_bytes(d.free_bytes),
                         "n/a" if ratio is None else f"{ratio:.0%}")
        parts.append(disk)

    if snapshot.queues:
        queues = Table(title="task queues", title_justify="left")
        for col in ("queue", "queued", "in flight", "done", "failed", "parked", "oldest wait"):
            queues.add_column(col, justify="left" if col == "queue" else "right")
        for q in snapshot.queues:
            age = q["oldest_waiting_s"]
            queues.add_row(f"{q['prefix']}.{q['kind']}", *(f"{q[k]:,}" for k in (
                "queued", "in_flight", "done", "failed")),
                Text(f"{q['parked']:,}", "red" if q["parked"] else ""),
                "-" if age is None else f"{age:,.0f}s")
        parts.append(queues)

    if snapshot.sites:
        sites = Table(title="mirrored sites (kafeed mirror)", title_justify="left")
        for col in ("site", "reachable", "state", "behind", "last error"):
            sites.add_column(col, justify="right" if col == "behind" else "left")
        for s in snapshot.sites:
            behind = s["behind_records"]
            reachable = Text("yes", "") if s["reachable"] else Text("no", "bold red")
            sites.add_row(s["site"], reachable,
                          Text(s["state"] or "-", "green" if s["state"] == "RUNNING" else "red"),
                          Text(f"{behind:,}" if s["reachable"] else "-", "yellow" if behind else ""),
                          Text(s["last_error"] or ""))
        parts.append(sites)

    if snapshot.federated:
        rounds = Table(title="federated rounds (kafeed federate)", title_justify="left")
        for col in ("job", "version", "last round", "sites", "update MB", "round s", "staleness",
                    "late", "dropped", "rejected"):
            rounds.add_column(col, justify="left" if col in ("job", "sites") else "right")
        for j in snapshot.federated:
            rounds.add_row(j["job"], str(j["version"]), str(j["round"]), ", ".join(j["sites"]) or "-",
                           f"{j['update_bytes'] / 1e6:,.2f}", f"{j['round_seconds']:,.1f}",
                           str(j["staleness_max"]), str(j["late_folded"]),
                           Text(str(j["late_dropped"]), "yellow" if j["late_dropped"] else ""),
                           Text(str(j["rejected"]), "red" if j["rejected"] else ""))
        parts.append(rounds)

    if firing:
        alerts = Text("\n".join(f"● {c.rule} [{c.subject}]: {c.message}" for c in firing), "bold red")
        parts.append(Panel(alerts, title="alerts firing", border_style="red"))
    stamp = time.strftime("%H:%M:%S", time.localtime(snapshot.time))
    title = f"kafeed monitor · {snapshot.bootstrap} · {stamp}"
    if interval:
        title += f" · every {interval:g}s"
    return Panel(Group(*parts), title=title, title_align="left")


def render_error(message: str, firing: list[Condition] | None = None, *,
                 bootstrap: str = "") -> RenderableType:
    """The dashboard while the cluster does not answer (the monitor keeps polling)."""
    parts: list[RenderableType] = [Text(f"cluster unreachable: {message}", "bold red")]
    if firing:
        parts.append(Text("\n".join(f"● {c.rule} [{c.subject}]: {c.message}" for c in firing), "bold red"))
    stamp = time.strftime("%H:%M:%S")
    return Panel(Group(*parts), title=f"kafeed monitor · {bootstrap} · {stamp}", title_align="left",
                 border_style="red")
