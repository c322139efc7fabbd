"""A federated job as the operator sees it: its last round, read from the round log.

``kafeed monitor`` shows one row per job it finds on the cluster and sets the cluster-side
``kafeed_federate_*`` gauges from it (the coordinator and the sites export their own figures
with ``--metrics-port``).
"""

from __future__ import annotations

from typing import Any

from kafeed.federate.blobs import blobs_of
from kafeed.kafka import KafkaClients
from kafeed.telemetry import metrics as m


def job_rounds(clients: KafkaClients, job: str) -> dict[str, Any]:
    """Version, last round, its sites, update bytes, round time, staleness and counts of ``job``."""
    metas = [blob.arrays()[1] for blob in blobs_of(clients.read_to_end(f"{job}.rounds"),
                                                   what=f"the round log of {job!r}")]
    last = metas[-1] if metas else {}
    contributors = last.get("contributors", [])
    counts = last.get("counts", {})
    version = int(last.get("version", -1))
    row = {"job": job, "version": version, "round": int(last.get("round", 0)),
           "rounds_closed": max(0, len(metas) - 1), "sites": [c["site"] for c in contributors],
           "samples": int(last.get("samples", 0)),
           "update_bytes": sum(int(c.get("bytes", 0)) for c in contributors),
           "round_seconds": float(last.get("round_seconds", 0.0)),
           "staleness_max": max((int(c.get("staleness", 0)) for c in contributors), default=0),
           **{k: int(counts.get(k, 0)) for k in ("late_folded", "late_dropped", "duplicate", "rejected")}}
    m.FED_VERSION.labels(job=job).set(version)
    m.FED_PARTICIPANTS.labels(job=job).set(len(contributors))
    return row
