"""`kafeed tasks`: submit tasks, run workers, and see, retry or cancel what is queued."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kafeed.cli.common import (
    BootstrapOpt,
    ConfigOpt,
    JsonOpt,
    MetricsPortOpt,
    connection,
    console,
    existing_directory,
    existing_file,
    exit_stopped,
    out,
    print_json,
    start_metrics,
)
from kafeed.errors import ConfigError
from kafeed.signals import install

if TYPE_CHECKING:
    from kafeed.config import ConnectionSettings

app = typer.Typer(help="A task queue on Kafka share groups: submit, worker, status, retry, cancel.",
                  no_args_is_help=True)

PrefixOpt = Annotated[str | None, typer.Option(
    "--prefix", help="Topic prefix of the queue: <prefix>.<kind>, <prefix>.results, <prefix>.parked "
    "[default: tasks].", show_default=False)]


def _settings(prefix: str | None, **fields: Any) -> Any:
    from kafeed.tasks import queue_settings

    return queue_settings(prefix=prefix, **fields)


@app.command("submit")
def submit_command(
    kind: Annotated[str | None, typer.Option("--kind", "-k", help="Task kind (its queue).",
                                             show_default=False)] = None,
    key: Annotated[str | None, typer.Option("--key", help="Idempotency key.", show_default=False)] = None,
    params: Annotated[str, typer.Option("--params", help="Parameters, a JSON object.")] = "{}",
    priority: Annotated[int, typer.Option(help="Higher runs first among tasks fetched together.")] = 0,
    deadline: Annotated[float | None, typer.Option(
        help="Seconds from now after which the task is not started.", show_default=False)] = None,
    max_attempts: Annotated[int, typer.Option(help="Attempts before the task is parked.")] = 3,
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", help="JSON lines file: one task per line with kind, key, params "
        "(and optional priority, deadline, max_attempts).", show_default=False,
        callback=existing_file)] = None,
    directory: Annotated[Path | None, typer.Option(
        "--dir", help="One task of --kind per file in DIR: --params plus \"path\"; the key is "
        "--key (default: the kind and the topic param) + ':' + the file's path.",
        show_default=False, callback=existing_directory)] = None,
    create_queue: Annotated[bool, typer.Option(
        "--create-queue", help="Create the kind's queue topic when it does not exist.")] = False,
    prefix: PrefixOpt = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Put tasks on their kinds' queues."""
    import time

    from kafeed.tasks import directory_tasks, make_task, read_task_file, submit_tasks
    from kafeed.tasks.model import parse_params
    from kafeed.telemetry import metrics as m

    if file is not None:
        if kind or key or directory:
            raise ConfigError("Give either --file or --kind/--key, not both.")
        tasks = list(read_task_file(file))
    elif directory is not None:
        if not kind:
            raise ConfigError("--dir needs --kind.", hint="For example: kafeed tasks submit --kind "
                              "ingest-file --dir data/ --params '{\"topic\": \"raw\"}'.")
        tasks = directory_tasks(kind, directory, parse_params(params), key_prefix=key,
                                priority=priority, max_attempts=max_attempts,
                                deadline=None if deadline is None else time.time() + deadline)
    else:
        if not kind or not key:
            raise ConfigError("A task needs --kind and --key (or --file).",
                              hint="For example: kafeed tasks submit --kind evaluate --key ckpt-3 "
                              "--params '{\"step\": 3}'.")
        tasks = [make_task(kind=kind, key=key, params=parse_params(params), priority=priority,
                           deadline=None if deadline is None else time.time() + deadline,
                           max_attempts=max_attempts)]
    settings = _settings(prefix)
    n = submit_tasks(connection(bootstrap, config), tasks, settings=settings, create_queue=create_queue)
    for task in tasks:
        m.TASKS_SUBMITTED.labels(kind=task.kind).inc()
    if json_out:
        print_json({"submitted": n, "keys": [t.key for t in tasks]})
    else:
        out.print(f"Submitted {n} task(s).", highlight=False)


