"""`kafeed lineage`: which data went into a checkpoint; with the topic's archive table, the ids
of the documents in those offset ranges.

Lineage answers "which data went into this model?": per partition, the offset ranges delivered
to the optimizer, computed from the loader states in the checkpoint (everything from the run's
start offset up to ``next``, plus offsets delivered beyond it), the same per rank, and the number
of documents fully trained on. It reads a checkpoint of every path: ``kafeed train``'s manifest
(no torch), a Hugging Face ``checkpoint-N`` folder (``kafeed_loader.json``) and a Lightning
``.ckpt`` (torch).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafeed.errors import ConfigError, ResumeMismatch
from kafeed.loader.nodes.mixing import tokens_delivered
from kafeed.loader.state.checkpoint import buffered, carried, reader_entries
from kafeed.loader.state.rank_states import is_rank_states, loadable_state, rank_states
from kafeed.train.checkpoint import CheckpointError, read_manifest, resolve_manifest

if TYPE_CHECKING:
    from kafeed.archive import CatalogSettings

log = logging.getLogger("kafeed")

LINEAGE_VERSION = 1
HF_STATE_FILE = "kafeed_loader.json"  # what KafeedTrainer writes into each checkpoint-N
# Where Lightning's fit loop keeps the training loader's state inside a .ckpt.
_LIGHTNING_PATH = ("loops", "fit_loop", "state_dict", "combined_loader", 0)


def _ranges(start: int, next_offset: int, delivered: list[int]) -> list[list[int]]:
    """Half-open offset ranges covering [start, next) and each delivered offset beyond."""
    spans: list[list[int]] = [[start, next_offset]] if next_offset > start else []
    for off in sorted(delivered):
        if spans and spans[-1][1] == off:
            spans[-1][1] = off + 1
        else:
            spans.append([off, off + 1])
    return spans


def _partitions(state: dict[str, Any], starts: dict[str, int]) -> dict[str, Any]:
    partitions: dict[str, Any] = {}
    for reader in reader_entries(state):
        for key, entry in reader["reader"]["partitions"].items():
            start = starts.get(key, 0)
            partitions[key] = {"ranges": _ranges(start, int(entry["next"]), list(entry["delivered"])),
                               "next": int(entry["next"]), "start": start}
    return dict(sorted(partitions.items()))


def lineage_of(saved: dict[str, Any], starts: dict[str, int]) -> dict[str, Any]:
    """Lineage of a loader state (one rank's, merged, or every rank's), given each partition's
    first offset of the run (0 where unknown). With every rank's states, ``ranks`` names the
    partitions and offset ranges each rank trained on."""
    state = loadable_state(saved)
    documents = 0
    partial = 0
    for reader in reader_entries(state):
        carry = carried(reader)
        documents += int(reader["reader"]["stats"]["records"]) - len(buffered(reader)) - len(carry)
        partial += sum(1 for _k, _o, emitted in carry if emitted)
    out: dict[str, Any] = {"version": LINEAGE_VERSION, "partitions": _partitions(state, starts),
                           "documents": documents, "documents_partly_trained": partial, "starts": starts}
    if is_rank_states(saved):
        out["ranks"] = [{"rank": rank, "partitions": _partitions(one, starts)}
                        for rank, one in enumerate(rank_states(saved))]
    sources = tokens_delivered(state)
    if sources:  # a mixture: window tokens each source delivered
        out["source_tokens"] = sources
    return out


def _framework_lineage(path: Path) -> dict[str, Any] | None:
    """The lineage of a Hugging Face checkpoint folder or a Lightning ``.ckpt``; None for a
    path of kafeed's own checkpoints."""
    if path.is_dir() and (path / HF_STATE_FILE).is_file():
        path = path / HF_STATE_FILE
    if path.name == HF_STATE_FILE:
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"The kafeed loader state {path} is unreadable: {exc}.") from None
        if not isinstance(doc, dict) or "loader" not in doc:
            raise CheckpointError(f"The kafeed loader state {path} has an unknown layout.")
        saved, step, where = doc["loader"], doc.get("step"), path.parent
    elif path.suffix == ".ckpt":
        import torch

        try:
            found: Any = torch.load(path, map_location="cpu", weights_only=False)
            step = found.get("global_step")
            for part in _LIGHTNING_PATH:
                found = found[part]
        except (OSError, RuntimeError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise CheckpointError(f"{path} holds no kafeed loader state: {exc}.",
                                  hint="Pass a Lightning checkpoint of a KafeedDataModule run.") from None
        saved, where = found, path
    else:
        return None
    try:
        lineage = lineage_of(saved, {})
        fingerprint = loadable_state(saved)["fingerprint"]
    except (ResumeMismatch, KeyError, TypeError) as exc:
        detail = exc.message if isinstance(exc, ResumeMismatch) else f"no {exc}"
        raise CheckpointError(f"The loader states in {path} are not usable: {detail}") from None
    return {"checkpoint": str(where), "step": step, "topic": ",".join(fingerprint.get("topics", [])),
            "tokenizer": fingerprint.get("tokenizer"),
            **{k: lineage[k] for k in ("documents", "documents_partly_trained", "partitions")},
            **{k: lineage[k] for k in ("ranks", "source_tokens") if k in lineage}}


def checkpoint_lineage(path: Path) -> dict[str, Any]:
    """The lineage recorded with a checkpoint: kafeed's (a ``step-*`` file or a checkpoint
    directory), a Hugging Face ``checkpoint-N`` folder or a Lightning ``.ckpt``."""
    framework = _framework_lineage(path)
    if framework is not None:
        return framework
    manifest_path = resolve_manifest(path)
    if not manifest_path.exists():
        raise ConfigError(f"{manifest_path} does not exist.",
                          hint="Pass a checkpoint directory, a step-*.pt or its step-*.json, a Hugging Face "
                               "checkpoint-N folder or a Lightning .ckpt.")
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
        **{k: lineage[k] for k in ("ranks", "source_tokens") if k in lineage},
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
