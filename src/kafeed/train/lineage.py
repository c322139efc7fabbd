"""`kafeed lineage`: which data went into a checkpoint, read from its manifest (no torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError
from kafeed.train.checkpoint import CheckpointError, read_manifest, resolve_manifest


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
