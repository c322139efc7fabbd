"""`kafeed monitor`: cluster health, throughput, Burrow lag, disk and alerts."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kafeed.cli.common import (
    BootstrapOpt,
    ConfigOpt,
    JsonOpt,
    connection,
    console,
    existing_directory,
    existing_file,
    out,
    print_json,
)
from kafeed.errors import ConfigError, invalid_settings

if TYPE_CHECKING:
    from kafeed.config import ConnectionSettings
    from kafeed.monitor.loop import Poll, Watch


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
        show_default=False, callback=existing_directory)] = None,
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
    mirror_config: Annotated[Path | None, typer.Option(
        help="A `kafeed mirror` config: also show each site's replication lag.", show_default=False,
        callback=existing_file)] = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Watch the cluster: brokers, partitions, topic rates, consumer lag, disk, alerts."""
    from kafeed.monitor.alerts import load_alert_settings
    from kafeed.monitor.loop import Watch
    from kafeed.monitor.watch import ClusterMonitor

    if samples < 1:
        raise ConfigError(f"Invalid monitor settings: samples: got {samples}, should be at least 1.")
    if prometheus_port is not None and not 0 <= prometheus_port <= 65535:
        raise ConfigError(f"Invalid monitor settings: prometheus_port: got {prometheus_port}, "
                          "should be between 0 (any free port) and 65535.")
    settings = connection(bootstrap, config)
    if data_dir is None:
        data_dir = _find_data_dir(settings)
    options = _options(config, {"interval_s": interval, "window": window, "allowed_lag": allowed_lag,
                                "groups": group or None, "data_dir": data_dir, "scrape": scrape or None,
                                "mirror_config": mirror_config})
    alert_settings = load_alert_settings(config)
    watcher = ClusterMonitor(settings, options=options, expected_brokers=alert_settings.expected_brokers)
    try:
        if prometheus_port is not None:
            _serve(prometheus_port, prometheus_addr)
        watch = Watch(watcher, alert_settings)
        if once:
            _print_once(watch.sample(samples), json_out)
        elif quiet or json_out:
            watch.run(_print_json_line if json_out else lambda _poll: None)
        else:
            _live(watch, settings.bootstrap, options.interval_s)
    finally:
        watcher.close()


def _serve(port: int, addr: str) -> None:
    from kafeed.telemetry.metrics import serve_metrics

    try:
        bound = serve_metrics(port, addr=addr)
    except OSError as exc:  # taken, or an address not ours: a usage error, not a crash
        raise ConfigError(f"Cannot serve metrics on {addr}:{port}: {exc.strerror or exc}.",
                          hint="Pick a free --prometheus-port or another --prometheus-addr.") from None
    console.print(f"Serving metrics on http://{addr}:{bound}/metrics", highlight=False)


def _print_once(poll: Poll, json_out: bool) -> None:
    from kafeed.monitor.dashboard import render

    assert poll.snapshot is not None  # sample() raises instead of returning an error
    if json_out:
        doc = poll.snapshot.as_dict()
        doc["alerts"] = {"firing": [vars(c) for c in poll.firing],
                         "events": [e.as_dict() for e in poll.events]}
        print_json(doc)
    else:
        out.print(render(poll.snapshot, poll.firing))


def _print_json_line(poll: Poll) -> None:
    print_json(poll.snapshot.as_dict() if poll.snapshot is not None
               else {"time": poll.time, "error": str(poll.error)})


def _live(watch: Watch, bootstrap: str, interval_s: float) -> None:
    from rich.live import Live
    from rich.text import Text

    from kafeed.monitor.dashboard import render, render_error

    def view(poll: Poll) -> Any:
        if poll.snapshot is None:
            return render_error(str(poll.error), poll.firing, bootstrap=bootstrap)
        return render(poll.snapshot, poll.firing, interval=interval_s)

    with Live(Text(f"polling {bootstrap} ..."), console=out, refresh_per_second=4, screen=False) as live:
        watch.run(lambda poll: live.update(view(poll)))
