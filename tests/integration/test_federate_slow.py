"""Three site clusters and the training cluster, three rounds, through a site SIGKILLed while it
trains and the coordinator SIGKILLed mid-round: every aggregate equals the sample-weighted mean
of the updates its round accepted, read from each site's own ledger; no update counts twice;
every site's loader resumed exactly; no site record reaches any topic of the training cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from kafeed.broker import LocalCluster, free_port_block
from kafeed.config import ConnectionSettings
from kafeed.federate.config import load_federation
from kafeed.kafka import KafkaClients
from kafeed.topics import TopicAdmin, plan_topic
from tests.integration.federate_support import (
    assert_loader_resumed_exactly,
    assert_no_round_counted_twice,
    check_rounds_from_ledgers,
    produce_site_docs,
    scan_for,
    write_job,
)
from tests.integration.process_output import StderrLines

SITES = ("site-a", "site-b", "site-c")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def site_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalCluster]]:
    made = {name: LocalCluster(tmp_path_factory.mktemp(name), nodes=1, port=free_port_block(2),
                               heap_mb=384, jit="quick") for name in SITES}
    try:
        with ThreadPoolExecutor(len(made)) as pool:
            list(pool.map(lambda c: c.start(timeout=180), made.values()))
        yield made
    finally:
        for cluster in made.values():
            cluster.stop(timeout=15, purge=True)


def _cli(*args: str) -> tuple[subprocess.Popen[str], StderrLines]:
    proc = subprocess.Popen([sys.executable, "-m", "kafeed.cli.main", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "250"})
    return proc, StderrLines(proc)


def _kill(proc: subprocess.Popen[str], lines: StderrLines) -> str:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.stdout is not None
    proc.stdout.close()
    return lines.close()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_three_sites_three_rounds_through_kills(kafka: ConnectionSettings,
                                                site_clusters: dict[str, LocalCluster],
                                                tmp_path: Path) -> None:
    # Markers of this run's site records: the training cluster is the session's broker, where
    # other tests keep site topics of their own.
    markers = {name: f"secret{name}-{uuid.uuid4().hex[:8]}".encode() for name in SITES}
    sites = {}
    for seed, (name, cluster) in enumerate(site_clusters.items()):
        TopicAdmin(ConnectionSettings(bootstrap=cluster.bootstrap)).create(
            plan_topic("tokens", brokers=1, partitions=2), exist_ok=True)
        produce_site_docs(cluster.bootstrap, "tokens", 200, seed=seed + 1, marker=markers[name])
        sites[name] = (cluster.bootstrap, "tokens")
    path = write_job(tmp_path / "job.toml", training=kafka.bootstrap, sites=sites,
                     state_dir=tmp_path / "state",
                     rounds=3, local_steps=6, batch_size=4, lr=0.05, quorum=2, deadline_s=6.0,
                     late_policy="next")
    settings = load_federation(path)
    setup = subprocess.run([sys.executable, "-m", "kafeed.cli.main", "federate", "setup", "--config",
                            str(path), "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert setup.returncode == 0, setup.stderr
    assert len(json.loads(setup.stdout)["created"]) == 2 + len(SITES)

    coordinator, coordinator_lines = _cli("federate", "coordinator", "--config", str(path))
    runners = {name: _cli("federate", "site", "--config", str(path), "--site", name) for name in SITES}

    # site-b dies while it trains for round 2, and comes back.
    proc, lines = runners["site-b"]
    lines.wait_for("site=site-b round=2")
    _kill(proc, lines)
    runners["site-b"] = _cli("federate", "site", "--config", str(path), "--site", "site-b")

    # The coordinator dies once an update of round 3 is in, before it publishes version 3.
    coordinator_lines.wait_for("round=3 site=", timeout=300)
    first_run = _kill(coordinator, coordinator_lines)
    assert "version=3" not in first_run, first_run[-2000:]
    coordinator, coordinator_lines = _cli("federate", "coordinator", "--config", str(path), "--json")
    out, err = coordinator_lines.finish(timeout=300)
    assert coordinator.returncode == 0, err[-3000:]
    summary = json.loads(out)
    assert summary["final_version"] == 3 and summary["resumed_at"] in (2, 3), summary
    for name, (proc, lines) in runners.items():
        _, site_err = lines.finish(timeout=120)
        assert proc.returncode == 0, (name, site_err[-3000:])

    contributors = check_rounds_from_ledgers(settings)
    assert all(len(names) >= 2 for names in contributors), contributors
    assert_no_round_counted_twice(settings)
    for name in SITES:
        assert_loader_resumed_exactly(settings, name)
    records = scan_for(KafkaClients(kafka), list(markers.values()))
    assert records > 0
