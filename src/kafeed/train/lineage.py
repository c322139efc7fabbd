"""`kafeed lineage`: which data went into a checkpoint, read from its manifest (no torch);
with the topic's archive table, the ids of the documents in those offset ranges."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafeed.errors import ConfigError
from kafeed.train.checkpoint import CheckpointError, read_manifest, resolve_manifest

if TYPE_CHECKING:
    from kafeed.archive import CatalogSettings

log = logging.getLogger("kafeed")


def checkpoint_lineage(path: Path) -> dict[str, Any]:
    """The lineage recorded with a checkpoint (file, its manifest, or a checkpoint directory)."""
    manifest_path = resolve_manifest(path)
    if not manifest_path.exists():
        raise ConfigError(f"{manifest_path} does not exist.",
                          hint="Pass a checkpoint directory, a step-*.pt or its step-*.json.")
    manifest = read_manifest(manifest_path)
    lineage = manifest.get("lineage")
    if lineage is None:
        raise CheckpointError(f"{manifest_path} records no lineage.")
    config = manifest.get("config", {})
    return {
        "checkpoint": str(manifest_path.with_name(manifest["file"])),
        "step": manifest["step"],
        "topic": config.get("topic"),
        "tokenizer": config.get("tokenizer_fingerprint"),
        "documents": lineage["documents"],
        "documents_partly_trained": lineage["documents_partly_trained"],
        "partitions": lineage["partitions"],
        **({"source_tokens": lineage["source_tokens"]} if "source_tokens" in lineage else {}),
    }


def archived_documents(info: dict[str, Any], table_name: str, catalog: CatalogSettings) -> dict[str, Any]:
    """The ids of the documents a checkpoint trained on, in (partition, offset) order, read from
    the archive table of its topic: the rows in the lineage's offset ranges that the loader
    delivered (records the table kept raw, which the loader skipped as bad, have no id)."""
    from kafeed.archive.catalog import check_table, load_table, open_catalog
    from kafeed.archive.schema import PROP_TOPIC

    table = load_table(open_catalog(catalog), table_name)
    topic = table.properties.get(PROP_TOPIC, "")
    check_table(table, table_name, topic=topic, cluster_id=None, kind=None)
    ranges = {int(key.rpartition(":")[2]): entry["ranges"]
              for key, entry in info["partitions"].items() if key.rpartition(":")[0] == topic}
    if not ranges:
        trained = sorted({key.rpartition(":")[0] for key in info["partitions"]})
        raise ConfigError(f"Table {table_name!r} archives topic {topic!r}, which checkpoint "
                          f"{info['checkpoint']} did not train on (it trained on {', '.join(trained)}).",
                          hint="Pass the archive table of the topic it trained on.")
    terms = [f"(partition = {p} AND offset >= {int(a)} AND offset < {int(b)})"
             for p, spans in sorted(ranges.items()) for a, b in spans]
    ids: list[Any] = []
    if terms:
        rows = table.scan(row_filter=" OR ".join(terms),
                          selected_fields=("partition", "offset", "kind", "id")).to_arrow()
        rows = rows.sort_by([("partition", "ascending"), ("offset", "ascending")])
        ids = [i for k, i in zip(rows["kind"].to_pylist(), rows["id"].to_pylist(), strict=True)
               if k != "raw"]
    documents = int(info["documents"])
    if len(ranges) == len(info["partitions"]) and len(ids) < documents:  # (a mixture's: not all here)
        log.warning("kafeed lineage: table %s holds %d of the %d documents the checkpoint trained on; "
                    "is the archive behind the topic?", table_name, len(ids), documents)
    return {"table": table_name, "topic": topic, "document_ids": ids}
