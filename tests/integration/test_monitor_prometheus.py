"""A real Prometheus server scrapes `kafeed monitor --prometheus-port` and answers queries."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import kafeed
from kafeed.broker import free_port_block
from kafeed.config import ConnectionSettings
from tests.kafka_fixtures import TopicFactory


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists()
                                            else None)
    if found is None:
        pytest.skip("Prometheus is not installed (Debian: apt-get install -y prometheus)")
    return found


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Every process a test starts, stopped (and reaped) whatever happens."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        yield procs
    finally:
        for proc in reversed(procs):
            stop(proc)


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("wb") as fh:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=fh)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    doc = get_json(url)
    assert doc["status"] == "success", doc
    result: list[dict[str, Any]] = doc["data"]["result"]
    return result


def test_prometheus_scrapes_kafeed_metrics(kafka: ConnectionSettings, make_topic: TopicFactory,
                                           tmp_path: Path, processes: list[subprocess.Popen[bytes]]) -> None:
    binary = prometheus_binary()
    topic = make_topic(partitions=2)
    base = free_port_block(2)
    metrics_port, prom_port = base, base + 1
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(kafeed.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    processes.append(spawn(
        [sys.executable, "-m", "kafeed.cli.main", "monitor", "-b", kafka.bootstrap, "--quiet",
         "--interval", "1", "--prometheus-port", str(metrics_port)], tmp_path / "monitor.log", env))
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: kafeed\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    processes.append(spawn(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--storage.tsdb.retention.time=1h"],
        tmp_path / "prometheus.log"))
    deadline = time.monotonic() + 90
    result: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        for proc, name in zip(processes, ("monitor.log", "prometheus.log"), strict=True):
            assert proc.poll() is None, (tmp_path / name).read_text()[-2000:]
        try:
            result = query(prom_port, f'kafeed_topic_high_watermark{{topic="{topic}"}}')
        except OSError:
            result = []  # Prometheus still starting
        if len(result) == 2:
            break
        time.sleep(1)
    assert sorted(r["metric"]["partition"] for r in result) == ["0", "1"]
    assert all(r["metric"]["job"] == "kafeed" for r in result)
    up = query(prom_port, "kafeed_brokers_up")
    assert [float(r["value"][1]) for r in up] == [1.0]
    targets = get_json(f"http://127.0.0.1:{prom_port}/api/v1/targets")["data"]["activeTargets"]
    assert [t["health"] for t in targets] == ["up"]
    for proc in processes:
        stop(proc)
    assert all(proc.poll() is not None for proc in processes)


def test_prometheus_scrapes_a_running_prepare(
        kafka: ConnectionSettings, make_topic: TopicFactory, tmp_path: Path,
        processes: list[subprocess.Popen[bytes]]) -> None:
    from tests.prepare_support import paragraphs, produce, sample_record

    binary = prometheus_binary()
    raw = make_topic(partitions=2)
    produced = produce(kafka, raw, [sample_record(t) for t in paragraphs(60)])
    base = free_port_block(2)
    metrics_port, prom_port = base, base + 1
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(kafeed.__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    # streaming (no --until-caught-up): it keeps running, as in production, until SIGTERM
    prepare = spawn(
        [sys.executable, "-m", "kafeed.cli.main", "prepare", "-i", raw, "-o", f"{raw}.tokens",
         "-g", f"g-{raw}", "--batch-size", "20", "-b", kafka.bootstrap, "--json",
         "--metrics-port", str(metrics_port)], tmp_path / "prepare.log", env)
    processes.append(prepare)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: kafeed-prepare\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n"
    )
    processes.append(spawn(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--storage.tsdb.retention.time=1h"],
        tmp_path / "prometheus.log"))
    expr = f'kafeed_records_in_total{{stage="prepare",topic="{raw}"}}'
    deadline = time.monotonic() + 120
    seen = 0.0
    while time.monotonic() < deadline:
        for proc, name in zip(processes, ("prepare.log", "prometheus.log"), strict=True):
            assert proc.poll() is None, (tmp_path / name).read_text()[-2000:]
        try:
            result = query(prom_port, expr)
        except OSError:
            result = []  # Prometheus still starting
        seen = float(result[0]["value"][1]) if result else 0.0
        if seen >= produced:
            break
        time.sleep(1)
    assert seen == produced, (tmp_path / "prepare.log").read_text()[-2000:]
    out = query(prom_port, f'kafeed_records_out_total{{stage="prepare",topic="{raw}.tokens"}}')
    assert out and out[0]["metric"]["job"] == "kafeed-prepare" and float(out[0]["value"][1]) > 0
    commits = query(prom_port, 'kafeed_transactions_total{stage="prepare",result="commit"}')
    assert commits and float(commits[0]["value"][1]) >= 3  # 60 records, 20 per transaction
    prepare.send_signal(signal.SIGTERM)
    # stopped by SIGTERM: 143, work kept
    assert prepare.wait(timeout=60) == 143, (tmp_path / "prepare.log").read_text()[-2000:]
    for proc in processes:
        stop(proc)
    assert all(proc.poll() is not None for proc in processes)
