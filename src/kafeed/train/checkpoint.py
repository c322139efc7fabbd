"""Atomic training checkpoints that carry the loader state.

A checkpoint is two files in the checkpoint directory:

- ``step-00000100.pt``: ``torch.save`` of model, optimizer, schedule, RNG states,
  step and loader state;
- ``step-00000100.json``: a manifest (version, step, the ``.pt`` file's size and
  sha256, the loader state and lineage as plain JSON) written last.

Each file is written to a temporary name, fsynced and renamed, then the
directory is fsynced, so a crash leaves either a complete checkpoint or one
without a manifest. A checkpoint is valid when its manifest parses and the
``.pt`` matches its checksum; :meth:`CheckpointManager.load_latest` skips torn
or corrupt ones with a warning and falls back to the previous. Only the newest
``keep`` checkpoints are kept. Manifests can be read without torch
(:func:`read_manifest`), which is what ``kafeed lineage`` does.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kafeed.errors import ConfigError, KafeedError
from kafeed.train.defaults import TRAIN_DEFAULTS

log = logging.getLogger("kafeed")

MANIFEST_VERSION = 1
_NAME = re.compile(r"^step-(\d{8,})\.json$")


class CheckpointError(KafeedError):
    """No usable checkpoint, or one could not be written."""


@dataclass(frozen=True)
class Checkpoint:
    step: int
    path: Path
    manifest: dict[str, Any]
    payload: dict[str, Any]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_atomic(path: Path, data: bytes) -> None:
    """Write one file as checkpoints are written (temporary name, fsync, rename, directory
    fsync): after a crash ``path`` holds the old bytes or the new ones, never part of them."""
    _write_atomic(path, data)
    _fsync_dir(path.parent)


def read_manifest(path: Path) -> dict[str, Any]:
    """Read and check one manifest (not the weights); raises :class:`CheckpointError`."""
    try:
        manifest: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"Checkpoint manifest {path} is unreadable: {exc}.") from exc
    if not isinstance(manifest, dict):
        raise CheckpointError(f"Checkpoint manifest {path} is not a JSON object.")
    if manifest.get("version") != MANIFEST_VERSION:
        raise CheckpointError(f"Checkpoint manifest {path} has unknown version "
                              f"{manifest.get('version')!r}.")
    return manifest


def resolve_manifest(path: Path) -> Path:
    """A checkpoint directory → its newest manifest; a ``.pt`` → its manifest."""
    if path.is_dir():
        manifests = sorted(p for p in path.iterdir() if _NAME.match(p.name))
        if not manifests:
            raise CheckpointError(f"{path} holds no checkpoint.")
        return manifests[-1]
    if path.suffix == ".pt":
        return path.with_suffix(".json")
    return path


def check_writable(directory: Path) -> None:
    """Prove ``directory`` takes checkpoints before any training: create it, write, fsync and
    remove a probe file. Directories it had to create are removed again, so a run that fails
    later, before its first checkpoint, leaves nothing behind. Raises :class:`ConfigError`.
    """
    created: list[Path] = []
    missing = directory.absolute()
    while not missing.exists() and missing != missing.parent:
        created.append(missing)
        missing = missing.parent
    probe = directory / f".kafeed-probe-{os.getpid()}"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as fh:
            fh.write(b"kafeed")
            fh.flush()
            os.fsync(fh.fileno())
        probe.unlink()
    except OSError as exc:
        with contextlib.suppress(OSError):
            probe.unlink(missing_ok=True)
        raise ConfigError(f"Cannot write checkpoints to {directory}: {exc.strerror or exc}.",
                          hint="Pass a writable --checkpoint-dir.") from None
    finally:
        for path in created:  # deepest first
            try:
                path.rmdir()
            except OSError:
                break


def load_checkpoint(pt: Path) -> Checkpoint:
    """The checkpoint ``pt`` (a ``step-*.pt``), checked against its manifest; raises
    :class:`CheckpointError` when it is gone, torn or corrupt."""
    import torch

    manifest_path = pt.with_suffix(".json")
    if not manifest_path.exists():
        raise CheckpointError(f"Checkpoint {pt} has no manifest {manifest_path.name}: it was "
                              "pruned (see --keep) or never finished.")
    manifest = read_manifest(manifest_path)
    try:
        data = pt.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"Checkpoint {pt} is unreadable: {exc.strerror or exc}.") from None
    if len(data) != manifest["bytes"] or hashlib.sha256(data).hexdigest() != manifest["sha256"]:
        raise CheckpointError(f"{pt} does not match its checksum (torn or corrupt).")
    payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
    return Checkpoint(step=int(manifest["step"]), path=pt, manifest=manifest, payload=payload)


class CheckpointManager:
    """Save and find checkpoints in ``directory``, keeping the newest ``keep``."""

    def __init__(self, directory: Path, *, keep: int = TRAIN_DEFAULTS["keep"]) -> None:
        if keep < 1:
            raise CheckpointError("keep must be at least 1.")
        self.directory = directory
        self.keep = keep

    def save(self, step: int, payload: dict[str, Any], *, manifest: dict[str, Any] | None = None) -> Path:
        """Write ``payload`` (torch objects) and its manifest atomically; return the ``.pt`` path."""
        import torch

        self.directory.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        torch.save(payload, buf)
        data = buf.getvalue()
        pt = self.directory / f"step-{step:08d}.pt"
        _write_atomic(pt, data)
        doc = {
            **(manifest or {}),
            "version": MANIFEST_VERSION,
            "step": step,
            "file": pt.name,
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "created": time.time(),
        }
        _write_atomic(pt.with_suffix(".json"), json.dumps(doc, indent=1).encode())
        _fsync_dir(self.directory)
        self._prune()
        return pt

    def _manifests(self) -> list[tuple[int, Path]]:
        if not self.directory.exists():
            return []
        found = []
        for p in self.directory.iterdir():
            m = _NAME.match(p.name)
            if m:
                found.append((int(m.group(1)), p))
        return sorted(found)

    def _prune(self) -> None:
        for _step, manifest in self._manifests()[: -self.keep]:
            for path in (manifest.with_suffix(".pt"), manifest):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass

    def _verified(self) -> Iterator[tuple[int, Path, dict[str, Any], bytes]]:
        """Newest first: (step, .pt path, manifest, .pt bytes) of each checkpoint whose file
        matches its manifest's size and checksum; the others are skipped with a warning."""
        for step, manifest_path in reversed(self._manifests()):
            try:
                manifest = read_manifest(manifest_path)
                pt = manifest_path.with_name(manifest["file"])
                data = pt.read_bytes()
                if len(data) != manifest["bytes"] or hashlib.sha256(data).hexdigest() != manifest["sha256"]:
                    raise CheckpointError(f"{pt} does not match its checksum (torn or corrupt).")
            except (CheckpointError, OSError, KeyError, ValueError) as exc:
                log.warning("skipping checkpoint at step %d: %s", step, exc)
                continue
            yield step, pt, manifest, data

    def latest_manifest(self) -> dict[str, Any] | None:
        """The manifest of the checkpoint :meth:`load_latest` picks, read without torch
        (for the loader state, which the manifest holds as plain JSON); None without one."""
        for _step, _pt, manifest, _data in self._verified():
            return manifest
        return None

    def load_latest(self) -> Checkpoint | None:
        """The newest valid checkpoint, or None when there is none at all."""
        import torch

        for step, pt, manifest, data in self._verified():
            try:
                payload = torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)
            except (RuntimeError, ValueError, KeyError, OSError) as exc:
                log.warning("skipping checkpoint at step %d: %s", step, exc)
                continue
            return Checkpoint(step=step, path=pt, manifest=manifest, payload=payload)
        return None
