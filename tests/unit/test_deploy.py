"""deploy/: the Prometheus config, alert rules and Grafana dashboard name only real kafeed metrics."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kafeed.telemetry.metrics import REGISTRY

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def exported_names() -> set[str]:
    names: set[str] = set()
    for family in REGISTRY.collect():
        names.add(family.name)
        names.add(f"{family.name}_total")
        if family.type == "histogram":
            names |= {f"{family.name}_{s}" for s in ("bucket", "sum", "count")}
    return names


@pytest.mark.parametrize("name", ["alerts.yml", "grafana-dashboard.json"])
def test_deploy_files_use_defined_metrics(name: str) -> None:
    text = (DEPLOY / name).read_text()
    used = set(re.findall(r"\bkafeed_[a-z_]+", text))
    assert used, f"{name} names no kafeed metric"
    assert used <= exported_names(), sorted(used - exported_names())


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
