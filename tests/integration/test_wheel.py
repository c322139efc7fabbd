"""The built wheel, installed with pip's usual path into a fresh venv outside the checkout,
runs the platform: --version, a broker, the demo end to end, stop. The sdist carries the same
run-time files (corpus, proto, Prometheus and Grafana files)."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from kafeed.broker import free_port_block

ROOT = Path(__file__).resolve().parents[2]
RUNTIME_FILES = ("kafeed/data/tinyshakespeare.txt.gz", "kafeed/py.typed", "kafeed/deploy/alerts.yml",
                 "kafeed/deploy/prometheus.yml", "kafeed/deploy/grafana-dashboard.json",
                 "kafeed/jars/kafka-libs.pom.xml")


def _run(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    tail = f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, f"{args}: exit {proc.returncode}\n{tail}"
    return proc


@pytest.mark.slow
def test_wheel_installs_and_runs_the_demo_outside_the_checkout(tmp_path: Path) -> None:
    uv = Path(sys.executable).parent / "uv"
    dist = tmp_path / "dist"
    _run([str(uv), "build", "--wheel", "--sdist", "--out-dir", str(dist), str(ROOT)], tmp_path, 600)
    wheel = next(dist.glob("kafeed-*.whl"))
    sdist = next(dist.glob("kafeed-*.tar.gz"))
    names = set(zipfile.ZipFile(wheel).namelist())
    assert all(f in names for f in RUNTIME_FILES), sorted(set(RUNTIME_FILES) - names)
    assert any(n.startswith("kafeed/schema/") and n.endswith(".proto") for n in names)
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
    assert all(f"src/{f}" in members for f in RUNTIME_FILES)

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 300)
    py = venv / "bin" / "python"
    _run([str(uv), "pip", "install", "--python", str(py), "-q", f"{wheel}[torch]"], tmp_path, 600)
    kafeed = str(venv / "bin" / "kafeed")
    version = _run([kafeed, "--version"], tmp_path, 60).stdout
    assert version.startswith("kafeed ") and "Kafka 4." in version and "librdkafka" in version
    cluster = tmp_path / "cluster"
    port = free_port_block(2)
    _run([kafeed, "broker", "start", "--data-dir", str(cluster), "--port", str(port), "--jit", "quick"],
         tmp_path, 180)
    try:
        demo = _run([kafeed, "demo", "--data-dir", str(cluster), "--steps", "20",
                     "--runs-dir", str(tmp_path / "runs")], tmp_path, 600)
        assert "Traceback" not in demo.stderr
    finally:
        _run([kafeed, "broker", "stop", "--data-dir", str(cluster)], tmp_path, 120)
