"""kafeed.deploy: the Prometheus config, alert rules and Grafana dashboard name only real kafeed metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kafeed.deploy import DIRECTORY
from kafeed.telemetry.metrics import REGISTRY

DEPLOY = DIRECTORY
KUBERNETES = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"


#: The sample names a scrape shows for a family of each type (prometheus_client's exposition;
#: ``_created`` series are left out: no deploy file should graph them).
_SAMPLE_SUFFIXES = {"counter": ("_total",), "gauge": ("",), "histogram": ("_bucket", "_sum", "_count"),
                    "summary": ("", "_sum", "_count"), "info": ("_info",)}


def exposed_names() -> set[str]:
    """Every ``kafeed_*`` name a scrape of kafeed's registry can show, as it is exposed.

    A counter ``kafeed_x`` shows as ``kafeed_x_total`` only, a gauge under its own name only:
    a dashboard that adds ``_total`` to a gauge, or leaves it off a counter, graphs nothing.
    """
    names: set[str] = set()
    for family in REGISTRY.collect():
        names |= {family.name + suffix for suffix in _SAMPLE_SUFFIXES[family.type]}
    return names


def test_exposed_names_follow_the_exposition() -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    names = exposed_names()
    scraped = {s.name for fam in text_string_to_metric_families(generate_latest(REGISTRY).decode())
               for s in fam.samples if not s.name.endswith("_created")}
    assert scraped and scraped <= names, sorted(scraped - names)
    assert "kafeed_records_in_total" in names and "kafeed_records_in" not in names
    assert "kafeed_brokers_up" in names and "kafeed_brokers_up_total" not in names


@pytest.mark.parametrize("name", ["alerts.yml", "grafana-dashboard.json"])
def test_deploy_files_use_defined_metrics(name: str) -> None:
    text = (DEPLOY / name).read_text()
    used = set(re.findall(r"\bkafeed_[a-z_]+", text))
    assert used, f"{name} names no kafeed metric"
    assert used <= exposed_names(), sorted(used - exposed_names())


def test_dashboard_is_valid_grafana_json() -> None:
    dash = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    assert dash["uid"] and dash["panels"]
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            assert target["expr"].strip()


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool (Debian package prometheus) is not installed")
def test_promtool_accepts_config_and_rules() -> None:
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "alerts.yml"]):
        proc = subprocess.run(["promtool", *args], cwd=DEPLOY, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_kubernetes_workers_scale_on_the_group_they_run_in() -> None:
    yaml = pytest.importorskip("yaml")
    import typer.main

    from kafeed.cli.main import app

    docs = list(yaml.safe_load_all((KUBERNETES / "prepare-workers.yaml").read_text()))
    by_kind = {d["kind"]: d for d in docs}
    assert set(by_kind) == {"Deployment", "ScaledObject"}
    deployment, scaled = by_kind["Deployment"], by_kind["ScaledObject"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    command = typer.main.get_command(app).commands[args[0]]  # type: ignore[attr-defined]
    known = {opt for p in command.params for opt in p.opts}
    given = [a for a in args[1:] if a.startswith("--")]
    assert given and set(given) <= known, sorted(set(given) - known)
    option = dict(zip(args[1::2], args[2::2], strict=False))
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    trigger = scaled["spec"]["triggers"][0]
    assert trigger["type"] == "kafka"
    assert trigger["metadata"]["consumerGroup"] == option["--group"]
    assert trigger["metadata"]["topic"] == option["--input"]
    assert trigger["metadata"]["allowIdleConsumers"] == "false"
    assert 1 <= scaled["spec"]["minReplicaCount"] <= scaled["spec"]["maxReplicaCount"]
    assert deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= 60
