"""Lineage of a global model: the rounds that made it, the sites of each, and, where a site's
ledger can be read, the data offsets each update trained on.

Version N holds every round up to N (each version starts from the one before), so its lineage
is the round log's records 1..N. The round log (on the training cluster) names, per round, the
(site, round) of every update used; the data offsets are only at the site, in its ledger
(:mod:`kafeed.federate.ledger`): the training cluster never learns them. A site whose ledger is
not readable from here is listed without them (``"ledger": null``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError
from kafeed.federate.config import FederationSettings
from kafeed.federate.coordinator import read_round_log
from kafeed.federate.ledger import Ledger
from kafeed.kafka import KafkaClients


def global_lineage(settings: FederationSettings, version: int | None = None,
                   ledgers: Mapping[str, Path] | None = None) -> dict[str, Any]:
    """What global ``version`` (default: the newest) was trained on. ``ledgers`` maps a site to
    its state directory when it is not the job's own ``state_dir`` layout."""
    records = [blob.arrays()[1] for blob in read_round_log(KafkaClients(settings.training_connection()),
                                                           settings)]
    if not records:
        raise ConfigError(f"Job {settings.job!r} has no global model yet.",
                          hint="Start its coordinator: kafeed federate coordinator --config FILE.")
    newest = int(records[-1]["version"])
    version = newest if version is None else version
    if not 0 <= version <= newest:
        raise ConfigError(f"Job {settings.job!r} has global versions 0 to {newest}, not {version}.")
    rounds = []
    for meta in records[1:version + 1]:
        sites = []
        for c in meta["contributors"]:
            folder = (ledgers or {}).get(c["site"]) or settings.site_dir(c["site"])
            entry = Ledger(folder).entry(int(c["round"])) if folder.is_dir() else None
            sites.append({
                "site": c["site"], "round": int(c["round"]), "samples": c["samples"],
                "staleness": c.get("staleness", 0),
                "ledger": None if entry is None else {
                    "path": str(entry.path), "samples": entry.samples, "sha256": entry.sha256,
                    "base_version": entry.base_version, "partitions": entry.offsets()}})
        rounds.append({"round": int(meta["round"]), "version": int(meta["version"]),
                       "strategy": meta.get("strategy"), "counts": meta.get("counts", {}), "sites": sites})
    return {"job": settings.job, "version": version, "newest": newest, "rounds": rounds}
