"""Files for the operator's own Prometheus and Grafana, shipped in the package.

``prometheus.yml`` (scrape jobs), ``alerts.yml`` (alert rules) and
``grafana-dashboard.json``: copy them from :data:`DIRECTORY`
(``python -c "import kafeed.deploy as d; print(d.DIRECTORY)"``).
"""

from __future__ import annotations

from pathlib import Path

DIRECTORY = Path(__file__).resolve().parent
FILES = ("prometheus.yml", "alerts.yml", "grafana-dashboard.json")