@app.command("worker")
def worker_command(
    kind: Annotated[str, typer.Option("--kind", "-k", help="Task kind to run.")],
    handler: Annotated[str | None, typer.Option(
        "--handler", help="module:function called with the params dict [default: the built-in "
        "kind (evaluate, ingest-file), else the 'kafeed.tasks' entry point named KIND].",
        show_default=False)] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c",
                                             help="Tasks run at once (threads, 1-256).")] = 1,
    timeout: Annotated[float, typer.Option(
        help="Seconds a task is locked to this worker before the queue may hand it to another "
        "(the share group's lock, 1-60).")] = 30.0,
    lease: Annotated[float, typer.Option(
        help="Seconds a running task's lease lasts without a heartbeat (renewed every quarter; "
        "at least 1).")] = 10.0,
    backoff: Annotated[float, typer.Option(help="First retry delay in seconds, doubled per attempt.")] = 1.0,
    max_backoff: Annotated[float, typer.Option(help="Longest retry delay in seconds.")] = 300.0,
    prefix: PrefixOpt = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
    metrics_port: MetricsPortOpt = None,
) -> None:
    """Run KIND's handler for each task on its queue until SIGTERM/Ctrl-C.

    A stop finishes the tasks already running, gives back the fetched ones not yet
    started, and exits 143 (SIGTERM) or 130 (SIGINT).
    """
    stop = install()
    from kafeed.tasks import Worker, load_handler
    from kafeed.tasks.settings import worker_settings
    from kafeed.tasks.worker import default_worker_id

    settings = _settings(prefix, backoff_s=backoff, max_backoff_s=max_backoff)
    limits = worker_settings(concurrency=concurrency, timeout_s=timeout, lease_s=lease)
    fn = load_handler(handler, kind)
    conn = connection(bootstrap, config)
    start_metrics(metrics_port)
    worker = Worker(conn, kind=kind, handler=fn, settings=settings, concurrency=limits.concurrency,
                    timeout_s=limits.timeout_s, lease_s=limits.lease_s, worker_id=default_worker_id(),
                    stop=stop.event)
    worker.prepare()

    def ready() -> None:
        console.print(f"Worker {worker.worker_id} ready: kind {kind}, queue "
                      f"{settings.queue_topic(kind)}, concurrency {concurrency}.", highlight=False)

    stats = worker.run(on_ready=ready)
    if json_out:
        print_json(stats.as_dict())
    else:
        console.print(" · ".join(f"{k} {v}" for k, v in stats.as_dict().items()), highlight=False)
    exit_stopped(stop, "Tasks not acknowledged are delivered again.")


@app.command("status")
def status_command(
    prefix: PrefixOpt = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Per kind: queued, in flight (and by which worker), done, failed, parked; oldest wait."""
    from dataclasses import asdict

    from rich.table import Table

    from kafeed.tasks.status import queue_status

    kinds = queue_status(_reachable(bootstrap, config), _settings(prefix))
    if json_out:
        print_json([asdict(k) for k in kinds])
        return
    if not kinds:
        out.print(f"No task queues under the prefix {_settings(prefix).prefix!r}.", highlight=False,
                  markup=False)
        return
    table = Table(title="kafeed tasks", title_justify="left")
    for col in ("kind", "queued", "in flight", "done", "failed", "parked", "cancelled", "oldest wait"):
        table.add_column(col)
    for k in kinds:
        age = "-" if k.oldest_waiting_s is None else f"{k.oldest_waiting_s:.0f}s"
        table.add_row(k.kind, *(str(n) for n in (k.queued, k.in_flight, k.done, k.failed, k.parked,
                                                  k.cancelled)), age)
    out.print(table)
    for k in kinds:
        for run in k.running:
            out.print(f"{k.kind}: {run['key']} on {run['worker']} (heartbeat {run['heartbeat_age_s']}s ago)",
                      highlight=False, markup=False)


def _reachable(bootstrap: str | None, config: Path | None) -> ConnectionSettings:
    """The connection, once a broker answers: else an unreachable cluster shows only when
    reading the results topic times out."""
    from kafeed.connect import check_reachable

    conn = connection(bootstrap, config)
    check_reachable(conn)
    return conn


@app.command("retry")
def retry_command(
    keys: Annotated[list[str] | None, typer.Argument(help="Keys to retry [default: every parked task].",
                                                     show_default=False)] = None,
    prefix: PrefixOpt = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Put parked tasks back on their queues with fresh attempts."""
    from kafeed.tasks.status import retry_parked

    again = retry_parked(_reachable(bootstrap, config), _settings(prefix), keys=keys or None)
    if json_out:
        print_json({"retried": [t.key for t in again]})
    else:
        out.print(f"Re-submitted {len(again)} parked task(s).", highlight=False)


@app.command("cancel")
def cancel_command(
    kind: Annotated[str, typer.Option("--kind", "-k", help="Task kind.")],
    keys: Annotated[list[str], typer.Argument(help="Idempotency keys to cancel.")],
    prefix: PrefixOpt = None,
    bootstrap: BootstrapOpt = None,
    config: ConfigOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Cancel submitted tasks by key: queued copies are acknowledged without running.

    A key never submitted is refused (exit 2) and nothing is cancelled.
    """
    from kafeed.tasks.cancel import cancel

    result = cancel(_reachable(bootstrap, config), _settings(prefix), kind, keys)
    if json_out:
        print_json({"cancelled": result.cancelled, "already_finished": result.already_finished})
        return
    done = f" ({len(result.already_finished)} already finished)" if result.already_finished else ""
    out.print(f"Cancelled {len(result.cancelled)} task(s){done}.", highlight=False)
