"""`kafeed monitor`: cluster health, throughput, Burrow lag, disk and alerts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kafeed.cli.common import BootstrapOpt, ConfigOpt, JsonOpt, connection, console, out, print_json
from kafeed.errors import BrokerUnavailable, ConfigError, KafeedError, invalid_settings

if TYPE_CHECKING:
    from kafeed.config import ConnectionSettings


def _options(config: Path | None, overrides: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    from kafeed.config import read_settings_file
    from kafeed.monitor.watch import MonitorOptions

    values = dict(read_settings_file(config).get("monitor", {}))
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return MonitorOptions(**values)
    except ValidationError as exc:
        raise invalid_settings(exc, what="monitor settings",
                               hint="Fix the flags or the [monitor] table.") from None


def _find_data_dir(settings: ConnectionSettings) -> Path | None:
    """The default local cluster's data dir, when it is the cluster being monitored."""
    from kafeed.broker import default_data_dir
    from kafeed.monitor.disk import local_cluster_bootstrap

    candidate = default_data_dir()
    return candidate if local_cluster_bootstrap(candidate) == settings.bootstrap else None


def monitor(
    interval: Annotated[float | None, typer.Option(
        help="Seconds between polls [default: 5, or [monitor] interval_s].", show_default=False)] = None,
    window: Annotated[int | None, typer.Option(
        help="Committed-offset observations per partition for the lag rules [default: 10].",
        show_default=False)] = None,
    allowed_lag: Annotated[int | None, typer.Option(
        help="Lag that still counts as caught up [default: 0].", show_default=False)] = None,
    group: Annotated[list[str] | None, typer.Option(
        "--group", "-g", help="Only this consumer group (repeatable) [default: all].",
        show_default=False)] = None,
    data_dir: Annotated[Path | None, typer.Option(
        help="Local cluster data dir, for disk usage [default: found when it is the monitored one].",
        show_default=False)] = None,
    once: Annotated[bool, typer.Option(help="Poll --samples times, print once, exit.")] = False,
    samples: Annotated[int, typer.Option(
        help="With --once: polls --interval apart before printing; lag rules need a window.")] = 1,
    prometheus_port: Annotated[int | None, typer.Option(
        help="Serve the cluster-side figures as Prometheus metrics on this port.",
        show_default=False)] = None,
    prometheus_addr: Annotated[str, typer.Option(help="Address for --prometheus-port.")] = "127.0.0.1",
    scrape: Annotated[list[str] | None, typer.Option(
        help="A stage's metrics URL, read for the producer error rate (repeatable).",
        show_default=False)] = None,
    quiet: Annotated[bool, typer.Option(help="No dashboard: poll, export and alert only.")] = False,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Watch the cluster: brokers, partitions, topic rates, consumer lag, disk, alerts."""
    from rich.live import Live

    from kafeed.monitor.alerts import AlertEngine, Condition, load_alert_settings
    from kafeed.monitor.dashboard import render, render_error
    from kafeed.monitor.export import export_snapshot, export_unreachable
    from kafeed.monitor.rules import conditions
    from kafeed.monitor.watch import ClusterMonitor
    from kafeed.telemetry.metrics import serve_metrics

    if samples < 1:
        raise ConfigError(f"Invalid monitor settings: samples: got {samples}, should be at least 1.")
    if prometheus_port is not None and not 0 <= prometheus_port <= 65535:
        raise ConfigError(f"Invalid monitor settings: prometheus_port: got {prometheus_port}, "
                          "should be between 0 (any free port) and 65535.")
    settings = connection(bootstrap, config)
    if data_dir is None:
        data_dir = _find_data_dir(settings)
    options = _options(config, {"interval_s": interval, "window": window, "allowed_lag": allowed_lag,
                                "groups": group or None, "data_dir": data_dir, "scrape": scrape or None})
    alert_settings = load_alert_settings(config)
    engine = AlertEngine(alert_settings)
    watcher = ClusterMonitor(settings, options=options, expected_brokers=alert_settings.expected_brokers)
    if prometheus_port is not None:
        try:
            port = serve_metrics(prometheus_port, addr=prometheus_addr)
        except OSError as exc:  # taken, or an address not ours: a usage error, not a crash
            raise ConfigError(
                f"Cannot serve metrics on {prometheus_addr}:{prometheus_port}: {exc.strerror or exc}.",
                hint="Pick a free --prometheus-port or another --prometheus-addr.") from None
        console.print(f"Serving metrics on http://{prometheus_addr}:{port}/metrics", highlight=False)

    def step() -> Any:
        snap = watcher.poll()
        events = engine.evaluate(conditions(snap, alert_settings), now=snap.time)
        export_snapshot(snap, engine.firing)
        return snap, events

    def safe_step() -> Any:
        """A poll that survives an unreachable cluster: alert, show it, try again next time."""
        try:
            return step()
        except KafeedError as exc:
            if isinstance(exc, BrokerUnavailable):
                cond = Condition("broker_down", "cluster", True, f"no broker answers: {exc.message}",
                                 value=0, threshold=alert_settings.expected_brokers)
                # Nothing else is known this poll: keep the other alerts as they were.
                engine.evaluate([cond] if alert_settings.broker_down else [], resolve_missing=False)
                export_unreachable(engine.firing)
            return exc, []

    try:
        if once:
            events: list[Any] = []
            for i in range(samples):
                if i:
                    time.sleep(options.interval_s)
                snap, new = step()
                events += new
            if json_out:
                doc = snap.as_dict()
                doc["alerts"] = {"firing": [vars(c) for c in engine.firing],
                                 "events": [e.as_dict() for e in events]}
                print_json(doc)
            else:
                out.print(render(snap, engine.firing))
            return

        if quiet or json_out:
            while True:
                snap, _ = safe_step()
                if json_out:
                    print_json(snap.as_dict() if not isinstance(snap, KafeedError)
                               else {"time": time.time(), "error": str(snap)})
                time.sleep(options.interval_s)

        from rich.live import Live

        def view(snap: Any) -> Any:
            if isinstance(snap, KafeedError):
                return render_error(str(snap), engine.firing, bootstrap=settings.bootstrap)
            return render(snap, engine.firing, interval=options.interval_s)

        with Live(view(safe_step()[0]), console=out, refresh_per_second=4, screen=False) as live:
            while True:
                time.sleep(options.interval_s)
                live.update(view(safe_step()[0]))
    finally:
        watcher.close()
