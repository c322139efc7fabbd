"""Task queue throughput and dispatch latency: no-op handlers on 1, 2 and 4 worker processes.

Not a test. Starts its own single-node LocalCluster on free ports in a temp dir (or uses
``--bootstrap``). For each worker count: start the workers (``kafeed tasks worker --handler
tests.integration.task_handlers:noop``), wait for their readiness lines, submit ``--tasks``
at once, and time first submit → last result (tasks dispatched, run, acknowledged and
their results written). Then, on the same workers, submit at half that rate and report
the dispatch latency (a result's ``started_at`` − the task's ``submitted_at``) p50/p99.

    python benchmarks/bench_tasks.py --tasks 2000 --concurrency 8
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.tasks import QueueSettings, make_task, submit_tasks
from kafeed.tasks.results import ResultsView
from kafeed.tasks.writer import TaskWriter

ROOT = Path(__file__).resolve().parents[1]


def start_workers(bootstrap: str, prefix: str, n: int, concurrency: int,
                  logs: Path) -> list[subprocess.Popen[bytes]]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    procs = []
    for i in range(n):
        with (logs / f"{prefix}-{i}.err").open("wb") as sink:
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "kafeed.cli.main", "tasks", "worker", "--kind", "noop",
                 "--handler", "tests.integration.task_handlers:noop", "--concurrency", str(concurrency),
                 "--prefix", prefix, "-b", bootstrap], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                stderr=sink))
    deadline = time.monotonic() + 120
    for i in range(n):
        while b"ready" not in (logs / f"{prefix}-{i}.err").read_bytes():
            if time.monotonic() > deadline:
                raise SystemExit(f"worker {i} did not get ready: see {logs}")
            time.sleep(0.1)
    return procs


def wait_done(view: ResultsView, keys: list[str], timeout: float = 600) -> float:
    deadline = time.monotonic() + timeout
    while True:
        snap = view.snapshot()
        if all((r := snap.get(k)) is not None and r.status == "succeeded" for k in keys):
            return time.time()
        if time.monotonic() > deadline:
            raise SystemExit("tasks did not finish in time")
        time.sleep(0.02)


def run(bootstrap: str, workers: int, tasks: int, concurrency: int, logs: Path) -> dict[str, float]:
    conn = ConnectionSettings(bootstrap=bootstrap)
    prefix = f"bench-{workers}w-{uuid.uuid4().hex[:6]}"
    settings = QueueSettings(prefix=prefix, partitions=max(4, workers))
    submit_tasks(conn, [], settings=settings)  # results and parked topics
    submit_tasks(conn, [make_task(kind="noop", key="warm-up")], settings=settings, create_queue=True)
    procs = start_workers(bootstrap, prefix, workers, concurrency, logs)
    view = ResultsView(conn, settings.results_topic).start()
    try:
        wait_done(view, ["warm-up"])
        keys = [f"t{i}" for i in range(tasks)]
        start = time.time()
        submit_tasks(conn, [make_task(kind="noop", key=k) for k in keys], settings=settings)
        rate = tasks / (wait_done(view, keys) - start)
        # latency at half the rate: paced submits, one record each
        writer = TaskWriter(conn, settings)
        paced = [f"p{i}" for i in range(min(tasks, max(50, int(rate * 5))))]
        gap = 2.0 / rate
        t0 = time.time()
        for i, key in enumerate(paced):
            time.sleep(max(0.0, t0 + i * gap - time.time()))
            writer.tasks([make_task(kind="noop", key=key)])
            writer.flush()
        wait_done(view, paced)
        snap = view.snapshot()
        lat = sorted(snap[k].started_at - snap[k].submitted_at for k in paced)
        return {"tasks_per_s": rate, "p50_ms": 1000 * statistics.median(lat),
                "p99_ms": 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))]}
    finally:
        view.close()
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8, help="threads per worker")
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--bootstrap", help="use this cluster instead of starting one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster = None
        bootstrap = args.bootstrap
        if bootstrap is None:
            cluster = LocalCluster(Path(tmp) / "kafka", nodes=1, port=free_port_block(2), heap_mb=768)
            cluster.start()
            bootstrap = cluster.bootstrap
        try:
            rows = [(int(n), run(bootstrap, int(n), args.tasks, args.concurrency, Path(tmp)))
                    for n in args.workers.split(",")]
        finally:
            if cluster is not None:
                cluster.stop(timeout=15, purge=True)
    base = rows[0][1]["tasks_per_s"]
    print(f"{'workers':>7} {'tasks/s':>9} {'x 1st':>6} {'p50 ms':>8} {'p99 ms':>8}   "
          f"({args.tasks} no-op tasks, concurrency {args.concurrency} per worker)")
    for n, r in rows:
        print(f"{n:>7} {r['tasks_per_s']:>9.0f} {r['tasks_per_s'] / base:>6.2f} "
              f"{r['p50_ms']:>8.1f} {r['p99_ms']:>8.1f}")


if __name__ == "__main__":
    main()
